"""A team run's isolated members: each writes in a git worktree of its own, and their work comes back
one member at a time through the land queue.

The run snapshots what the caller sees (HEAD and its uncommitted changes) once; a member starts on
its own branch from that snapshot, or, when it depends on isolated members, from the integration
branch once their work has landed there (so it sees it). When a member ends, whatever its status, its
changes are committed on its branch. Its branch lands as it ends (``[land] mode = "eager"``), when a
member depending on it is about to start, or at the end of the run (``mode = "end"``), in dependency
order, the check run after each. At the end every worktree is removed: with its branch when the branch
landed or holds nothing, else the branch stays for ``zero swarm diff`` and ``zero swarm land``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import anyio
import anyio.to_thread

from zero.agent import Event, LandChanged
from zero.errors import UsageError
from zero.orchestrator.land import (
    Check,
    CheckFailed,
    CheckResult,
    CommandRunner,
    Conflict,
    Landed,
    LandOutcome,
    LandQueue,
    NothingToLand,
    Skipped,
    command_check,
    tail,
)
from zero.orchestrator.plan import TeamPlan
from zero.orchestrator.team import TeamFile
from zero.sessions import default_data_dir, short_id
from zero.tools import ShellSettings, ToolContext, Workspace
from zero.tools.builtin import Bash
from zero.tools.snapshot import take_snapshot
from zero.tools.worktrees import DiffStat, MemberWorktree, Worktrees

__all__ = ["LandReport", "NotLanded", "TeamWorktrees", "land_event", "sandboxed_runner"]

_EXIT_NOTE = re.compile(r"\n*\[exit code \d+\]$")  # what the bash tool adds for the model


class NotLanded(Exception):
    """A member cannot start: an isolated member it depends on did not land (its message says which, how)."""


@dataclass(frozen=True, kw_only=True)
class LandReport:
    """How the run's landing ended: each isolated member's ``outcomes``, the integration branch, the one
    command that merges it (``None``: nothing landed, or it was merged), whether the user's branch was
    moved (``into = "current"``) and, if it was asked for but not done, why not."""

    outcomes: dict[str, LandOutcome]
    stats: dict[str, DiffStat]
    branches: dict[str, str]
    land_branch: str
    merge_command: str | None
    checked: dict[str, str] = field(default_factory=dict)
    merged: bool = False
    not_merged: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "branch": self.land_branch,
            "mergeCommand": self.merge_command,
            "merged": self.merged,
            "notMerged": self.not_merged,
            "members": {
                name: {**_outcome_json(o, self.stats[name], self.branches[name]), "check": self.checked.get(name)}
                for name, o in self.outcomes.items()
            },
        }


def _outcome_json(outcome: LandOutcome, stat: DiffStat, branch: str) -> dict[str, object]:
    fields: dict[str, object] = {
        "state": outcome.kind,
        "branch": branch,
        "diffStat": {"files": stat.files, "added": stat.added, "removed": stat.removed},
    }
    match outcome:
        case Landed():
            fields["commits"] = outcome.commits
        case Conflict():
            fields["conflicts"] = [{"path": f.path, "landed": f.landed, "member": f.member} for f in outcome.files]
        case CheckFailed():
            fields.update(tail=outcome.tail, timedOut=outcome.timed_out)
        case Skipped():
            fields["dependency"] = outcome.dependency
        case NothingToLand():
            pass
    return fields


def land_event(session_id: str, outcome: LandOutcome, stat: DiffStat, branch: str) -> LandChanged:
    """The ``land`` event of a member's landing."""
    conflicts: tuple[str, ...] = ()
    detail = ""
    match outcome:
        case Conflict():
            conflicts = tuple(f.path for f in outcome.files)
        case CheckFailed():
            detail = outcome.tail
        case Skipped():
            detail = f"{outcome.dependency} did not land"
        case Landed() | NothingToLand():
            pass
    return LandChanged(
        session_id=session_id,
        member=outcome.member,
        state=outcome.kind,
        branch=branch,
        files=stat.files,
        added=stat.added,
        removed=stat.removed,
        conflicts=conflicts,
        detail=detail,
    )


def sandboxed_runner(shell: ShellSettings) -> CommandRunner:
    """Runs a check as the bash tool runs a command: in the sandbox, writing only in the tree it checks."""

    async def run(command: str, cwd: Path, seconds: float) -> CheckResult:
        ctx = ToolContext(workspace=Workspace([cwd]), permission_mode="auto", shell=shell)
        try:
            done = await Bash().call({"command": command, "timeout_seconds": seconds}, ctx)
        finally:
            await ctx.end_background()
        timed_out = done.text.endswith(f"[killed after {seconds:g} s timeout]")
        output = _EXIT_NOTE.sub("", done.text)
        return CheckResult(passed=not done.is_error, output=output, timed_out=timed_out)

    return run


@dataclass(kw_only=True)
class TeamWorktrees:
    """The worktrees and land queue of one team run (``session_id``: the team's session)."""

    team: TeamFile
    isolated: list[str]  # the isolated members, in dependency order
    session_id: str
    worktrees: Worktrees
    queue: LandQueue
    emit: Callable[[Event], None]
    checked: dict[str, str] = field(default_factory=dict)  # a landed member's: the tail of its passing check
    _lock: anyio.Lock = field(default_factory=anyio.Lock)
    _stats: dict[str, DiffStat] = field(default_factory=dict)  # each landed member's, as landing found it
    _checks: dict[Path, CheckResult] = field(default_factory=dict)  # the last check of each tree landed

    @classmethod
    def open(
        cls,
        plan: TeamPlan,
        *,
        session_id: str,
        folder: Path,
        shell: ShellSettings,
        emit: Callable[[Event], None],
        resume: bool = False,
    ) -> TeamWorktrees | None:
        """The run's set (None: no member is isolated): a new one from a snapshot of ``folder``, or, for a
        resumed run, the one it recorded (blocking: run it in a worker thread)."""
        isolated = [name for wave in plan.waves for name in wave if plan.members[name].isolated]
        if not isolated:
            return None
        root, home = short_id(session_id), default_data_dir()
        worktrees = None
        if resume:
            try:
                worktrees = Worktrees.load(root=root, home=home)
            except UsageError:  # it was killed before it recorded any: start from what is there now
                worktrees = None
        if worktrees is None:
            worktrees = Worktrees.create(take_snapshot(folder), root=root, home=home)
        return cls.of(plan.team, isolated, worktrees=worktrees, session_id=session_id, shell=shell, emit=emit)

    @classmethod
    def of(
        cls,
        team: TeamFile,
        isolated: list[str],
        *,
        worktrees: Worktrees,
        session_id: str,
        shell: ShellSettings,
        emit: Callable[[Event], None],
    ) -> TeamWorktrees:
        """The set of ``team``'s ``isolated`` members (in dependency order) in ``worktrees``."""
        land = team.land
        checks: dict[Path, CheckResult] = {}
        check: Check | None = None
        if land.check:
            run = command_check(land.check, timeout=land.timeout_seconds, runner=sandboxed_runner(shell))

            async def check(tree: Path) -> CheckResult:
                checks[tree] = result = await run(tree)  # what it said, for the member's land event
                return result

        depends_on = {name: _isolated_ancestors(team, isolated, name) for name in isolated}
        queue = LandQueue(worktrees=worktrees, check=check, depends_on=depends_on)
        return cls(
            team=team,
            isolated=isolated,
            session_id=session_id,
            worktrees=worktrees,
            queue=queue,
            emit=emit,
            _checks=checks,
        )

    # -- a member's life -------------------------------------------------------------------

    async def enter(self, name: str) -> MemberWorktree:
        """``name``'s worktree, once what it depends on has landed (``NotLanded`` if some did not)."""
        ancestors = _isolated_ancestors(self.team, self.isolated, name)
        for dependency in (n for n in self.isolated if n in ancestors):
            outcome = await self.land(dependency)
            if not isinstance(outcome, Landed | NothingToLand):
                raise NotLanded(f"dependency {dependency!r} did not land ({_why(outcome)})")
        landed = any(isinstance(self.queue.outcomes.get(n), Landed) for n in ancestors)
        base = self.worktrees.land_branch if landed else None
        return await anyio.to_thread.run_sync(self.worktrees.open, name, base)

    async def settle(self, kept: dict[str, str]) -> None:
        """Commit what the ``kept`` members (name: session id) of a resumed run left uncommitted when the
        run that completed them was killed."""

        def commit() -> None:
            for name, session_id in kept.items():
                if name in self.worktrees.members and (self.worktrees.path_of(name) / ".git").exists():
                    self.worktrees.finish(name, session_id, "completed")

        await anyio.to_thread.run_sync(commit)

    async def leave(self, name: str, member_session_id: str, status: str) -> None:
        """Commit what ``name`` changed on its branch (any status); land it now in ``eager`` mode."""
        with anyio.CancelScope(shield=True):  # an interrupted member's edits are work too
            finished = await anyio.to_thread.run_sync(self.worktrees.finish, name, member_session_id, status)
        self.emit(
            LandChanged(
                session_id=self.session_id,
                member=name,
                state="committed",
                branch=self.worktrees.branch_of(name),
                files=finished.stat.files,
                added=finished.stat.added,
                removed=finished.stat.removed,
            )
        )
        if self.team.land.mode == "eager" and status == "completed":
            await self.land(name)

    async def land(self, name: str) -> LandOutcome:
        """Land ``name`` once in this run (a later call gets the first outcome)."""
        async with self._lock:
            if (known := self.queue.outcomes.get(name)) is not None:
                return known
            stat = await anyio.to_thread.run_sync(self._stat, name)
            outcome = await self.queue.land(name)
            if isinstance(outcome, Landed):
                stat = await anyio.to_thread.run_sync(self._stat, name)
            checked = self._checks.pop(self.worktrees.path_of(name) / self.worktrees.snapshot.prefix, None)
            if isinstance(outcome, Landed) and checked is not None:
                self.checked[name] = tail(checked.output, 5)
            event = land_event(self.session_id, outcome, stat, self.worktrees.branch_of(name))
            self.emit(replace(event, detail=self.checked[name]) if name in self.checked else event)
            self._stats[name] = stat
            return outcome

    async def close(self, completed: Iterable[str], *, land: bool) -> LandReport:
        """Land the ``completed`` members not landed yet (``land``: the run was not interrupted), in
        dependency order, then remove every worktree, keeping the branches that hold work not landed."""
        done = set(completed)
        if land:
            for name in self.isolated:
                if name in done and name in self.worktrees.members:
                    await self.land(name)
        with anyio.CancelScope(shield=True):
            report = await anyio.to_thread.run_sync(self._close)
        return report

    def _close(self) -> LandReport:
        wt = self.worktrees
        for name in wt.members:
            wt.stow(name)
        wt.sweep()
        wt.drop_land_branch()
        merged, why = False, None
        if self.team.land.into == "current" and self.queue.outcomes:
            why = self.queue.merge_into_current()
            merged = why is None
        outcomes = {name: self.queue.outcomes[name] for name in self.isolated if name in self.queue.outcomes}
        return LandReport(
            outcomes=outcomes,
            stats={name: self._stats.get(name, DiffStat(files=0, added=0, removed=0)) for name in outcomes},
            branches={name: wt.branch_of(name) for name in outcomes},
            land_branch=wt.land_branch,
            checked=dict(self.checked),
            merge_command=None if merged else self.queue.merge_command(),
            merged=merged,
            not_merged=why,
        )

    def _stat(self, name: str) -> DiffStat:
        wt = self.worktrees
        if wt.landed(name) or wt.changed(name):
            return wt.diff_stat(name)
        return DiffStat(files=0, added=0, removed=0)


def _why(outcome: LandOutcome) -> str:
    match outcome:
        case Conflict():
            return "conflict in " + ", ".join(f.path for f in outcome.files)
        case CheckFailed():
            return "its check timed out" if outcome.timed_out else "its check failed"
        case Skipped():
            return f"{outcome.dependency} did not land"
        case Landed() | NothingToLand():
            return outcome.kind


def _isolated_ancestors(team: TeamFile, isolated: list[str], name: str) -> set[str]:
    """The ``isolated`` members ``name`` depends on, directly or through others."""
    depends_on = {m.name: m.depends_on for m in team.members}
    seen: set[str] = set()
    todo = list(depends_on.get(name, ()))
    while todo:
        dep = todo.pop()
        if dep not in seen:
            seen.add(dep)
            todo.extend(depends_on.get(dep, ()))
    return seen & set(isolated)
