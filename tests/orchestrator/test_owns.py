"""Ownership in a team: members whose ``owns`` overlap never run at the same time, in dependency order,
else the file's; a member's file tools write only what it owns; a glob that cannot be one is reported."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from support.git import hermetic_git, make_repo, run_git
from support.teams import member, run_team, team_file

from zero.agent import PriceTable, ScriptToolCall
from zero.orchestrator import TeamError, build_plan
from zero.sessions import SessionStore, short_id
from zero.specialists import SpecialistRegistry

pytestmark = pytest.mark.anyio

OWNERS = """
name = "owners"
[[members]]
name = "api"
specialist = "explorer"
prompt = "API."
owns = ["src/api/**"]
[[members]]
name = "web"
specialist = "explorer"
prompt = "Web."
owns = ["src/web/**"]
[[members]]
name = "api-tests"
specialist = "explorer"
prompt = "Tests."
owns = ["tests/api/**", "src/api/models.py"]
[[members]]
name = "free"
specialist = "explorer"
prompt = "Anything."
"""


def _span(store: SessionStore, session_id: str) -> tuple[datetime, datetime]:
    """When a member's run started and ended, as its session's log says."""
    events = store.events(session_id)
    start = next(e for e in events if e.event.kind == "run_start")
    return datetime.fromisoformat(start.created_at), datetime.fromisoformat(events[-1].created_at)


async def test_members_whose_owns_overlap_never_run_at_the_same_time(workspace: Path, tmp_path: Path) -> None:
    turns = [member(name, f"{name} done", delay=0.2) for name in ("api", "web", "api-tests", "free")]
    result, runner, _, _ = await run_team(workspace, tmp_path, OWNERS, turns)
    assert result.status == "completed"
    spans = {m.name: _span(runner.store, m.session_id) for m in result.members}
    assert spans["api"][1] <= spans["api-tests"][0]  # the later in the file starts once the earlier has ended
    # the others ran beside api: owns that do not overlap (or none) hold nobody back
    for other in ("web", "free"):
        assert spans[other][0] < spans["api"][1] and spans["api"][0] < spans[other][1]


async def test_the_order_follows_depends_on_before_the_files_and_never_deadlocks(
    workspace: Path, tmp_path: Path
) -> None:
    # a depends on c, declared after it; b overlaps both: b runs first (the first member free to start, in
    # the file's order), then c, then a; waiting for a, which waits for c, which waits for b, would deadlock.
    body = """
name = "order"
[[members]]
name = "a"
specialist = "explorer"
prompt = "A."
depends_on = ["c"]
owns = ["src/**"]
[[members]]
name = "b"
specialist = "explorer"
prompt = "B."
owns = ["src/b.py", "src/c/**"]
[[members]]
name = "c"
specialist = "explorer"
prompt = "C."
owns = ["src/c/*.py"]
"""
    result, runner, _, _ = await run_team(workspace, tmp_path, body, [member(n, n) for n in "abc"])
    assert result.status == "completed"
    assert [(o.first, o.then, o.by) for o in runner.plan.overlaps] == [
        ("b", "c", "file order"),
        ("b", "a", "file order"),
        ("c", "a", "depends_on"),
    ]
    spans = {m.name: _span(runner.store, m.session_id) for m in result.members}
    assert spans["b"][1] <= spans["c"][0] and spans["c"][1] <= spans["a"][0]


@pytest.mark.parametrize("isolation", ["none", "worktree"])
async def test_a_members_writes_outside_what_it_owns_are_denied(
    workspace: Path, tmp_path: Path, isolation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if isolation == "worktree":  # the member writes in a worktree of its own: owns is rooted there
        hermetic_git(tmp_path, monkeypatch)
        make_repo(workspace, {"README.md": "# Demo\n"})  # (src/app.py is committed too)
    body = f"""
name = "writers"
[[members]]
name = "api"
specialist = "worker"
prompt = "Write."
owns = ["src/api/**"]
isolation = "{isolation}"
"""
    write = ScriptToolCall(name="write_file", arguments={"path": "src/web/app.py", "content": "x"})
    own = ScriptToolCall(name="write_file", arguments={"path": "src/api/app.py", "content": "y"})
    turns = [member("api", "", write, own, turn=1), member("api", "Done.", turn=2)]
    result, _, _, events = await run_team(workspace, tmp_path, body, turns)
    assert result.status == "completed"
    told = [(e.status, e.output) for e in events if e.kind == "tool_result"]
    assert told == [
        (
            "denied",
            "Permission denied: src/web/app.py is outside the files member 'api' owns (src/api/**); "
            "write only those, and leave this change to the member that owns it.",
        ),
        ("ok", "Created src/api/app.py (1 lines)"),
    ]
    if isolation == "worktree":
        landed = run_git(workspace, "ls-tree", "-r", "--name-only", f"zero/{short_id(result.session_id)}/land")
        assert landed.splitlines() == ["README.md", "src/api/app.py", "src/app.py"]
        assert not (workspace / "src/api").exists()  # (not merged into the user's branch)
    else:
        assert not (workspace / "src/web").exists() and (workspace / "src/api/app.py").read_text() == "y"


@pytest.mark.parametrize(
    ("owns", "problem"),
    [
        ('["src/[api"]', "owns glob 'src/[api': '[' is not closed by ']' (write \\[ for a plain '[')"),
        ('["../x/**"]', "owns glob '../x/**' must be a path inside the workspace (relative, without '..')"),
        ("[]", 'owns is empty, so it could write no file: list its globs ("src/api/**"), or drop owns'),
    ],
)
def test_a_bad_owns_names_the_file_the_member_the_key_and_the_fix(tmp_path: Path, owns: str, problem: str) -> None:
    member = 'name = "api"\nspecialist = "worker"\nprompt = "x"\n'
    path = team_file(tmp_path, f'name = "t"\n[[members]]\n{member}owns = {owns}\n')
    with pytest.raises(TeamError) as caught:
        build_plan(
            path,
            SpecialistRegistry.load(),
            provider="scripted",
            model="m",
            permission_mode="auto",
            prices=PriceTable.builtin(),
        )
    [found] = caught.value.problems
    assert str(found).startswith(f"{path}:6: member 'api': {problem}")
    assert found.key == "members.owns"
