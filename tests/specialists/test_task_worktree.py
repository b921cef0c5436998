"""A ``Task`` child in a git worktree of its own: branched from what its parent sees, confined there, its
work handed back as a branch with the command that merges it; on real git."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.git import commit_all, hermetic_git, make_repo, run_git, worktree_list

from zero.agent import Event, PriceTable, RunResult, ScriptedProvider, ScriptMatch, ScriptToolCall, ScriptTurn
from zero.sessions import FileSessionStore, short_id
from zero.specialists import AgentContext, SpecialistRegistry, open_agent
from zero.tools import Workspace

pytestmark = pytest.mark.anyio

PARENT = "You are Zero"
WORKER = "You are the worker"


def call(tool: str, **args: Any) -> ScriptToolCall:
    return ScriptToolCall(name=tool, arguments=args)


def turn(system: str, n: int, text: str = "", *calls: ScriptToolCall) -> ScriptTurn:
    return ScriptTurn(match=ScriptMatch(system=system, turn=n), text=text, tool_calls=list(calls))


async def run_parent(workspace: Path, tmp_path: Path, turns: list[ScriptTurn]) -> tuple[RunResult, list[Event]]:
    provider = ScriptedProvider(turns)
    ctx = AgentContext(
        store=FileSessionStore(tmp_path / "sessions"),
        registry=SpecialistRegistry.load(workspace),
        workspace=Workspace([workspace]),
        provider=provider,
        model="scripted",
        providers=lambda name: provider,
        prices=PriceTable.builtin(),
    )
    session = await open_agent(ctx, title="t", system_prompt=f"{PARENT}.", permission_mode="auto", max_turns=10)
    events: list[Event] = []
    session.listen(events.append)
    async with session:
        result = await session.send("Go.")
    provider.assert_consumed()
    return result, events


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clone whose origin has moved on since (origin/HEAD is not what the user has), with a commit of the
    user's own and uncommitted edits on top."""
    hermetic_git(tmp_path, monkeypatch)
    upstream = make_repo(tmp_path / "upstream", {"README.md": "# Demo\n", "src/app.py": "x = 1\n"})
    run_git(tmp_path, "clone", "-q", str(upstream), "repo")
    (upstream / "upstream.txt").write_text("newer upstream\n")
    commit_all(upstream, "Upstream moves on")
    checkout = tmp_path / "repo"
    run_git(checkout, "fetch", "-q")
    (checkout / "mine.txt").write_text("my commit\n")
    commit_all(checkout, "Mine")
    (checkout / "src/app.py").write_text("x = 2  # not committed yet\n")
    (checkout / "notes.txt").write_text("untracked\n")
    return checkout


def shell(command: str, cwd: Path) -> None:
    subprocess.run(command, shell=True, cwd=cwd, check=True)


def tool_results(events: list[Event], session_id: str | None = None) -> list[str]:
    return [e.output for e in events if e.kind == "tool_result" and (session_id is None or e.session_id == session_id)]


async def test_a_child_in_a_worktree_sees_its_parents_edits_and_hands_back_a_branch(repo: Path, tmp_path: Path) -> None:
    outside = str(repo / "src/app.py")
    turns = [
        turn(PARENT, 1, "", call("Task", name="worker", prompt="Add a module.", isolation="worktree")),
        turn(PARENT, 2, "It is on a branch."),
        turn(
            WORKER,
            1,
            "",
            call("read_file", path="src/app.py"),
            call("read_file", path="notes.txt"),
            call("read_file", path=outside),
            call("write_file", path=outside, content="escaped\n"),
            call("write_file", path="src/new.py", content="y = 3\n"),
            call("bash", command="pwd && touch from-bash.txt"),
        ),
        turn(WORKER, 2, "Added src/new.py."),
    ]
    result, events = await run_parent(repo, tmp_path, turns)
    assert result.status == "completed"
    start = next(e for e in events if e.kind == "child_start")
    child = start.child_session_id
    folder = tmp_path / "zero-home" / "worktrees" / short_id(child) / "worker"
    seen = tool_results(events, child)  # (the reads run side by side: in the order they ended)
    assert any("x = 2  # not committed yet" in r for r in seen) and any("untracked" in r for r in seen)
    refused = f"{outside!r} is outside the workspace ({folder}); only paths inside it can be read or written"
    assert seen.count(f"Error: {refused}") == 2  # the read and the write into the parent's checkout
    assert seen[-1].startswith(f"{folder}\n")  # its shell works there too
    assert (repo / "src/app.py").read_text() == "x = 2  # not committed yet\n"
    branch = f"zero/{short_id(child)}/worker"
    # its work is one commit on its branch, on the snapshot of the parent's tree, on the user's own HEAD
    assert run_git(repo, "log", "--format=%s", "-3", branch).splitlines() == [
        f"worker: what session {child} changed (it ended completed)",
        "Zero: snapshot of the working tree (HEAD and its uncommitted changes)",
        "Mine",
    ]
    assert run_git(repo, "branch", "--contains", "origin/HEAD", "--list", branch) == ""  # not from origin/HEAD
    assert run_git(repo, "diff", "--name-only", f"{branch}~1", branch).split() == ["from-bash.txt", "src/new.py"]
    assert worktree_list(repo) == [f"{repo} branch refs/heads/main"] and not folder.exists()
    end = next(e for e in events if e.kind == "child_end")
    assert (end.branch, end.diff_stat) == (branch, "+1 −0 in 2 files")
    assert end.branch_note == f"branch {branch} (+1 −0 in 2 files)"
    envelope = tool_results(events, start.session_id)[0]
    snapshot = run_git(repo, "rev-parse", f"{branch}~1")
    merge = f"git diff {snapshot[:12]} {branch} | git apply"
    assert f"\nbranch: {branch} (+1 −0 in 2 files)\nmerge it: {merge}\n---\nAdded src/new.py." in envelope
    shell(merge, repo)  # the command it gives does what it says
    assert (repo / "src/new.py").read_text() == "y = 3\n"
    assert (repo / "src/app.py").read_text() == "x = 2  # not committed yet\n"


async def test_a_child_that_changes_nothing_leaves_no_worktree_or_branch(repo: Path, tmp_path: Path) -> None:
    user = tmp_path / "config" / "zero" / "specialists"
    user.mkdir(parents=True)
    (user / "isolated.toml").write_text(
        'name = "isolated"\ndescription = "d"\nextends = "worker"\nisolation = "worktree"\n'
    )
    turns = [
        turn(PARENT, 1, "", call("Task", name="isolated", prompt="Look.")),  # isolated by its manifest
        turn(PARENT, 2, "Nothing to merge."),
        turn(WORKER, 1, "", call("read_file", path="mine.txt")),
        turn(WORKER, 2, "Looked."),
    ]
    result, events = await run_parent(repo, tmp_path, turns)
    child = next(e for e in events if e.kind == "child_start").child_session_id
    assert tool_results(events, child) == ["     1\tmy commit"]
    assert "\nworktree: it changed nothing, so no branch was kept\n---\nLooked." in tool_results(events)[-1]
    end = next(e for e in events if e.kind == "child_end")
    assert end.branch is None and end.branch_note == ""
    assert run_git(repo, "branch", "--list", "zero/*") == ""
    assert worktree_list(repo) == [f"{repo} branch refs/heads/main"]
    assert not (tmp_path / "zero-home" / "worktrees" / short_id(child) / "isolated").exists()
    assert result.status == "completed"


async def test_a_worktree_outside_a_git_repository_is_refused_with_the_fix(workspace: Path, tmp_path: Path) -> None:
    turns = [
        turn(PARENT, 1, "", call("Task", name="worker", prompt="Add.", isolation="worktree")),
        turn(PARENT, 2, "Could not."),
    ]
    _, events = await run_parent(workspace, tmp_path, turns)
    assert tool_results(events) == [
        f"Error: cannot start worker in a worktree of its own: {workspace} is not in a git working tree, and "
        "the task 'worker' asks for isolation = \"worktree\" (a git worktree for each writer): run `git init` "
        'there, or set isolation = "none"'
    ]
    assert not [e for e in events if e.kind == "child_start"]


async def test_a_resumed_child_works_again_where_it_was_on_its_branch(repo: Path, tmp_path: Path) -> None:
    resumed = ScriptMatch(system=WORKER, last="Go on.")
    turns = [
        turn(PARENT, 1, "", call("Task", name="worker", prompt="Start a.", isolation="worktree")),
        turn(PARENT, 2, "", call("Task", resume="{{session_id}}", prompt="Go on.")),
        turn(PARENT, 3, "Both on the branch."),
        turn(WORKER, 1, "", call("write_file", path="a.py", content="a = 1\n")),
        turn(WORKER, 2, "Started."),
        ScriptTurn(
            match=resumed,
            tool_calls=[call("read_file", path="a.py"), call("write_file", path="b.py", content="b = 2\n")],
        ),
        ScriptTurn(match=ScriptMatch(system=WORKER, last="b.py"), text="Went on."),
    ]
    result, events = await run_parent(repo, tmp_path, turns)
    assert result.status == "completed"
    start = next(e for e in events if e.kind == "child_start")
    child, branch = start.child_session_id, f"zero/{short_id(start.child_session_id)}/worker"
    assert tool_results(events, child)[1] == "     1\ta = 1"  # its first run's work, where it left it
    first, second = tool_results(events, start.session_id)
    assert f"branch: {branch} (+1 −0 in 1 file)" in first and f"branch: {branch} (+2 −0 in 2 files)" in second
    assert (
        run_git(repo, "log", "--format=%s", "-2", branch).splitlines()
        == [f"worker: what session {child} changed (it ended completed)"] * 2
    )
    assert worktree_list(repo) == [f"{repo} branch refs/heads/main"]
