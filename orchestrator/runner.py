"""Running a team: members start as soon as their dependencies complete, under one ledger.

The run is a ``team`` session; each member is a ``member`` session below it (created up
front, so every member has a session and a final status whatever happens), and a
member's Task children sit below the member: the team is a node of the run tree, each member a
node below it. Members run through a ``MemberExecutor``; their events, and the team's own, reach
``events()`` through the tree, and a stop of the team is a stop of its subtree.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream

from zero.agent import (
    TERMINAL,
    BudgetTripped,
    ChildFinished,
    ChildStarted,
    Event,
    RetryPolicy,
    RunStatus,
    Status,
    StatusChanged,
    TeamFinished,
    TeamMember,
    TeamStarted,
    Usage,
    WarningRaised,
    exit_code,
    worst,
)
from zero.agent.prompts import TEAM_RESUMED
from zero.errors import ToolError, ZeroError
from zero.orchestrator.control import USER, ControlGuard, ControlRefused, Controls
from zero.orchestrator.executor import InProcessExecutor, MemberExecutor, MemberOutcome, MemberRun, MemberTask
from zero.orchestrator.isolation import LandReport, NotLanded, TeamWorktrees
from zero.orchestrator.ledger import Ledger, Trip
from zero.orchestrator.mailbox import Mailbox, ReadInbox, SendMessage
from zero.orchestrator.plan import MemberPlan, TeamPlan, member_prompt, member_role, placeholder, typed_result
from zero.orchestrator.resume import RecordedTeam, charge
from zero.orchestrator.reuse import Reuse, member_inputs
from zero.sessions import (
    Listener,
    SessionMetadata,
    SessionRecorder,
    UsageTotals,
    close_open_children,
    new_session_id,
    session_tree,
)
from zero.specialists import AgentContext
from zero.tools import Workspace

__all__ = ["MemberState", "TeamResult", "TeamRunner"]


@dataclass(kw_only=True)
class MemberState:
    plan: MemberPlan
    session_id: str
    status: Status = "pending"
    reason: str = ""
    error_code: str | None = None  # of the error its run ended with
    output: str = ""
    usage: Usage = field(default_factory=Usage)  # what its subtree (itself, its Task children) spent in this run
    total: Usage = field(default_factory=Usage)  # what its subtree spent in every run, as its sessions record it
    turns: int = 0
    started: float | None = None
    finished: float | None = None
    run: MemberRun | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    kept: bool = False  # a resumed run keeps this member's completed work: it does not run again
    reused_from: str = ""  # the session of an earlier run whose output this run takes (--reuse)
    branch: str = ""  # an isolated member's branch, once its worktree is open
    stopped: bool = False  # zero swarm stop: it ends cancelled (or never starts)
    waiting: anyio.CancelScope | None = None  # while it waits for its dependencies and a place to run

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def result(self) -> Any:
        """Its typed result, once it completed with one (its ``output`` is the result's JSON text); else None."""
        return typed_result(self.plan, self.output) if self.status == "completed" else None

    @property
    def duration(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or time.monotonic()) - self.started


@dataclass(kw_only=True)
class TeamResult:
    session_id: str
    status: Status
    members: list[MemberState]
    trip: Trip | None
    usage: Usage  # what the team spent in every run, as its sessions record it (the members' totals)
    duration: float
    ledger: Ledger
    error_code: str | None = None  # of the member whose status is the team's
    land: LandReport | None = None  # how its isolated members' work came back (None: none is isolated)

    @property
    def exit_code(self) -> int:
        return exit_code(self.status, self.error_code)

    def to_json(self) -> dict[str, Any]:
        budget = self.ledger.limits
        return {
            "sessionId": self.session_id,
            "status": self.status,
            "durationMs": int(self.duration * 1000),
            "usage": self.usage.to_json(),
            "costUsd": self.usage.to_json()["costUsd"],
            "budget": {
                "limits": budget.model_dump(),
                "used": {
                    "tokens": self.ledger.used.tokens,
                    "costUsd": round(self.ledger.used.cost_usd, 6),
                    "turns": self.ledger.used.turns,
                    "retries": self.ledger.used.retries,
                    "wallSeconds": round(self.duration, 3),
                },
                "tripped": None
                if self.trip is None
                else {
                    "limit": self.trip.limit,
                    "used": self.trip.used,
                    "requested": self.trip.requested,
                    "allowed": self.trip.allowed,
                    "message": str(self.trip),
                },
            },
            "members": [
                {
                    "name": m.name,
                    "sessionId": m.session_id,
                    "status": m.status,
                    "reason": m.reason or None,
                    "specialist": m.plan.specialist.name,
                    "model": m.plan.model,
                    "turns": m.turns,
                    "usage": m.total.to_json(),
                    "costUsd": m.total.to_json()["costUsd"],
                    "durationMs": int(m.duration * 1000),
                    "output": m.output,
                    **({"structuredOutput": m.result} if m.result is not None else {}),
                    "reusedFrom": m.reused_from or None,
                }
                for m in self.members
            ],
            "land": self.land.to_json() if self.land is not None else None,
        }

    def failure_summary(self) -> str:
        """Why the team did not complete: the trip, or each member that did not complete."""
        if self.trip is not None:
            return str(self.trip)
        bad = [
            f"{m.name} {m.status}" + (f" ({m.reason})" if m.reason else "")
            for m in self.members
            if m.status != "completed"
        ]
        return "; ".join(bad) or self.status


STOPPED = "stopped by the user"
STARTED_AT_ONCE = 100
"""Members started before those already started take their next step. The event loop runs its tasks in turn:
a team of 10,000 started at once made its first model call once every member had taken the first steps of its
start, 7.5 s in; started 100 at a time, 2.2 s in, once its sessions were made (bench/bench_swarm.py's 1st req)."""

_NOT_STARTED = {
    "interrupted": "the run was interrupted before it started",
    "cancelled": 'the team stopped after a failure (on_failure = "stop")',
}


class TeamRunner:
    """Runs one plan. ``interrupt()`` (Ctrl-C, SIGTERM) stops everything, recorded ``interrupted``."""

    def __init__(
        self,
        plan: TeamPlan,
        ctx: AgentContext,
        *,
        executor: MemberExecutor | None = None,
        retries: int | None = None,
        retry_delay: float = 1.0,
        resume: RecordedTeam | None = None,
        reuse: Mapping[str, Reuse] | None = None,
    ):
        """``resume``: run a recorded team again in its own sessions: completed members keep their
        output, the others continue their history, and the ledger starts with what was spent. ``reuse``:
        a new run that takes the output of each member reused (``plan_reuse``) instead of running it."""
        self.plan = plan
        self.retry = RetryPolicy(
            retries=plan.team.scheduler.retries if retries is None else retries,
            base_delay=retry_delay,
            max_delay=ctx.retry.max_delay,
        )
        self.ctx = replace(ctx, retry=self.retry)
        self.store = ctx.store
        self.resume = resume
        self.session_id = resume.session_id if resume else new_session_id("team")
        self.tree = ctx.tree
        self.node = self.tree.add(self.session_id, kind="team", title=plan.name, team_name=plan.name)
        self.tree.attach(self.node, SessionRecorder(self.store, self.session_id))  # the recorder first
        self.executor = executor or InProcessExecutor(self.ctx)
        self.ledger = Ledger(plan.budget, name="team", on_trip=self._tripped)
        self.members = {
            name: MemberState(plan=m, session_id=new_session_id("member")) for name, m in plan.members.items()
        }
        if resume is not None:
            charge(self.ledger, resume)
            for name, state in self.members.items():
                record = resume.members[name]
                state.session_id = record.session_id
                if record.status == "completed":  # its work stands: dependents get its output as before
                    state.status, state.output, state.turns = "completed", record.output, record.turns
                    state.kept = True
        for name, verdict in (reuse or {}).items():
            if verdict.reused:  # its work stands, from the run it came from
                state = self.members[name]
                state.status, state.output, state.kept = "completed", verdict.output, True
                state.reused_from, state.reason = verdict.session_id, f"reused from {verdict.session_id}"
        self.mailbox = Mailbox(store=self.store, team_session_id=self.session_id, members=list(plan.members))
        self._scope: anyio.CancelScope | None = None
        self.isolation: TeamWorktrees | None = None  # the isolated members' worktrees and land queue
        self._limiter = anyio.CapacityLimiter(plan.max_concurrency)
        self.controls = Controls()  # what zero swarm pause and send asked of the members
        self.finished: TeamResult | None = None

    def events(self) -> MemoryObjectReceiveStream[Event]:
        """Every event of the team and its members from now on, until the run ends."""
        return self.tree.subscribe(self.node)

    def listen(self, listener: Listener) -> None:
        """``listener`` hears every event of the team and its members at once, as it is emitted."""
        self.tree.listen(listener, under=self.node)

    # -- lifecycle -------------------------------------------------------------

    async def run(self) -> TeamResult:
        started = time.monotonic()
        opening = functools.partial(
            TeamWorktrees.open,
            self.plan,
            session_id=self.session_id,
            folder=self.ctx.workspace.root,
            shell=self.ctx.shell,
            emit=self.tree.emit,
            resume=self.resume is not None,
            repo=self.plan.team.workspace.repo if self.executor.remote else None,
        )
        self.isolation = await anyio.to_thread.run_sync(opening)  # the snapshot, before anything runs
        if self.isolation is not None and self.resume is not None:
            await self.isolation.settle({s.name: s.session_id for s in self.members.values() if s.kept})
        await anyio.to_thread.run_sync(self._take_sessions if self.resume else self._create_sessions)
        self.tree.emit(self._team_started())
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                async with anyio.create_task_group() as tg:
                    wall = self.plan.budget.wall_seconds
                    if wall is not None:
                        tg.start_soon(self._wall_clock, wall)
                    async with anyio.create_task_group() as members:
                        for i, state in enumerate(self.members.values(), 1):
                            members.start_soon(self._member, state)
                            if i % STARTED_AT_ONCE == 0:  # those started take a step (a stop meanwhile
                                await anyio.lowlevel.cancel_shielded_checkpoint()  # reaches every member)
                    tg.cancel_scope.cancel()  # members are done: stop the wall clock
        finally:
            with anyio.CancelScope(shield=True):
                result = await self._finish(started)
                self.tree.close(self.node)
        return result

    def interrupt(self) -> None:
        self._stop("interrupted", cancel=True)
        if self._scope is not None:
            self._scope.cancel()
        if self.isolation is not None:
            self.isolation.stop_landing()

    # -- control (zero swarm stop, send, pause, continue) -------------------------------

    def stop_member(self, name: str) -> str:
        """``name`` alone ends ``cancelled`` now (a member yet to start never starts), keeping its output so
        far; its dependents follow ``on_failure``."""
        state = self._running(name)
        state.stopped = True
        if state.run is not None:
            self.tree.stop("cancelled", under=self.tree.nodes[state.session_id])
        elif state.waiting is not None:
            state.waiting.cancel()
        return f"stopping {name}: it ends cancelled, keeping its output so far"

    async def send_member(self, name: str, text: str) -> str:
        """A message from the user that ``name`` reads before its next model call, recorded in the team's log
        (a ``team_message`` from ``user``) and, when read, in the member's."""
        state = self._running(name)
        if not text.strip():
            raise ControlRefused("the message is empty")
        try:
            number = await self.mailbox.record(USER, state.name, text)
        except ToolError as e:  # too long
            raise ControlRefused(str(e)) from None
        self.controls.post(state.name, text)
        return f"message {number} for {name}: it reads it before its next model call"

    def pause_members(self, name: str | None) -> str:
        """``name`` (None: every member yet to end) waits before its next model call until ``continue_members``."""
        names = [self._running(name).name] if name else self._unended()
        self.controls.pause(names)
        each = "it waits" if len(names) == 1 else "each waits"
        return f"paused {', '.join(names)}: {each} before its next model call (zero swarm continue goes on)"

    def continue_members(self, name: str | None) -> str:
        """``name`` (None: every paused member) goes on."""
        if name:
            self._running(name)
            names = [name] if name in self.controls.paused else []
        else:
            self._unended()
            names = sorted(self.controls.paused)
        self.controls.resume(names)
        if not names:
            return f"{name} is not paused" if name else "no member is paused"
        return f"continuing {', '.join(names)}"

    def _running(self, name: str) -> MemberState:
        """The member ``name`` of this running team, which has not ended (``ControlRefused`` otherwise)."""
        self._unended()
        state = self.members.get(name)
        if state is None:
            names = ", ".join(self.members)
            raise ControlRefused(f"the team {self.plan.name} has no member {name!r}; its members: {names}")
        if state.status in TERMINAL:
            raise ControlRefused(f"{name} already ended {state.status}")
        return state

    def _unended(self) -> list[str]:
        names = [s.name for s in self.members.values() if s.status not in TERMINAL]
        if self.finished is not None or not names:
            raise ControlRefused(f"the team {self.session_id} is not running: every member has ended")
        return names

    def _stop(self, status: RunStatus, *, cancel: bool = False) -> None:
        """Every member, and what it started, ends ``status``; ``cancel``: the running ones stop now (else they
        end at their next model call, which a tripped ledger refuses); the others do not start."""
        self.tree.stop(status, under=self.node, cancel=cancel)

    def _tripped(self, trip: Trip) -> None:
        self.tree.emit(
            BudgetTripped(
                session_id=self.session_id,
                limit=trip.limit,
                used=trip.used,
                allowed=trip.allowed,
                requested=trip.requested,
                message=str(trip),
            )
        )
        self._stop("budget_exhausted")

    async def _wall_clock(self, seconds: float) -> None:
        await anyio.sleep(max(0.0, seconds - self.ledger.elapsed()))
        self.ledger.check_time()  # trips the ledger on time
        self._stop("budget_exhausted", cancel=True)

    # -- members ---------------------------------------------------------------

    async def _member(self, state: MemberState) -> None:
        if state.kept:
            if state.reused_from:
                self._end_reused(state)
            state.done.set()
            return
        deps = [self.members[d] for d in state.plan.spec.depends_on]
        placed = False
        try:
            with anyio.CancelScope() as state.waiting:  # zero swarm stop ends a member that waits to start
                # A member whose owns overlap an earlier one's starts once that one has ended, however it ended.
                for dep in (*deps, *(self.members[n] for n in state.plan.waits_for)):
                    await dep.done.wait()
                if self._why_not(state, deps) is None:
                    await self._limiter.acquire()
                    placed = True
            state.waiting = None
            try:
                if (reason := self._why_not(state, deps)) is not None:
                    self._end_unstarted(state, *reason)
                    return
                await self._run_member(state)
            finally:
                if placed:
                    self._limiter.release()
        finally:
            state.done.set()

    def _why_not(self, state: MemberState, deps: list[MemberState]) -> tuple[Status, str] | None:
        if state.stopped:
            return "cancelled", STOPPED
        if self.ledger.trip is not None:
            return "budget_exhausted", f"the team budget ran out before it started ({self.ledger.trip})"
        if (stopping := self.node.status) is not None:
            return stopping, _NOT_STARTED.get(stopping, "")
        for dep in deps:
            if dep.status != "completed":
                return "skipped", f"dependency {dep.name!r} ended {dep.status}"
        return None

    def _output(self, name: str, keys: tuple[str, ...]) -> str:
        """What ``{{ name.output }}`` (``keys``: ``{{ name.output.a.b }}``) stands for; a ``LookupError`` naming
        the placeholder when the member's result has nothing there."""
        member = self.members[name]
        return placeholder(name, member.output, member.result, keys)

    def _prompt(self, plan: MemberPlan) -> str:
        """The member's task, its placeholders filled (a ``LookupError`` for a field its dependency lacks)."""
        return member_prompt(self.plan, plan, self._output)

    def _task(self, state: MemberState, member_ledger: Ledger, prompt: str) -> MemberTask:
        plan = state.plan
        role = member_role(self.plan, plan)
        resumed = self.resume is not None and self.resume.members[plan.name].has_history
        if resumed:
            prompt = TEAM_RESUMED
        node = self.tree.add(
            state.session_id,
            kind="member",
            under=self.node,
            title=f"{self.plan.name}: {plan.name}",
            member_name=plan.name,
        )
        return MemberTask(
            plan=plan,
            node=node,
            prompt=prompt,
            role=role,
            resume=resumed,
            ledger=member_ledger,
            tools=(SendMessage(self.mailbox, plan.name), ReadInbox(self.mailbox, plan.name)),
        )

    async def _run_member(self, state: MemberState) -> None:
        plan = state.plan
        member_ledger = self.ledger
        if plan.spec.budget is not None:
            member_ledger = Ledger(plan.spec.budget, parent=self.ledger, name=f"member {plan.name!r}")
        try:
            prompt = self._prompt(plan)
        except LookupError as e:  # a dependency's result lacks a field the prompt names: nothing to run it on
            self._end_unstarted(state, "skipped", str(e))
            return
        workspace = node_tree = None
        if plan.isolated and self.isolation is not None:
            try:
                if self.isolation.repo is not None:  # its node makes it
                    node_tree = await self.isolation.enter_node(plan.name)
                    state.branch = node_tree.branch
                else:
                    tree = await self.isolation.enter(plan.name)
                    state.branch, workspace = tree.branch, Workspace([tree.workspace])
            except NotLanded as e:
                self._end_unstarted(state, "skipped", str(e))
                return
            except ZeroError as e:  # git could not make its worktree: this member fails, not the team
                self._end_unstarted(state, "failed", f"its worktree could not be made: {e}")
                return
        if state.stopped:  # while its worktree was made
            self._end_unstarted(state, "cancelled", STOPPED)
            return
        task = self._task(state, member_ledger, prompt)
        guard = ControlGuard(self.controls, plan.name, state.session_id, self.tree.emit)
        state.run = self.executor.start(replace(task, workspace=workspace, tree=node_tree, guards=(guard,)))
        state.status, state.started = "running", time.monotonic()
        self.tree.emit(
            ChildStarted(
                session_id=self.session_id,
                child_session_id=state.session_id,
                specialist=plan.specialist.name,
                agent_name=plan.name,
                member=plan.name,
                mode="member",
                description=plan.spec.prompt[:80],
                root_session_id=self.session_id,
            )
        )
        try:
            await state.run.outcome()
        except Exception as e:  # it could not even run (or its executor broke): this member fails, not the team
            state.reason = f"{type(e).__name__}: {e}" if not isinstance(e, ZeroError) else str(e)
            self.store.submit(
                state.session_id,
                [StatusChanged(session_id=state.session_id, status="failed", reason=state.reason)],
                final=True,
            )
        finally:
            outcome = state.run.current()
            self._end_member(state, outcome, member_ledger)
            if (workspace is not None or node_tree is not None) and self.isolation is not None:
                try:
                    bundle = outcome.bundle if outcome is not None else None
                    await self.isolation.leave(plan.name, state.session_id, state.status, bundle=bundle)
                except ZeroError as e:  # (its worktree was removed meanwhile, say): the others go on
                    self._warn("worktree", f"{plan.name}'s work could not be committed or landed: {e}")

    def _end_member(self, state: MemberState, outcome: MemberOutcome | None, member_ledger: Ledger) -> None:
        state.finished = time.monotonic()
        if outcome is None:  # stopped before its run could start, or it could not start at all
            state.status = "failed" if state.reason else self.tree.why(self.node)
        else:
            result = outcome.result
            record = self.resume.members.get(state.plan.name) if self.resume else None
            earlier = record.turns if record is not None else 0  # (its calls in earlier runs: it goes on from them)
            state.status, state.output, state.turns = result.status, result.output, earlier + result.turns
            state.reason, state.usage, state.error_code = result.error or "", outcome.usage, result.error_code
        if state.status == "budget_exhausted" and member_ledger.trip is not None and not state.reason:
            state.reason = str(member_ledger.trip)
        if state.stopped and state.status == "cancelled":
            state.reason = STOPPED
        self._log_end(state)
        self._followed(state)

    def _followed(self, state: MemberState) -> None:
        """A member failed, or the user stopped it: on_failure = "stop" stops the team (else only its
        dependents are skipped)."""
        if (state.status == "failed" or state.stopped) and self.plan.team.scheduler.on_failure == "stop":
            self._stop("cancelled", cancel=True)

    def _warn(self, code: str, message: str) -> None:
        self.tree.emit(WarningRaised(session_id=self.session_id, code=code, message=message))

    def _end_unstarted(self, state: MemberState, status: Status, reason: str) -> None:
        state.status, state.reason = status, reason
        if self.ctx.prices.price(state.plan.model) is None:  # it spent nothing, at a price nobody knows
            state.usage = state.usage + Usage(cost_usd=None)
        self.store.submit(
            state.session_id, [StatusChanged(session_id=state.session_id, status=status, reason=reason)], final=True
        )
        self._log_end(state)
        if state.stopped:
            self._followed(state)

    def _end_reused(self, state: MemberState) -> None:
        self.store.submit(
            state.session_id,
            [StatusChanged(session_id=state.session_id, status="completed", reason=state.reason)],
            final=True,
        )
        self._log_end(state)

    def _log_end(self, state: MemberState) -> None:
        self.controls.resume([state.name])  # an ended member is paused no more
        self.tree.emit(
            ChildFinished(
                session_id=self.session_id,
                child_session_id=state.session_id,
                member=state.name,
                specialist=state.plan.specialist.name,
                status=state.status,
                reason=state.reason or None,
                usage=state.usage,
                duration_ms=int(state.duration * 1000),
            )
        )

    # -- sessions ---------------------------------------------------------------

    def _first(self) -> MemberPlan:
        return next(iter(self.plan.members.values()))

    def _create_sessions(self) -> None:
        first = self._first()
        cwd = str(self.ctx.workspace.root)
        team = SessionMetadata(
            session_id=self.session_id,
            session_kind="team",
            title=self.plan.name,
            cwd=cwd,
            provider=first.provider,
            model_id=first.model,
            root_session_id=self.session_id,
            agent_name=self.plan.name,
            team_name=self.plan.name,
            replay_of=self.ctx.replay_of or None,
        )
        members = [
            SessionMetadata(
                session_id=state.session_id,
                session_kind="member",
                title=f"{self.plan.name}: {name}",
                cwd=cwd,
                provider=state.plan.provider,
                model_id=state.plan.model,
                parent_session_id=self.session_id,
                root_session_id=self.session_id,
                agent_name=name,
                specialist=state.plan.specialist.name,
                team_name=self.plan.name,
                member_name=name,
                depth=1,
                usage=UsageTotals.nothing(priced=self.ctx.prices.price(state.plan.model) is not None),
                reused_from=state.reused_from or None,
            )
            for name, state in self.members.items()
        ]
        self.store.create_all([team, *members])  # (one wait for them all: on Ray, one round trip)

    def _take_sessions(self) -> None:
        """A resumed run holds its team's sessions (repairing what a dead run left ``running``, and recording
        the end of the members it left running)."""
        self.store.acquire(self.session_id)
        for state in self.members.values():
            if not state.kept:
                self.store.acquire(state.session_id)
        close_open_children(self.store, self.session_id)

    def _totals(self) -> Usage:
        """Each member's total across runs, and the team's, from the sessions (every batch submitted so far)."""
        tree = session_tree(self.store, self.session_id)
        for state in self.members.values():
            state.total = tree.rollup.subtree(state.session_id)
        return tree.subtree_usage

    def _team_started(self) -> TeamStarted:
        first = self._first()
        specialists: dict[int, dict[str, Any]] = {}  # (each taken apart once: see member_inputs)
        return TeamStarted(
            session_id=self.session_id,
            team=self.plan.name,
            goal=self.plan.team.goal,
            file=str(self.plan.path),
            budget=self.plan.budget.model_dump(exclude_none=True),
            members=tuple(
                TeamMember(
                    name=n,
                    session_id=s.session_id,
                    specialist=s.plan.specialist.name,
                    depends_on=tuple(s.plan.spec.depends_on),
                    model=s.plan.model,
                    inputs=member_inputs(s.plan, specialists),
                )
                for n, s in self.members.items()
            ),
            cwd=str(self.ctx.workspace.root),
            provider=first.provider,
            model=first.model,
            spec=self.plan.recorded_spec(),
            resumed=self.resume.resumed + 1 if self.resume else 0,
        )

    async def _finish(self, started: float) -> TeamResult:
        for state in self.members.values():  # a member the cancellation reached before it began
            if state.status == "pending":
                self._end_unstarted(state, self.tree.why(self.node), "the team stopped before it started")
        land = None
        if self.isolation is not None:
            completed = [s.name for s in self.members.values() if s.status == "completed"]
            try:
                land = await self.isolation.close(completed, land=self.node.status != "interrupted")
            except ZeroError as e:  # the team still ends, and says why its members' work is where it is
                self._warn("worktree", f"landing stopped: {e}; each member's work is on its branch")
        # One rule for every mix: the team ends as its worst member, by the exit code (agent/status.py)
        status, code = worst((s.status, s.error_code) for s in self.members.values())
        if self.node.status == "interrupted":  # (an interruption while it landed included)
            status, code = "interrupted", None
        usage = await anyio.to_thread.run_sync(self._totals)
        trip = self.ledger.trip
        result = TeamResult(
            session_id=self.session_id,
            status=status,
            members=list(self.members.values()),
            trip=trip,
            usage=usage,
            duration=time.monotonic() - started,
            ledger=self.ledger,
            error_code=code,
            land=land,
        )
        self.tree.emit(
            TeamFinished(
                session_id=self.session_id,
                status=status,
                duration_ms=int(result.duration * 1000),
                usage=usage,
                tripped=None if trip is None else str(trip),
                reason="" if status == "completed" else result.failure_summary(),
                error_code=code,
            )
        )
        for session_id in (self.session_id, *(s.session_id for s in self.members.values())):
            self.store.release(session_id)
        await anyio.to_thread.run_sync(self.store.flush)  # every member's final status, on disk
        self.finished = result
        return result
