"""The land queue on real git: members land one at a time in dependency order, checked after each; a
conflict or a failing check keeps the member's work on its branch and the others go on."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from support.git import commit_all, hermetic_git, make_repo, run_git, worktree_list

from zero.errors import UsageError
from zero.orchestrator import (
    CheckFailed,
    CheckResult,
    Conflict,
    ConflictFile,
    Landed,
    LandQueue,
    NothingToLand,
    Skipped,
    command_check,
    run_command,
)
from zero.tools import Worktrees, take_snapshot

pytestmark = pytest.mark.anyio

APP = "".join(f"line {n}\n" for n in range(1, 21))


@pytest.fixture(autouse=True)
def _git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hermetic_git(tmp_path, monkeypatch)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"app.txt": APP, "README.md": "# Demo\n"})


def team(repo: Path) -> Worktrees:
    return Worktrees.create(take_snapshot(repo), root="run1", home=Path(os.environ["ZERO_HOME"]))


def edit(wt: Worktrees, member: str, files: dict[str, str]) -> None:
    """``member`` writes ``files`` in its worktree and ends (a member's whole life, in a worker thread)."""
    tree = wt.open(member)
    for name, text in files.items():
        (tree.path / name).write_text(text)
    wt.finish(member, f"session-{member}", "completed")


def replaced(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new)


class Recorder:
    """A check that records the tree it was given each time, and passes unless told otherwise."""

    def __init__(self, failing: set[str] | None = None) -> None:
        self.seen: list[dict[str, str]] = []
        self.failing = failing or set()

    async def __call__(self, tree: Path) -> CheckResult:
        files = {p.name: p.read_text() for p in sorted(tree.iterdir()) if p.is_file() and p.name != ".git"}
        self.seen.append(files)
        broken = sorted(self.failing & set(files))
        return CheckResult(passed=not broken, output="".join(f"FAILED {name}\n" for name in broken))


async def test_two_clean_members_land_checked_after_each_and_the_conflicting_one_keeps_its_work(repo: Path) -> None:
    wt = team(repo)
    work = {
        "a-file": {"a.txt": "a\n"},
        "b-file": {"b.txt": "b\n"},
        "top": {"app.txt": replaced(APP, "line 1\n", "line 1 by top\n")},
        "bottom": {"app.txt": replaced(APP, "line 20\n", "line 20 by bottom\n")},
        "clash": {"app.txt": replaced(APP, "line 1\n", "line 1 by clash\n")},
    }
    async with anyio.create_task_group() as tg:  # the five members write at the same time
        for member, files in work.items():
            tg.start_soon(anyio.to_thread.run_sync, edit, wt, member, files)
    check = Recorder()
    queue = LandQueue(worktrees=wt, check=check)

    outcomes = await queue.land_all(list(work))

    assert [o.kind for o in outcomes] == ["landed", "landed", "landed", "landed", "conflict"]
    land = "zero/run1/land"
    assert run_git(repo, "show", f"{land}:a.txt") == "a" and run_git(repo, "show", f"{land}:b.txt") == "b"
    landed_app = run_git(repo, "show", f"{land}:app.txt") + "\n"
    assert landed_app == replaced(replaced(APP, "line 1\n", "line 1 by top\n"), "line 20\n", "line 20 by bottom\n")
    assert [sorted(seen) for seen in check.seen] == [
        ["README.md", "a.txt", "app.txt"],
        ["README.md", "a.txt", "app.txt", "b.txt"],
        ["README.md", "a.txt", "app.txt", "b.txt"],
        ["README.md", "a.txt", "app.txt", "b.txt"],
    ]
    assert "line 1 by top" in check.seen[2]["app.txt"] and "line 20 by bottom" in check.seen[3]["app.txt"]
    clash = outcomes[4]
    assert clash == Conflict(
        member="clash",
        files=(
            ConflictFile(
                path="app.txt",
                landed=landed_app,
                member=replaced(APP, "line 1\n", "line 1 by clash\n"),
            ),
        ),
    )
    assert run_git(repo, "show", "zero/run1/clash:app.txt").startswith("line 1 by clash\n")
    assert run_git(repo, "rev-parse", "zero/run1/clash^") == wt.snapshot.commit  # as it was, not half-rebased
    assert run_git(repo, "branch", "--list", "zero/*").split() == ["+", "zero/run1/clash", "zero/run1/land"]
    assert wt.prune() == ["clash"]
    assert worktree_list(repo) == [
        f"{repo} branch refs/heads/main",
        f"{wt.path_of('clash')} branch refs/heads/zero/run1/clash",
    ]
    assert run_git(repo, "rev-parse", "main") == wt.snapshot.head  # the user's branch did not move
    assert queue.merge_command() == "git merge zero/run1/land"


async def test_a_failing_check_reports_its_tail_keeps_the_branch_and_skips_its_dependents(repo: Path) -> None:
    wt = team(repo)
    for member, name in (("broken", "broken.txt"), ("needs-broken", "later.txt"), ("fine", "fine.txt")):
        edit(wt, member, {name: f"{member}\n"})
    tip = run_git(repo, "rev-parse", "zero/run1/broken")
    check = command_check(
        "if [ -e broken.txt ]; then seq 1 100; echo 'FAILED test_broken'; touch check-left-this; exit 1; fi",
        timeout=30,
    )
    queue = LandQueue(worktrees=wt, check=check, depends_on={"needs-broken": ["broken"]})

    outcomes = await queue.land_all(["broken", "needs-broken", "fine"])

    failed, skipped, fine = outcomes
    assert isinstance(failed, CheckFailed) and not failed.timed_out
    assert failed.tail.splitlines() == [str(n) for n in range(62, 101)] + ["FAILED test_broken"]
    assert skipped == Skipped(member="needs-broken", dependency="broken")
    assert isinstance(fine, Landed) and fine.commits == 1
    assert run_git(repo, "rev-parse", "zero/run1/broken") == tip
    assert run_git(wt.path_of("broken"), "status", "--porcelain") == ""  # what the check wrote was cleared
    assert run_git(repo, "ls-tree", "--name-only", "zero/run1/land").split() == ["README.md", "app.txt", "fine.txt"]


async def test_what_a_passing_check_writes_is_not_landed_and_leaves_no_worktree_behind(repo: Path) -> None:
    wt = team(repo)
    edit(wt, "one", {"a.txt": "a\n"})
    check = command_check("echo report > report.xml && echo changed >> README.md", timeout=30)

    outcome = await LandQueue(worktrees=wt, check=check).land("one")

    assert isinstance(outcome, Landed)
    assert run_git(repo, "ls-tree", "--name-only", wt.land_branch).split() == ["README.md", "a.txt", "app.txt"]
    assert run_git(repo, "show", f"{wt.land_branch}:README.md") == "# Demo"
    assert worktree_list(repo) == [f"{repo} branch refs/heads/main"]


async def test_a_check_that_runs_out_of_time_is_ended_with_what_it_started(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    result = await run_command(f"sleep 60 & echo $! > {marker}; echo started; wait", tmp_path, 0.5)
    assert (result.passed, result.timed_out, result.output) == (False, True, "started\n")
    try:
        pidfd = os.pidfd_open(int(marker.read_text()))
    except ProcessLookupError:
        return  # already gone
    try:
        with anyio.fail_after(10):  # readable once it has ended (SIGKILL is carried out by the kernel, soon)
            await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)


async def test_a_member_with_no_change_has_nothing_to_land_and_leaves_no_worktree(repo: Path) -> None:
    wt = team(repo)
    edit(wt, "idle", {})
    assert await LandQueue(worktrees=wt).land("idle") == NothingToLand(member="idle")
    assert worktree_list(repo) == [f"{repo} branch refs/heads/main"]


async def test_a_member_depending_on_another_starts_from_its_landed_work(repo: Path) -> None:
    wt = team(repo)
    edit(wt, "first", {"api.txt": "the api\n"})
    queue = LandQueue(worktrees=wt)
    await queue.land("first")

    second = wt.open("second", base=wt.land_branch)

    assert (second.path / "api.txt").read_text() == "the api\n"
    (second.path / "client.txt").write_text("uses the api\n")
    wt.finish("second", "s2", "completed")
    assert isinstance(await queue.land("second"), Landed)
    assert run_git(repo, "log", "--format=%s", "zero/run1/land").splitlines() == [
        "second: what session s2 changed (it ended completed)",
        "first: what session session-first changed (it ended completed)",
        "First",
    ]


async def test_landing_again_after_a_manual_fix_lands_the_member(repo: Path) -> None:
    wt = team(repo)
    edit(wt, "one", {"app.txt": replaced(APP, "line 5\n", "line 5 by one\n")})
    edit(wt, "two", {"app.txt": replaced(APP, "line 5\n", "line 5 by two\n")})
    queue = LandQueue(worktrees=wt)
    assert [o.kind for o in await queue.land_all(["one", "two"])] == ["landed", "conflict"]
    fix = wt.path_of("two")
    run_git(fix, "reset", "-q", "--hard", wt.land_branch)
    (fix / "app.txt").write_text(replaced(APP, "line 5\n", "line 5 by one, then two\n"))
    commit_all(fix, "two, resolved")

    outcome = await LandQueue(worktrees=wt).land("two")

    assert isinstance(outcome, Landed)
    assert run_git(repo, "show", f"{wt.land_branch}:app.txt").splitlines()[4] == "line 5 by one, then two"
    assert worktree_list(repo) == [f"{repo} branch refs/heads/main"]


async def test_uncommitted_changes_in_a_worktree_stop_its_landing_with_the_fix(repo: Path) -> None:
    wt = team(repo)
    edit(wt, "one", {"a.txt": "a\n"})
    (wt.path_of("one") / "a.txt").write_text("edited by hand, not committed\n")
    with pytest.raises(UsageError) as caught:
        await LandQueue(worktrees=wt).land("one")
    path = wt.path_of("one")
    assert str(caught.value) == (
        f"member one's worktree {path} has uncommitted changes: commit them there (git -C {path} commit -a) "
        "and land again"
    )


async def test_a_landing_killed_halfway_through_a_rebase_is_started_again(repo: Path) -> None:
    wt = team(repo)
    edit(wt, "one", {"a.txt": "a\n"})
    tree = wt.path_of("one")
    (repo / "a.txt").write_text("something else\n")
    other = commit_all(repo, "A conflicting commit elsewhere")
    done = run_git_status(tree, "rebase", other)
    assert done != 0 and (Path(run_git(tree, "rev-parse", "--git-path", "rebase-merge"))).exists()

    assert isinstance(await LandQueue(worktrees=wt).land("one"), Landed)


def run_git_status(cwd: Path, *args: str) -> int:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True).returncode


async def test_into_current_fast_forwards_a_clean_users_branch_and_nothing_else(repo: Path) -> None:
    wt = team(repo)
    edit(wt, "one", {"a.txt": "a\n"})
    queue = LandQueue(worktrees=wt)
    await queue.land("one")
    (repo / "scratch.txt").write_text("the user is typing\n")
    assert queue.merge_into_current() == "the working tree has uncommitted changes"
    assert run_git(repo, "rev-parse", "main") == wt.snapshot.head
    (repo / "scratch.txt").unlink()

    assert queue.merge_into_current() is None

    assert run_git(repo, "rev-parse", "main") == run_git(repo, "rev-parse", wt.land_branch)
    assert (repo / "a.txt").read_text() == "a\n"


async def test_a_run_started_from_uncommitted_changes_is_merged_by_cherry_picking_only_what_landed(
    repo: Path,
) -> None:
    (repo / "wip.txt").write_text("the user's own edit\n")
    wt = team(repo)
    queue = LandQueue(worktrees=wt)
    assert queue.merge_command() is None
    edit(wt, "one", {"a.txt": "a\n"})
    await queue.land("one")

    command = queue.merge_command()

    assert command == f"git cherry-pick {wt.snapshot.commit[:12]}..zero/run1/land"
    assert queue.merge_into_current() == "the run started from uncommitted changes"
    run_git(repo, *command.split()[1:])
    assert (repo / "a.txt").read_text() == "a\n"
    assert run_git(repo, "status", "--porcelain") == "?? wip.txt"  # still the user's, uncommitted
