"""The land queue: members' branches brought, one at a time and checked, onto the integration branch.

For each member, in the order given (the dependency order): its branch is rebased onto
``zero/<root>/land`` in its own worktree, the check runs there, and the integration branch is
fast-forwarded to it. A conflict aborts that rebase and reports each conflicting file with both sides;
a failing check reports its output's tail and puts the branch back as it was; either way the member's
branch keeps its work, and the members that depend on it are skipped while the others go on. The
user's own branch moves only through ``merge_into_current``, asked for and on a clean working tree;
``merge_command`` is the one command that merges the integration branch by hand.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import anyio
import anyio.abc
import anyio.to_thread

from zero.errors import UsageError
from zero.tools.git import GitError, git, git_bytes, git_ok
from zero.tools.snapshot import current_branch
from zero.tools.worktrees import MemberWorktree, Worktrees

__all__ = [
    "Check",
    "CheckFailed",
    "CheckResult",
    "CommandRunner",
    "Conflict",
    "ConflictFile",
    "LandOutcome",
    "LandQueue",
    "Landed",
    "NothingToLand",
    "Skipped",
    "command_check",
    "run_command",
]

TAIL_LINES = 40


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """How a check ended: ``passed``, what it printed (stdout and stderr, interleaved) and whether it
    ran out of time."""

    passed: bool
    output: str
    timed_out: bool = False


Check = Callable[[Path], Awaitable[CheckResult]]
"""A check of the tree a member would land: called with that tree's folder."""

CommandRunner = Callable[[str, Path, float], Awaitable[CheckResult]]
"""Runs a shell command in a folder, given so many seconds (the sandbox's runner, or ``run_command``)."""


@dataclass(frozen=True, kw_only=True)
class ConflictFile:
    """A file two sides changed in ways that do not merge: its content on the integration branch
    (``landed``) and on the member's branch (``member``); ``None`` where that side deleted it."""

    path: str
    landed: str | None
    member: str | None


@dataclass(frozen=True, kw_only=True)
class Landed:
    """The member's work is on the integration branch: ``commits`` commits, from ``before`` to ``after``."""

    member: str
    commits: int
    before: str
    after: str
    kind: Literal["landed"] = "landed"


@dataclass(frozen=True, kw_only=True)
class Conflict:
    """The member's branch does not rebase onto the integration branch; its branch is as it was."""

    member: str
    files: tuple[ConflictFile, ...]
    kind: Literal["conflict"] = "conflict"


@dataclass(frozen=True, kw_only=True)
class CheckFailed:
    """The check failed (or timed out) on the rebased branch; its branch is as it was."""

    member: str
    tail: str
    timed_out: bool
    kind: Literal["check_failed"] = "check_failed"


@dataclass(frozen=True, kw_only=True)
class Skipped:
    """Not tried: a member it depends on (``dependency``) did not land."""

    member: str
    dependency: str
    kind: Literal["skipped"] = "skipped"


@dataclass(frozen=True, kw_only=True)
class NothingToLand:
    """The member's branch holds no change (or none the integration branch does not already have)."""

    member: str
    kind: Literal["nothing_to_land"] = "nothing_to_land"


LandOutcome = Landed | Conflict | CheckFailed | Skipped | NothingToLand


@dataclass(frozen=True, kw_only=True)
class _Rebased:
    tree: MemberWorktree
    before: str  # the integration branch's tip it was rebased onto
    original: str  # the member's branch before
    after: str  # and after


async def run_command(command: str, cwd: Path, seconds: float) -> CheckResult:
    """Run ``command`` with ``sh -c`` in ``cwd``, unconfined, ended with everything it started when
    it runs out of ``seconds`` (or is cancelled)."""
    chunks: list[bytes] = []
    timed_out = True
    process = await anyio.open_process(
        ["sh", "-c", command],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    async with process:  # its pipes closed, and it waited for, however this ends
        try:
            with anyio.move_on_after(seconds):
                assert process.stdout is not None
                async for chunk in process.stdout:
                    chunks.append(chunk)
                await process.wait()
                timed_out = False
        finally:
            if process.returncode is None:
                _kill_group(process)
    output = b"".join(chunks).decode(errors="replace")
    return CheckResult(passed=not timed_out and process.returncode == 0, output=output, timed_out=timed_out)


def _kill_group(process: anyio.abc.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def command_check(command: str, *, timeout: float, runner: CommandRunner = run_command) -> Check:
    """The check that runs ``command`` in the tree through ``runner``, with ``timeout`` seconds."""

    async def check(tree: Path) -> CheckResult:
        return await runner(command, tree, timeout)

    return check


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of ``text``."""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


@dataclass(kw_only=True)
class LandQueue:
    """Lands the members of ``worktrees`` one at a time (``land`` may be called as each member ends;
    calls wait for each other). ``depends_on`` maps a member to those it needs landed first;
    ``check``, if given, must pass on each rebased branch before it lands."""

    worktrees: Worktrees
    check: Check | None = None
    depends_on: Mapping[str, Collection[str]] = field(default_factory=dict)
    outcomes: dict[str, LandOutcome] = field(default_factory=dict, init=False)
    _lock: anyio.Lock = field(default_factory=anyio.Lock, init=False)

    async def land_all(self, order: Sequence[str]) -> list[LandOutcome]:
        """Land each of ``order`` in turn; their outcomes, in that order."""
        return [await self.land(member) for member in order]

    async def land(self, member: str) -> LandOutcome:
        """Land ``member``'s branch (see the module's docstring); its outcome, also kept in ``outcomes``."""
        async with self._lock:
            outcome = await self._land(member)
            self.outcomes[member] = outcome
            return outcome

    async def _land(self, member: str) -> LandOutcome:
        for dependency in self.depends_on.get(member, ()):
            if isinstance(self.outcomes.get(dependency), Conflict | CheckFailed | Skipped):
                return Skipped(member=member, dependency=dependency)
        rebased = await anyio.to_thread.run_sync(self._rebase, member)
        if not isinstance(rebased, _Rebased):
            return rebased
        if self.check is not None:
            try:
                result = await self.check(rebased.tree.workspace)
            except anyio.get_cancelled_exc_class():  # stopped: its branch as it was, as a failed check leaves it
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._restore, rebased.tree.path, rebased.original)
                raise
            if not result.passed:
                await anyio.to_thread.run_sync(self._restore, rebased.tree.path, rebased.original)
                return CheckFailed(member=member, tail=tail(result.output), timed_out=result.timed_out)
        return await anyio.to_thread.run_sync(self._fast_forward, rebased)

    def _rebase(self, member: str) -> _Rebased | NothingToLand | Conflict:
        """Rebase ``member``'s branch onto the integration branch, in its worktree (made again from its
        branch if it was removed)."""
        wt = self.worktrees
        if not git_ok("rev-parse", "-q", "--verify", f"refs/heads/{wt.land_branch}", cwd=wt.snapshot.repo):
            git("branch", "--no-track", wt.land_branch, wt.snapshot.commit, cwd=wt.snapshot.repo)
        if not wt.changed(member):
            wt.release(member)
            return NothingToLand(member=member)
        tree = wt.open(member)
        if Path(tree.path, git("rev-parse", "--git-path", "rebase-merge", cwd=tree.path)).exists():
            git("rebase", "--abort", cwd=tree.path)  # a landing killed halfway: this one starts it again
        if git("status", "--porcelain", cwd=tree.path):
            raise UsageError(
                f"member {member}'s worktree {tree.path} has uncommitted changes: commit them there "
                f"(git -C {tree.path} commit -a) and land again"
            )
        before = self._tip()
        original = git("rev-parse", "HEAD", cwd=tree.path)
        try:
            git("rebase", "-q", "--no-autostash", wt.land_branch, cwd=tree.path)
        except GitError:
            names = git("diff", "--name-only", "-z", "--diff-filter=U", cwd=tree.path).split("\0")
            files = tuple(
                ConflictFile(path=name, landed=_stage(tree.path, 2, name), member=_stage(tree.path, 3, name))
                for name in names
                if name
            )
            git("rebase", "--abort", cwd=tree.path)
            if not files:
                raise
            return Conflict(member=member, files=files)
        after = git("rev-parse", "HEAD", cwd=tree.path)
        if after == before:  # each of its commits was already on the integration branch
            wt.release(member)
            return NothingToLand(member=member)
        return _Rebased(tree=tree, before=before, original=original, after=after)

    def _fast_forward(self, rebased: _Rebased) -> Landed:
        """Move the integration branch to the rebased branch, record it, and release the member."""
        wt, member = self.worktrees, rebased.tree.member
        repo = wt.snapshot.repo
        # What the check wrote (caches, reports) is not the member's work: the tree is put back first.
        self._restore(rebased.tree.path, rebased.after)
        # Compare-and-swap: the integration branch moves only from the commit the rebase was made on.
        git("update-ref", f"refs/heads/{wt.land_branch}", rebased.after, rebased.before, cwd=repo)
        commits = int(git("rev-list", "--count", f"{rebased.before}..{rebased.after}", cwd=repo))
        wt.mark_landed(member, rebased.before, rebased.after)
        wt.release(member)
        return Landed(member=member, commits=commits, before=rebased.before, after=rebased.after)

    def _tip(self) -> str:
        return git("rev-parse", f"refs/heads/{self.worktrees.land_branch}", cwd=self.worktrees.snapshot.repo)

    def _restore(self, tree: Path, commit: str) -> None:
        git("reset", "-q", "--hard", commit, cwd=tree)
        git("clean", "-q", "-d", "--force", cwd=tree)

    def merge_command(self) -> str | None:
        """The one command, run in the user's checkout, that brings in what landed (``None``: nothing
        did): a merge where the snapshot was HEAD itself; where it held uncommitted changes, a
        cherry-pick of what landed on top of it, so that the user's own edits stay theirs to commit."""
        wt = self.worktrees
        if not git_ok("rev-parse", "-q", "--verify", f"refs/heads/{wt.land_branch}", cwd=wt.snapshot.repo):
            return None
        if self._tip() == wt.snapshot.commit:
            return None
        if wt.snapshot.dirty:
            return f"git cherry-pick {wt.snapshot.commit[:12]}..{wt.land_branch}"
        return f"git merge {wt.land_branch}"

    def merge_into_current(self) -> str | None:
        """Fast-forward the user's branch to the integration branch (``[land] into = "current"``); why it
        was not moved, or ``None`` once it was. It moves only if it is still the branch the snapshot was
        taken on, the snapshot held no uncommitted change, and the working tree is clean."""
        wt = self.worktrees
        repo, snap = wt.snapshot.repo, wt.snapshot
        if self.merge_command() is None:
            return "nothing landed"
        if snap.dirty or snap.branch is None:
            return "the run started from uncommitted changes" if snap.dirty else "HEAD was detached"
        if current_branch(repo) != snap.branch:
            return f"HEAD is no longer on {snap.branch}"
        if git("status", "--porcelain", cwd=repo):
            return "the working tree has uncommitted changes"
        if not git_ok("merge-base", "--is-ancestor", "HEAD", wt.land_branch, cwd=repo):
            return f"{snap.branch} has commits the integration branch does not"
        git("merge", "-q", "--ff-only", wt.land_branch, cwd=repo)
        return None


def _stage(tree: Path, stage: int, name: str) -> str | None:
    try:
        return git_bytes("show", f":{stage}:{name}", cwd=tree).decode(errors="replace")
    except GitError:  # that side deleted the file
        return None
