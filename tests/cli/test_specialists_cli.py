"""Specialists end to end: `zero exec` fanning out to three children, `zero specialists`, `zero sessions`."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any

from support.cli import lines, scripted, write_script, zero
from support.llm_server import LLMServer, Reply, anthropic_reply, openai_reply

FANOUT = """
[[turns]]
match = { system = "You are Zero", turn = 1 }
text = "Fanning out."
tool_calls = [
  { name = "Task", arguments = { name = "explorer", description = "map src", prompt = "Map src." } },
  { name = "Task", arguments = { name = "code-review", description = "review app", prompt = "Review app.py." } },
  { name = "Task", arguments = { name = "tester", description = "run tests", prompt = "Run the tests." } },
]
[[turns]]
match = { system = "You are Zero", turn = 2 }
text = "Explorer, reviewer and tester all reported back."

[[turns]]
match = { system = "You are the explorer", turn = 1 }
delay = 0.3
tool_calls = [{ name = "glob", arguments = { pattern = "src/**" } }]
[[turns]]
match = { system = "You are the explorer", turn = 2 }
text = "src holds app.py."

[[turns]]
match = { system = "You are the code reviewer", turn = 1 }
delay = 0.3
tool_calls = [{ name = "read_file", arguments = { path = "src/app.py" } }]
[[turns]]
match = { system = "You are the code reviewer", turn = 2 }
text = "One TODO in app.py."

[[turns]]
match = { system = "You are the tester", turn = 1 }
delay = 0.3
tool_calls = [{ name = "bash", arguments = { command = "echo 3 passed" } }]
[[turns]]
match = { system = "You are the tester", turn = 2 }
text = "3 passed."
"""


def test_exec_fans_out_to_three_concurrent_children(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "fanout.toml", FANOUT)
    done = zero(
        "exec",
        "Review the repo",
        *scripted(script, workspace),
        "--output-format",
        "stream-json",
    )
    assert done.returncode == 0, done.stderr
    events = lines(done.stdout)
    root = events[0]["sessionId"]
    starts = [e for e in events if e["type"] == "subagent_start"]
    ends = [e for e in events if e["type"] == "subagent_end"]
    assert len(starts) == 3 and len(ends) == 3
    assert {s["specialist"] for s in starts} == {"explorer", "code-review", "tester"}
    for s in starts:
        assert s["parentSessionId"] == root and s["rootSessionId"] == root and s["agentName"] == s["specialist"]
        assert s["sessionId"].startswith("child_")
    for e in ends:
        assert e["status"] == "completed" and set(e) >= {"usage", "costUsd", "durationMs"}
    # interleaved: every child started before any ended, and their tool calls mix
    kinds = [e["type"] for e in events]
    assert max(kinds.index("subagent_start", i) for i in range(3)) < kinds.index("subagent_end")
    child_calls = [e["sessionId"] for e in events if e["type"] == "tool_call" and "sessionId" in e]
    assert len(set(child_calls)) == 3
    final = [e for e in events if e["type"] == "final"][0]
    assert final["text"] == "Explorer, reviewer and tester all reported back."
    assert "sessionId" not in final

    tree = json.loads(zero("sessions", "tree", root, "--json").stdout)
    assert len(tree["children"]) == 3 and all(c["depth"] == 1 for c in tree["children"])
    own = tree["usage"]["totalTokens"] + sum(c["usage"]["totalTokens"] for c in tree["children"])
    assert tree["subtreeUsage"]["totalTokens"] == own
    text = zero("sessions", "tree", root).stdout
    assert text.count("· completed") == 4 and "(subtree " in text and text.endswith("\n4 completed\n")  # (with it)
    for name in ("explorer", "code-review", "tester"):
        assert re.search(rf"── ✓ {name} [0-9a-f]{{8}} · scripted", text), text


def _responder(flavour: str) -> Any:
    """Answer each request by who is asking (the system prompt) and how far it has got."""
    reply = openai_reply if flavour == "openai" else anthropic_reply

    def respond(request: dict[str, Any]) -> Reply:
        messages = request["messages"]
        system = request.get("system") or messages[0]["content"]
        done = sum(m["role"] == "assistant" for m in messages)
        if system.startswith("You are Zero"):
            if done == 0:
                tasks = [
                    (f"call_{n}", "Task", {"name": n, "prompt": f"Do the {n} part."})
                    for n in ("explorer", "code-review", "planner")
                ]
                return reply("Delegating.", tasks)
            return reply("Everyone reported back.")
        if done == 0:
            return reply("", [("call_x", "list_directory", {})])
        return reply("Child report.")

    return respond


def _check_fanout(done: Any) -> None:
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == "Everyone reported back."
    tree = json.loads(zero("sessions", "tree", result["sessionId"], "--json").stdout)
    assert sorted(c["specialist"] for c in tree["children"]) == ["code-review", "explorer", "planner"]
    assert all(c["status"] == "completed" for c in tree["children"])
    assert result["subtreeUsage"]["totalTokens"] == tree["subtreeUsage"]["totalTokens"] > result["usage"]["totalTokens"]


def test_fanout_through_the_openai_adapter(workspace: Path) -> None:
    with LLMServer(_responder("openai")) as server:
        done = zero(
            "exec",
            "Review",
            "--base-url",
            server.url,
            "--model",
            "gpt-4.1-mini",
            "--cwd",
            str(workspace),
            "--output-format",
            "json",
        )
        assert len(server.requests) == 8
    _check_fanout(done)


def test_fanout_through_the_anthropic_adapter(workspace: Path) -> None:
    with LLMServer(_responder("anthropic")) as server:
        done = zero(
            "exec",
            "Review",
            "--provider",
            "anthropic",
            "--cwd",
            str(workspace),
            "--output-format",
            "json",
            env={"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": server.url},
        )
    _check_fanout(done)


def _manifests(workspace: Path) -> Path:
    folder = workspace / ".zero" / "specialists"
    folder.mkdir(parents=True)
    (folder / "typo.toml").write_text('name = "typo"\ndescription = "x"\ntools = ["read-only"]\npromt = "x"\n')
    (folder / "cycle-a.toml").write_text('name = "cycle-a"\nextends = "cycle-b"\n')
    (folder / "cycle-b.toml").write_text('name = "cycle-b"\nextends = "cycle-a"\n')
    (folder / "api-review.toml").write_text(
        'name = "api-review"\nextends = "code-review"\nprompt = "Focus on API compatibility."\n'
    )
    (folder / "docs-writer.toml").write_text(
        'name = "docs-writer"\ndescription = "Writes docs."\ntools = ["edit"]\nprompt = "You write documentation."\n'
    )
    return folder


def test_list_shows_good_specialists_and_every_bad_file(workspace: Path) -> None:
    folder = _manifests(workspace)
    done = zero("specialists", "list", "--cwd", str(workspace))
    assert done.returncode == 0
    assert "api-review   [project]" in done.stdout and "docs-writer  [project]" in done.stdout
    assert "explorer     [builtin]" in done.stdout
    assert f"{folder}/typo.toml:4: unknown key 'promt' (did you mean \"prompt\"?)" in done.stdout
    assert f"{folder}/cycle-a.toml: extends cycle: cycle-a -> cycle-b -> cycle-a" in done.stdout
    data = json.loads(zero("specialists", "list", "--cwd", str(workspace), "--json").stdout)
    assert {s["name"] for s in data["specialists"]} >= {"api-review", "docs-writer", "explorer"}
    errors = {(Path(e["path"]).name, e["key"]) for e in data["errors"]}
    assert errors == {("typo.toml", "promt"), ("cycle-a.toml", "extends"), ("cycle-b.toml", "extends")}


def test_new_writes_a_valid_manifest_and_refuses_to_overwrite(workspace: Path) -> None:
    done = zero(
        "specialists",
        "new",
        "migrator",
        "--tools",
        "read-only,edit",
        "--description",
        "Migrates code.",
        "--cwd",
        str(workspace),
    )
    path = workspace / ".zero" / "specialists" / "migrator.toml"
    assert done.returncode == 0 and path.exists(), done.stderr
    shown = json.loads(zero("specialists", "show", "migrator", "--cwd", str(workspace), "--json").stdout)
    assert (
        shown["location"] == "project" and "write_file" in shown["tools"] and shown["trusted"] is True
    )  # you wrote it
    again = zero("specialists", "new", "migrator", "--cwd", str(workspace))
    assert again.returncode == 2 and "already exists; pass --force" in again.stderr
    path.chmod(0o600)  # the user's choice of who reads it
    assert zero("specialists", "new", "migrator", "--force", "--cwd", str(workspace)).returncode == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and "Specialist migrator: say here" in path.read_text()
    bad = zero("specialists", "new", "Bad_Name", "--cwd", str(workspace))
    assert bad.returncode == 2 and "invalid specialist name" in bad.stderr
    assert zero("specialists", "new", "x", "--tools", "nope", "--cwd", str(workspace)).returncode == 2


def test_show_says_what_a_specialist_extends_and_what_it_inherits(workspace: Path) -> None:
    folder = workspace / ".zero" / "specialists"
    folder.mkdir(parents=True)
    (folder / "reviewer.toml").write_text(
        'name = "reviewer"\nextends = "explorer"\nprompt = "Review."\nmax_turns = 5\n'
    )
    (folder / "strict.toml").write_text('name = "strict"\nextends = "reviewer"\ntools = ["read_file"]\n')
    here = ["--cwd", str(workspace)]
    reviewer = zero("specialists", "show", "reviewer", *here).stdout.splitlines()
    assert reviewer[4] == "extends: explorer (inherits description, tools; its own prompt follows explorer's)"
    strict = zero("specialists", "show", "strict", *here).stdout.splitlines()
    assert strict[4] == "extends: reviewer -> explorer (inherits description, max_turns; its prompt is reviewer's)"
    shown = json.loads(zero("specialists", "show", "strict", *here, "--json").stdout)
    assert shown["extends"] == "reviewer" and shown["inherits"] == ["description", "prompt", "max_turns"]
    explorer = json.loads(zero("specialists", "show", "explorer", *here, "--json").stdout)
    assert explorer["extends"] is None and explorer["inherits"] == []
    assert "extends" not in zero("specialists", "show", "explorer", *here).stdout


def test_show_says_where_a_specialists_tasks_work_and_extends_passes_it_on(workspace: Path) -> None:
    folder = workspace / ".zero" / "specialists"
    folder.mkdir(parents=True)
    (folder / "aside.toml").write_text('name = "aside"\nextends = "worker"\nisolation = "worktree"\n')
    (folder / "after.toml").write_text('name = "after"\nextends = "aside"\n')
    here = ["--cwd", str(workspace)]
    assert "isolation: worktree\n" in zero("specialists", "show", "after", *here).stdout
    shown = json.loads(zero("specialists", "show", "after", *here, "--json").stdout)
    assert shown["isolation"] == "worktree" and "isolation" in shown["inherits"]
    assert json.loads(zero("specialists", "show", "worker", *here, "--json").stdout)["isolation"] is None
    (folder / "bad.toml").write_text('name = "bad"\nextends = "worker"\nisolation = "branch"\n')
    bad = zero("specialists", "validate", str(folder / "bad.toml"))
    assert (bad.returncode, bad.stdout) == (
        2,
        f"invalid  {folder / 'bad.toml'}:3: isolation: Input should be 'worktree' or 'none'\n",
    )


def test_validate_reports_each_file(workspace: Path) -> None:
    folder = _manifests(workspace)
    done = zero(
        "specialists", "validate", str(folder / "api-review.toml"), str(folder / "typo.toml"), "--cwd", str(workspace)
    )
    assert done.returncode == 2
    assert f"ok       {folder / 'api-review.toml'}" in done.stdout
    assert f"invalid  {folder / 'typo.toml'}:4: unknown key 'promt'" in done.stdout
    ok = zero("specialists", "validate", str(folder / "docs-writer.toml"), "--cwd", str(workspace))
    assert ok.returncode == 0


def test_sessions_show_and_lineage(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "fanout.toml", FANOUT)
    done = zero(
        "exec",
        "Review the repo",
        *scripted(script, workspace),
        "--output-format",
        "json",
    )
    root = json.loads(done.stdout)["sessionId"]
    child = json.loads(zero("sessions", "tree", root, "--json").stdout)["children"][0]["sessionId"]
    assert zero("sessions", "lineage", child).stdout.strip() == f"{root} -> {child}"
    shown = zero("sessions", "show", root).stdout
    assert "usage: own " in shown and " · with children " in shown and shown.count("⇢ ") == 3
    missing = zero("sessions", "show", "nope")
    assert missing.returncode == 2 and "no session nope in" in missing.stderr
    assert zero("sessions", "show", "../etc").returncode == 2


def test_validate_reports_every_problem_of_a_file_at_once(workspace: Path) -> None:
    bad = workspace / "bad.toml"
    bad.write_text(
        'name = "Bad_Name"\ndescripton = "x"\nmax_turns = 0\ntools = ["read-only", "shovel"]\nprompt = "p"\n'
    )
    done = zero("specialists", "validate", str(bad), "--cwd", str(workspace))
    assert done.returncode == 2
    assert done.stdout.splitlines() == [
        f"invalid  {bad} (4 problems):",
        f"           {bad}:1: name 'Bad_Name' is not a valid name: use lowercase letters, digits and dashes, "
        "starting with a letter (at most 64)",
        f"           {bad}:2: unknown key 'descripton' (did you mean \"description\"?)",
        f"           {bad}:3: max_turns: Input should be greater than or equal to 1",
        f"           {bad}:4: unknown tool or category 'shovel'",
    ]
    data = json.loads(zero("specialists", "validate", str(bad), "--cwd", str(workspace), "--json").stdout)
    assert [e["key"] for e in data["files"][0]["errors"]] == ["name", "descripton", "max_turns", "tools"]
