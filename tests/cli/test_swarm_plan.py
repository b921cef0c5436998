"""``zero swarm plan GOAL`` end to end with a scripted planner: the team it writes validates; an invalid team is
reported and goes back to the planner once; a second invalid one exits 4 and writes nothing; ``--run --yes`` runs
it, and ``--run`` asks first on a terminal."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path
from typing import Any

from support.cli import Done, scripted, zero

from zero.agent.events import Event, MessageAdded, ToolFinished
from zero.agent.output_schema import SUBMIT_NOTE
from zero.cli import main
from zero.sessions import FileSessionStore, SessionMetadata

GOAL = "Review the code for bugs"
PLANNER = "You are the planner"

VALID: dict[str, Any] = {
    "name": "review",
    "budget": {"tokens": 200_000},
    "members": [
        {"name": "mapper", "specialist": "explorer", "prompt": "Map the modules."},
        {
            "name": "reviewer",
            "specialist": "code-review",
            "depends_on": ["mapper"],
            "prompt": "Review them, using this map:\n{{ mapper.output }}",
        },
    ],
}
CYCLIC: dict[str, Any] = {
    "name": "review",
    "members": [
        {"name": "mapper", "specialist": "explorer", "depends_on": ["reviewer"], "prompt": "Map the modules."},
        {
            "name": "reviewer",
            "specialist": "code-review",
            "depends_on": ["mapper"],
            "prompt": "Review {{ mapper.output }} and {{ tester.output }}.",
        },
    ],
}
FEEDBACK = "That team is not valid"

WRITTEN = '''name = "review"
goal = "Review the code for bugs"

[budget]
tokens = 200000

[[members]]
name = "mapper"
specialist = "explorer"
prompt = "Map the modules."

[[members]]
name = "reviewer"
specialist = "code-review"
depends_on = [
    "mapper",
]
prompt = """
Review them, using this map:
{{ mapper.output }}"""
'''


def submit(team: dict[str, Any], **match: Any) -> dict[str, Any]:
    """A planner's turn that submits ``team``."""
    return {"match": {"system": PLANNER, **match}, "tool_calls": [{"name": "submit_result", "arguments": team}]}


def script(tmp_path: Path, *turns: dict[str, Any]) -> Path:
    path = tmp_path / "planner.json"
    path.write_text(json.dumps({"turns": list(turns)}))
    return path


def plan(tmp_path: Path, workspace: Path, *turns: dict[str, Any], flags: tuple[str, ...] = ()) -> Done:
    return zero("swarm", "plan", GOAL, *scripted(script(tmp_path, *turns), workspace), *flags)


def sessions() -> list[SessionMetadata]:
    store = FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")
    return sorted(store.list(), key=lambda m: m.created_at)


def planner_log() -> list[Event]:
    """The events of the one planner session."""
    [meta] = [m for m in sessions() if m.specialist == "planner"]
    store = FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")
    return [e.event for e in store.events(meta.session_id)]


def planner_messages(role: str) -> list[str]:
    """What the planner session holds of ``role`` (assistant: one a model call)."""
    return [e.content for e in planner_log() if isinstance(e, MessageAdded) and e.role == role]


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def body(path: Path) -> str:
    """A written team file without its first line (the comment naming the planner session)."""
    head, rest = path.read_text().split("\n", 1)
    assert head.startswith("# Planned by zero swarm plan (planner session planner_"), head
    return rest


def test_the_planned_team_is_written_shown_and_validates(workspace: Path, tmp_path: Path) -> None:
    done = plan(tmp_path, workspace, submit(VALID, turn=1))
    assert done.returncode == 0, done.stderr
    written = workspace / "review.toml"  # the team's name, in the workspace
    assert body(written) == WRITTEN
    assert "Team review: 2 members in 2 waves" in done.stdout
    assert "  reviewer         code-review · scripted/scripted · auto · max 30 turns after mapper\n" in done.stdout
    assert "Estimate, low / expected / high" in done.stdout and "  total            tokens " in done.stdout
    assert f"Wrote {written} · planner session planner_" in done.stdout
    assert " · 1 model call · " in done.stdout
    checked = zero("swarm", "validate", str(written), "--cwd", str(workspace))
    assert checked.returncode == 0, checked.stderr
    assert len(planner_messages("assistant")) == 1
    assert files(workspace) == ["README.md", "review.toml", "src"]  # no spare file left beside it


def test_an_invalid_team_is_reported_and_the_planner_asked_once_more(workspace: Path, tmp_path: Path) -> None:
    done = plan(tmp_path, workspace, submit(CYCLIC, turn=1), submit(VALID, last=FEEDBACK))
    assert done.returncode == 0, done.stderr
    written = workspace / "review.toml"
    problems = [
        f"  {written}:19: member 'reviewer': prompt uses {{{{ tester.output }}}} but 'tester' is not in its "
        "depends_on; add it there so 'reviewer' runs after it",
        f"  {written}:6: member 'mapper': dependency cycle: mapper -> reviewer -> mapper",
    ]
    said = "zero: error: the planner's team is not valid (2 problems); asking the planner again:\n"
    assert said + "".join(p + "\n" for p in problems) in done.stderr
    assert len(planner_messages("assistant")) == 2 and " · 2 model calls · " in done.stdout
    told = planner_messages("user")[-1]  # what the planner was told: every problem, as validate says it
    assert told == (
        "That team is not valid: zero swarm validate found 2 problems:\n"
        + "".join(f"- {p.strip()}\n" for p in problems)
        + f"Fix every one of them and submit the whole team again.\n\n{SUBMIT_NOTE}"
    )
    assert body(written) == WRITTEN
    assert zero("swarm", "validate", str(written), "--cwd", str(workspace)).returncode == 0


def test_a_second_invalid_team_exits_4_and_writes_nothing(workspace: Path, tmp_path: Path) -> None:
    done = plan(tmp_path, workspace, submit(CYCLIC, turn=1), submit(CYCLIC, last=FEEDBACK), submit(VALID))
    assert done.returncode == 4, done.stderr
    assert "zero: error: the planner's team is not valid (2 problems); asking the planner again:\n" in done.stderr
    assert (
        "zero: error: the planner's team is not valid (2 problems); no team was written after 2 attempts:\n"
        in done.stderr
    )
    assert len(planner_messages("assistant")) == 2  # asked once more, not twice
    assert files(workspace) == ["README.md", "src"] and done.stdout == ""


def test_a_team_the_schema_refuses_is_refused_by_submit_result(workspace: Path, tmp_path: Path) -> None:
    unknown = {**VALID, "members": [{**VALID["members"][0], "specialist": "wizard"}]}
    done = plan(tmp_path, workspace, submit(unknown, turn=1), submit(VALID, last="does not match"))
    assert done.returncode == 0, done.stderr
    [refused] = [e.output for e in planner_log() if isinstance(e, ToolFinished) and e.status == "error"]
    assert "members.0.specialist: 'wizard' is not one of ['code-review', 'explorer', 'planner', 'tester'" in refused
    assert body(workspace / "review.toml") == WRITTEN


def test_an_existing_file_is_kept_unless_force(workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "team.toml"
    target.write_text("mine")
    done = plan(tmp_path, workspace, submit(VALID, turn=1), flags=("-o", str(target)))
    assert (done.returncode, done.stderr) == (
        2,
        f"zero: error: {target} already exists; pass --force to overwrite it, or -o another file\n",
    )
    assert target.read_text() == "mine" and sessions() == []  # refused before the planner was asked
    target.chmod(0o600)
    done = plan(tmp_path, workspace, submit(VALID, turn=1), flags=("-o", str(target), "--force"))
    assert done.returncode == 0, done.stderr
    assert body(target) == WRITTEN and target.stat().st_mode & 0o777 == 0o600


def test_force_replaces_a_file_never_a_link_a_device_or_a_fifo(workspace: Path, tmp_path: Path) -> None:
    # As root, -o /dev/null --force renamed the team file over the system's device.
    fifo, device, link = tmp_path / "fifo", tmp_path / "null", tmp_path / "out"
    os.mkfifo(fifo)
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    link.symlink_to("/proc/self/fd/1")
    for target, kind in ((fifo, "not a regular file"), (device, "not a regular file"), (link, "a link")):
        done = plan(tmp_path, workspace, submit(VALID, turn=1), flags=("-o", str(target), "--force"))
        assert done.returncode == 2 and done.stderr.startswith(f"zero: error: -o {target} is {kind}"), done.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and stat.S_ISCHR(os.lstat(device).st_mode) and link.is_symlink()
    assert sessions() == []  # refused before the planner was asked


def test_without_o_a_team_never_overwrites_a_file_of_its_name(workspace: Path, tmp_path: Path) -> None:
    (workspace / "review.toml").write_text("mine")
    done = plan(tmp_path, workspace, submit(VALID, turn=1))
    assert done.returncode == 0, done.stderr
    assert (workspace / "review.toml").read_text() == "mine" and body(workspace / "review-2.toml") == WRITTEN
    assert f"Wrote {workspace / 'review-2.toml'} · " in done.stdout


MEMBERS = (
    {"match": {"system": 'You are "mapper"'}, "text": "api and db."},
    {"match": {"system": 'You are "reviewer"', "user": "api and db."}, "text": "Both look fine."},
)


def test_run_yes_runs_the_written_team(workspace: Path, tmp_path: Path) -> None:
    done = plan(tmp_path, workspace, submit(VALID, turn=1), *MEMBERS, flags=("--run", "--yes", "--no-live"))
    assert done.returncode == 0, done.stderr
    [team] = [m for m in sessions() if m.session_kind == "team"]
    assert (team.team_name, team.status) == ("review", "completed")
    members = {m.member_name: m.status for m in sessions() if m.session_kind == "member"}
    assert members == {"mapper": "completed", "reviewer": "completed"}
    assert "Both look fine." in done.stdout


def test_run_without_a_terminal_needs_yes_before_anything_is_planned(workspace: Path, tmp_path: Path) -> None:
    done = plan(tmp_path, workspace, submit(VALID, turn=1), flags=("--run",))
    assert (done.returncode, done.stderr) == (
        2,
        "zero: error: --run needs --yes when there is no terminal to ask; nothing was planned\n",
    )
    assert sessions() == [] and files(workspace) == ["README.md", "src"]


class _Terminal(io.StringIO):
    """Standard input that says it is a terminal, with the user's answer in it."""

    def isatty(self) -> bool:
        return True


def ask(workspace: Path, tmp_path: Path, answer: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    flags = scripted(script(tmp_path, submit(VALID, turn=1), *MEMBERS), workspace)
    code = main(["swarm", "plan", GOAL, *flags, "--run", "--no-live"], stdout=out, stderr=err, stdin=_Terminal(answer))
    return code, out.getvalue(), err.getvalue()


def test_run_asks_first_on_a_terminal(workspace: Path, tmp_path: Path) -> None:
    code, _, err = ask(workspace, tmp_path, "n\n")
    assert code == 0, err
    written = workspace / "review.toml"
    assert f"Run team 'review' (2 members) now? [y/N] Not run; run it with: zero swarm run {written}\n" in err
    assert not [m for m in sessions() if m.session_kind == "team"] and body(written) == WRITTEN
    written.unlink()
    code, out, err = ask(workspace, tmp_path, "y\n")
    assert code == 0, err
    assert [m.status for m in sessions() if m.session_kind == "team"] == ["completed"] and "Both look fine." in out


def test_an_empty_goal_is_refused(workspace: Path) -> None:
    done = zero("swarm", "plan", "  ", "--provider", "scripted", "--cwd", str(workspace))
    assert (done.returncode, done.stderr) == (
        2,
        'zero: error: the goal is empty: say what the team is to do, as zero swarm plan "GOAL"\n',
    )


def test_a_planner_that_never_submits_a_team_ends_invalid_output_exit_4(workspace: Path, tmp_path: Path) -> None:
    prose = {"match": {"system": PLANNER}, "text": "1. Map the code. 2. Review it.", "times": 0}
    done = plan(tmp_path, workspace, prose)
    assert done.returncode == 4, done.stderr
    assert done.stderr.endswith(
        "zero: error: the planner ended invalid_output (the result did not match its output schema in 3 attempts "
        "(2 retries); the last: it answered in text without calling submit_result); no team was written\n"
    )
    assert len(planner_messages("assistant")) == 3 and files(workspace) == ["README.md", "src"]


def test_a_warning_of_the_configs_is_said_once_however_many_attempts(workspace: Path, tmp_path: Path) -> None:
    (workspace / ".zero").mkdir()
    (workspace / ".zero" / "config.toml").write_text('base_url = "http://example.invalid"\n')
    done = plan(tmp_path, workspace, submit(CYCLIC, turn=1), submit(VALID, last=FEEDBACK))
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("'base_url' ignored: a project may not choose where requests") == 1


def test_an_o_the_team_cannot_be_written_to_is_refused_before_the_planner_is_asked(
    workspace: Path, tmp_path: Path
) -> None:
    folder, missing = tmp_path / "teams", tmp_path / "nowhere" / "team.toml"
    folder.mkdir()
    done = plan(tmp_path, workspace, submit(VALID, turn=1), flags=("-o", str(folder)))
    assert (done.returncode, done.stderr) == (
        2,
        f"zero: error: -o {folder} is a folder: name the team file to write (say {folder / 'team.toml'})\n",
    )
    done = plan(tmp_path, workspace, submit(VALID, turn=1), flags=("-o", str(missing)))
    assert (done.returncode, done.stderr) == (
        2,
        f"zero: error: -o {missing}: the folder {missing.parent} does not exist; create it first\n",
    )
    assert sessions() == []
