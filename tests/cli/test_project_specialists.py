"""A cloned repository's specialists (``.zero/specialists/``) may narrow what you set, never raise it: turns,
output cap, timeout and budget stay within yours, tools within the manifest of the same name (a name only the
project has: read-only and plan), and a model or provider you never configured waits for your trust."""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.cli import scripted, write_script, zero

from zero.sessions import FileSessionStore, SessionMetadata

MINE = Path("config") / "zero"

GREEDY = """
name = "explorer"
description = "Explores, greedily."
tools = ["read-only", "edit", "execute"]
max_turns = 10000
max_output_tokens = 10000000
model = "o1-pro"
prompt = "You are the project's explorer."
"""

ONE_TASK = """
[[turns]]
match = { system = "You are Zero", turn = 1 }
tool_calls = [{ name = "Task", arguments = { name = "explorer", prompt = "Look around." } }]
[[turns]]
match = { system = "You are Zero" }
text = "Done."
times = 0

[[turns]]
match = { system = "project's explorer" }
tool_calls = [
  { name = "write_file", arguments = { path = "pwned.txt", content = "x" } },
  { name = "list_directory", arguments = { path = "." } },
]
times = 0
"""


def store() -> FileSessionStore:
    return FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")


def children() -> list[SessionMetadata]:
    return sorted((m for m in store().list() if m.session_kind == "child"), key=lambda m: m.created_at)


def model_calls(session_id: str) -> int:
    return sum(1 for e in store().events(session_id) if e.event.kind == "message" and e.event.role == "assistant")


def user_file(tmp_path: Path, relative: str, text: str) -> Path:
    path = tmp_path / MINE / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def project_file(workspace: Path, name: str, text: str) -> Path:
    path = workspace / ".zero" / "specialists" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_project_explorer_is_held_to_your_turns_tools_and_model(workspace: Path, tmp_path: Path) -> None:
    user_file(tmp_path, "config.toml", "max_turns = 4\n")
    path = project_file(workspace, "explorer", GREEDY)
    done = zero("exec", "Explore", *scripted(write_script(tmp_path / "s.toml", ONE_TASK), workspace))
    assert done.returncode == 0, done.stderr
    [child] = children()
    assert child.status == "max_turns" and model_calls(child.session_id) == 4  # your 4, not the project's 10,000
    assert child.model_id == "scripted"  # the caller's model, not o1-pro
    results = [e.event for e in store().events(child.session_id) if e.event.kind == "tool_result"]
    assert results[0].output.startswith("Error: there is no tool named 'write_file'")
    assert not (workspace / "pwned.txt").exists()
    warned = done.stderr
    lowered = "a project's specialist may lower your limits, not raise them"
    assert f"zero: warning: {path}: 'max_turns = 10000' lowered to 4: {lowered}" in warned
    assert f"zero: warning: {path}: 'max_output_tokens = 10000000' lowered to 4096: {lowered}" in warned
    assert (
        f"zero: warning: {path}: tools write_file, edit_file, bash not granted: a project's specialist gets no more "
        "than the built-in one of that name (read_file, list_directory, glob, grep); zero specialists trust "
        "explorer grants them"
    ) in warned
    assert (
        f"zero: warning: {path}: model = 'o1-pro' not used, it runs on the caller's model: a project's specialist "
        "may pick only a model and provider you configured; zero specialists trust explorer lets it"
    ) in warned
    listed = json.loads(zero("specialists", "list", "--json", "--cwd", str(workspace)).stdout)
    [explorer] = [s for s in listed["specialists"] if s["name"] == "explorer"]
    assert explorer["location"] == "project" and explorer["trusted"] is False and len(explorer["narrowed"]) == 4
    assert explorer["maxTurns"] == 4 and explorer["model"] is None and "bash" not in explorer["tools"]


CAPPED = """
[[turns]]
match = { system = "You are Zero", turn = 1 }
tool_calls = [
  { name = "Task", arguments = { name = "explorer", description = "cap", prompt = "cap" } },
  { name = "Task", arguments = { name = "explorer", description = "budget", prompt = "budget" } },
  { name = "Task", arguments = { name = "explorer", description = "slow", prompt = "slow" } },
]
[[turns]]
match = { system = "You are Zero", turn = 2 }
text = "Done."

[[turns]]
match = { user = "cap" }
text = "A long answer"
finish = "length"

[[turns]]
match = { user = "budget", turn = 1 }
tool_calls = [{ name = "list_directory", arguments = { path = "." } }]
usage = { prompt_tokens = 500, completion_tokens = 10 }

[[turns]]
match = { user = "slow" }
delay = 30
text = "Too late."
"""


def test_a_project_manifest_cannot_lift_your_manifests_output_cap_budget_or_timeout(
    workspace: Path, tmp_path: Path
) -> None:
    user_file(
        tmp_path,
        "specialists/explorer.toml",
        'name = "explorer"\ndescription = "Mine."\nprompt = "You are my explorer."\nmax_output_tokens = 2000\n'
        "timeout_seconds = 0.5\n[budget]\ntokens = 100\n",
    )
    path = project_file(
        workspace,
        "explorer",
        'name = "explorer"\ndescription = "Theirs."\nprompt = "You are theirs."\nmax_output_tokens = 10000000\n'
        "timeout_seconds = 86400\n[budget]\ntokens = 1000000000\ncost_usd = 1000.0\n",
    )
    done = zero("exec", "Explore", *scripted(write_script(tmp_path / "s.toml", CAPPED), workspace))
    assert done.returncode == 0, done.stderr
    statuses = {c.title: c.status for c in children()}
    assert statuses == {"cap": "output_capped", "budget": "budget_exhausted", "slow": "timed_out"}
    capped = next(c for c in children() if c.title == "cap")
    [error] = [e.event for e in store().events(capped.session_id) if e.event.kind == "error"]
    assert error.message.startswith("the answer was cut: the model reached the output cap of 2000 tokens a call")
    for asked, yours in (
        ("max_output_tokens = 10000000", "2000"),
        ("timeout_seconds = 86400", "0.5"),
        ("budget.tokens = 1000000000", "100"),
    ):
        assert f"{path}: '{asked}' lowered to {yours}: a project's specialist may lower your limits" in done.stderr
    assert "budget.cost_usd" not in done.stderr  # yours has no cost limit: any is a narrowing
    path.write_text('name = "explorer"\ndescription = "Theirs."\nprompt = "You are theirs."\n')
    listed = json.loads(zero("specialists", "list", "--json", "--cwd", str(workspace)).stdout)
    [explorer] = [s for s in listed["specialists"] if s["name"] == "explorer"]
    assert explorer["location"] == "project"  # a limit it leaves out is not a limit lifted:
    assert (explorer["timeoutSeconds"], explorer["budget"]["tokens"], explorer["maxOutputTokens"]) == (0.5, 100, 2000)


FIXER = """
name = "fixer"
description = "Fixes things."
tools = ["edit"]
model = "o1-pro"
prompt = "You are the project's fixer."
"""

FIX = """
[[turns]]
match = { system = "You are Zero", turn = 1 }
tool_calls = [{ name = "Task", arguments = { name = "fixer", prompt = "Fix it." } }]
[[turns]]
match = { system = "You are Zero", turn = 2 }
text = "Done."

[[turns]]
match = { system = "project's fixer", turn = 1 }
tool_calls = [{ name = "write_file", arguments = { path = "fixed.txt", content = "fixed" } }]
[[turns]]
match = { system = "project's fixer", turn = 2 }
text = "Fixed."
"""


def test_trusting_a_project_specialist_lets_it_run_as_written_until_its_file_changes(
    workspace: Path, tmp_path: Path
) -> None:
    path = project_file(workspace, "fixer", FIXER)
    run = ["exec", "Fix", *scripted(write_script(tmp_path / "s.toml", FIX), workspace)]
    done = zero(*run)
    assert done.returncode == 0, done.stderr
    assert children()[-1].model_id == "scripted" and not (workspace / "fixed.txt").exists()
    assert (
        f"{path}: tools write_file, edit_file not granted: a project's specialist gets no more than a specialist "
        "only the project has (read_file, list_directory, glob, grep, update_plan); zero specialists trust fixer"
    ) in done.stderr
    shown = zero("specialists", "show", "fixer", "--cwd", str(workspace)).stdout
    assert "location: project\n" in shown and "trusted: no (zero specialists trust fixer)\n" in shown
    assert f"narrowed: {path}: model = 'o1-pro' not used" in shown

    asked = zero("specialists", "trust", "fixer", "--cwd", str(workspace))  # no terminal, no --yes: it only shows
    assert asked.returncode == 2
    assert asked.stderr == "zero: error: trusting fixer needs --yes when there is no terminal to ask\n"
    assert f"fixer: a specialist of this project ({path}). Trusted, it runs as written:\n" in asked.stdout
    assert "  model: o1-pro (provider: the caller’s)\n" in asked.stdout
    assert "  tools: read_file, list_directory, glob, grep, write_file, edit_file\n" in asked.stdout
    trusted = zero("specialists", "trust", "fixer", "--yes", "--cwd", str(workspace))
    assert trusted.returncode == 0 and "trusted fixer in" in trusted.stdout
    listed = json.loads(zero("specialists", "list", "--json", "--cwd", str(workspace)).stdout)
    [fixer] = [s for s in listed["specialists"] if s["name"] == "fixer"]
    assert fixer["trusted"] is True and fixer["narrowed"] == [] and fixer["model"] == "o1-pro"

    done = zero(*run)
    assert done.returncode == 0 and "warning" not in done.stderr
    assert children()[-1].model_id == "o1-pro" and (workspace / "fixed.txt").read_text() == "fixed"

    (workspace / "fixed.txt").unlink()
    path.write_text(FIXER + "# an edit someone pushed\n")  # a changed file asks again
    done = zero(*run)
    assert children()[-1].model_id == "scripted" and not (workspace / "fixed.txt").exists()
    assert "zero specialists trust fixer lets it" in done.stderr
    assert "[project]" in zero("specialists", "list", "--cwd", str(workspace)).stdout

    builtin = zero("specialists", "trust", "worker", "--yes", "--cwd", str(workspace))
    assert builtin.returncode == 2 and "only a project's needs trusting" in builtin.stderr


def test_your_own_manifests_never_extend_a_projects(workspace: Path, tmp_path: Path) -> None:
    user_file(tmp_path, "specialists/reviewer.toml", 'name = "reviewer"\nextends = "explorer"\nprompt = "Review."\n')
    project_file(workspace, "explorer", GREEDY)
    listed = json.loads(zero("specialists", "list", "--json", "--cwd", str(workspace)).stdout)
    [reviewer] = [s for s in listed["specialists"] if s["name"] == "reviewer"]
    assert reviewer["tools"] == ["read_file", "list_directory", "glob", "grep"] and reviewer["model"] is None
    assert "project's explorer" not in reviewer["prompt"]  # the built-in explorer's, as you wrote it


def test_a_projects_config_cannot_vouch_for_its_specialists_model(workspace: Path, tmp_path: Path) -> None:
    (workspace / ".zero").mkdir()
    (workspace / ".zero" / "config.toml").write_text('model = "o1-pro"\n')
    path = project_file(workspace, "explorer", GREEDY)
    done = zero("exec", "Explore", *scripted(write_script(tmp_path / "s.toml", ONE_TASK), workspace))
    assert "the project picks the model 'o1-pro'" in done.stderr  # its config's pick is said
    assert f"{path}: model = 'o1-pro' not used" in done.stderr  # and is not one you configured


def test_a_project_specialist_may_not_raise_what_its_calls_cost(workspace: Path, tmp_path: Path) -> None:
    path = project_file(
        workspace,
        "explorer",
        'name = "explorer"\ndescription = "Thinks hard."\nprompt = "You think."\nreasoning_effort = "xhigh"\n',
    )
    listed = zero("specialists", "list", "--json", "--cwd", str(workspace))
    [explorer] = [s for s in json.loads(listed.stdout)["specialists"] if s["name"] == "explorer"]
    assert explorer["narrowed"] == [
        f"{path}: 'reasoning_effort = xhigh' lowered to the model default: a project's specialist may lower what "
        "its calls cost, not raise it"
    ]
    project_file(
        workspace,
        "explorer",
        'name = "explorer"\ndescription = "Thinks little."\nprompt = "You think."\nreasoning_effort = "low"\n',
    )
    listed = zero("specialists", "list", "--json", "--cwd", str(workspace))
    [explorer] = [s for s in json.loads(listed.stdout)["specialists"] if s["name"] == "explorer"]
    assert explorer["narrowed"] == []  # lowering is the project's to do
