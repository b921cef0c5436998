"""A team run's isolated members: each writes in a git worktree of its own, and their work comes back
one member at a time through the land queue.

The run snapshots what the caller sees (HEAD and its uncommitted changes) once; a member starts on
its own branch from that snapshot, or, when it depends on isolated members, from the integration
branch once their work has landed there (so it sees it). When a member ends, whatever its status, its
changes are committed on its branch. Its branch lands as it ends (``[land] mode = "eager"``), when a
member depending on it is about to start, or at the end of the run (``mode = "end"``), in dependency
order, the check run after each. At the end every worktree is removed: with its branch when the branch
landed or holds nothing, else the branch stays for ``zero swarm diff`` and ``zero swarm land``.

On a Ray cluster whose team names ``[workspace] repo``, a member's worktree is made on its node instead
(``zero.tools.clones``): the member's branch is made here, travels to the node as a bundle of what the
repository lacks, and comes back as a bundle of what the member added; landing is the same.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
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
from zero.sessions import AgentSession, ToolSet, default_data_dir, short_id
from zero.tools import ShellSettings, Tool, ToolContext, Workspace
from zero.tools.builtin import Bash
from zero.tools.clones import NodeTree, bundle_of, fetch_bundle, tips_of
from zero.tools.snapshot import take_snapshot
from zero.tools.worktrees import DiffStat, MemberWorktree, Worktrees

__all__ = ["LandReport", "NotLanded", "TeamWorktrees", "land_event", "member_worktree", "sandboxed_runner"]

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
    stopped: tuple[str, ...] = ()  # completed members not landed because the landing was stopped (Ctrl-C)

    def to_json(self) -> dict[str, object]:
        return {
            "branch": self.land_branch,
            "mergeCommand": self.merge_command,
            "merged": self.merged,
            "notMerged": self.not_merged,
            "stopped": list(self.stopped),
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
    repo: str | None = None  # [workspace] repo: the members' worktrees are made on their nodes, from it
    checked: dict[str, str] = field(default_factory=dict)  # a landed member's: the tail of its passing check
    _tips: list[str] | None = None  # what the repository's branches and tags point at (not sent in a bundle)
    _lock: anyio.Lock = field(default_factory=anyio.Lock)
    _landing: anyio.CancelScope | None = None  # the landing at the end of the run, while it goes on
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
        repo: str | None = None,
    ) -> TeamWorktrees | None:
        """The run's set (None: no member is isolated): a new one from a snapshot of ``folder``, or, for a
        resumed run, the one it recorded (blocking: run it in a worker thread); ``repo``: the members'
        worktrees are made on their nodes, from that repository."""
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
        return cls.of(
            plan.team, isolated, worktrees=worktrees, session_id=session_id, shell=shell, emit=emit, repo=repo
        )

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
        repo: str | None = None,
    ) -> TeamWorktrees:
        """The set of ``team``'s ``isolated`` members (in dependency order) in ``worktrees`` (``repo``: made on
        their nodes, from that repository)."""
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
            repo=repo,
            _checks=checks,
        )

    # -- a member's life -------------------------------------------------------------------

    async def enter(self, name: str) -> MemberWorktree:
        """``name``'s worktree, once what it depends on has landed (``NotLanded`` if some did not)."""
        base = await self._base(name)
        return await anyio.to_thread.run_sync(self.worktrees.open, name, base)

    async def enter_node(self, name: str) -> NodeTree:
        """What ``name``'s node needs to make its worktree from ``repo``, once what it depends on has landed
        (``NotLanded`` if some did not): its branch, made here (or as a resumed run left it)."""
        base = await self._base(name)
        return await anyio.to_thread.run_sync(self._node_tree, name, base)

    async def _base(self, name: str) -> str | None:
        """What ``name`` branches from, once what it depends on has landed: the integration branch if some of
        it did, else the snapshot (None)."""
        ancestors = _isolated_ancestors(self.team, self.isolated, name)
        for dependency in (n for n in self.isolated if n in ancestors):
            outcome = await self.land(dependency)
            if not isinstance(outcome, Landed | NothingToLand):
                raise NotLanded(f"dependency {dependency!r} did not land ({_why(outcome)})")
        landed = any(isinstance(self.queue.outcomes.get(n), Landed) for n in ancestors)
        return self.worktrees.land_branch if landed else None

    def _node_tree(self, name: str, base: str | None) -> NodeTree:
        assert self.repo is not None
        wt = self.worktrees
        start = wt.branch(name, base)
        if self._tips is None:
            self._tips = tips_of(self.repo, cwd=wt.snapshot.repo)
        bundle = bundle_of(wt.snapshot.repo, wt.branch_of(name), since=self._tips)
        return NodeTree(
            repo=self.repo, branch=wt.branch_of(name), start=start, prefix=wt.snapshot.prefix, bundle=bundle
        )

    async def settle(self, kept: dict[str, str]) -> None:
        """Commit what the ``kept`` members (name: session id) of a resumed run left uncommitted when the
        run that completed them was killed."""

        def commit() -> None:
            for name, session_id in kept.items():
                if name in self.worktrees.members and (self.worktrees.path_of(name) / ".git").exists():
                    self.worktrees.finish(name, session_id, "completed")

        await anyio.to_thread.run_sync(commit)

    async def leave(self, name: str, member_session_id: str, status: str, *, bundle: bytes | None = None) -> None:
        """Commit what ``name`` changed on its branch (any status; a member whose node made its worktree:
        fetch the ``bundle`` of what it committed there); land it now in ``eager`` mode."""
        wt = self.worktrees
        with anyio.CancelScope(shield=True):  # an interrupted member's edits are work too
            if self.repo is None:
                stat = (await anyio.to_thread.run_sync(wt.finish, name, member_session_id, status)).stat
            else:
                if bundle is not None:
                    branch = wt.branch_of(name)
                    await anyio.to_thread.run_sync(lambda: fetch_bundle(wt.snapshot.repo, bundle, branch, force=False))
                stat = await anyio.to_thread.run_sync(wt.diff_stat, name)
        self.emit(
            LandChanged(
                session_id=self.session_id,
                member=name,
                state="committed",
                branch=wt.branch_of(name),
                files=stat.files,
                added=stat.added,
                removed=stat.removed,
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
            with anyio.CancelScope() as self._landing:  # (``stop_landing`` ends it: the team's end is shielded)
                for name in self.isolated:
                    if name in done and name in self.worktrees.members:
                        await self.land(name)
        with anyio.CancelScope(shield=True):
            report = await anyio.to_thread.run_sync(self._close)
        if not land or (self._landing is not None and self._landing.cancel_called):  # (interrupted: before or during)
            stopped = tuple(n for n in self.isolated if n in done and n not in report.outcomes)
            report = replace(report, stopped=stopped)
        return report

    def stop_landing(self) -> None:
        """Stop the landing at the end of the run where it is (Ctrl-C during a long check): what landed stays,
        the member being landed keeps its branch as it was."""
        if self._landing is not None:
            self._landing.cancel()

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


async def member_worktree(team_id: str, member: str) -> tuple[Workspace, Callable[[AgentSession], ToolSet]] | None:
    """The worktree ``member`` of the team run ``team_id`` worked in, opened again where it was (made again
    from its branch if the run removed it), for the member resumed alone: its workspace, and what to add to
    its session so that, when it closes, what it changed is committed on its branch (a ``land`` event says
    so) and the worktree removed, the branch kept (``zero swarm land`` lands it). None: it had none."""
    try:
        worktrees = await anyio.to_thread.run_sync(
            lambda: Worktrees.load(root=short_id(team_id), home=default_data_dir())
        )
    except UsageError:
        return None
    if member not in worktrees.members:
        return None
    # (a member whose work landed goes on from where it landed, not from the run's snapshot without it)
    tree = await anyio.to_thread.run_sync(lambda: worktrees.open(member, worktrees.resumed_base(member)))

    @asynccontextmanager
    async def committed(session: AgentSession) -> AsyncIterator[Sequence[Tool]]:
        try:
            yield ()
        finally:
            status = session.result.status if session.result is not None else "interrupted"
            with anyio.CancelScope(shield=True):  # an interrupted member's edits are work too
                finished = await anyio.to_thread.run_sync(worktrees.finish, member, session.session_id, status)
                await anyio.to_thread.run_sync(worktrees.stow, member)
                await anyio.to_thread.run_sync(worktrees.sweep)
                kept = await anyio.to_thread.run_sync(worktrees.changed, member)
            stat = finished.stat
            session.emit(  # (a run that changed nothing, after its work landed or with none: nothing to land)
                LandChanged(
                    session_id=session.session_id,
                    member=member,
                    state="committed" if kept else "nothing_to_land",
                    branch=tree.branch,
                    files=stat.files,
                    added=stat.added,
                    removed=stat.removed,
                    detail=f"zero swarm land {team_id} lands it" if kept else "",
                )
            )

    return Workspace([tree.workspace]), committed
