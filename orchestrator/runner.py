"""Running a team: members start as soon as their dependencies complete, under one ledger.

The run is a ``team`` session; each member is a ``member`` session below it (created up
front, so every member has a session and a final status whatever happens), and a
member's Task children sit below the member. Every agent's events go to one stream.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from zero.agent import (
    AgentRun,
    EventSink,
    PriceTable,
    Provider,
    RetryPolicy,
    RunEvent,
    RunStarted,
    RunStatus,
    StatusChanged,
    SubagentFinished,
    SubagentStarted,
    Usage,
)
from zero.errors import BudgetExhaustedError
from zero.orchestrator.ledger import BudgetGuard, Ledger, Trip
from zero.orchestrator.mailbox import Mailbox, ReadInbox, SendMessage
from zero.orchestrator.plan import MemberPlan, TeamPlan, render_prompt
from zero.sessions import (
    SessionMetadata,
    SessionRecorder,
    SessionStore,
    add_children_usage,
    new_session_id,
    set_status,
)
from zero.specialists import AgentContext, Delegator, SpecialistRegistry, specialist_agent
from zero.tools import Workspace, builtin_tools

__all__ = ["MemberState", "TeamResult", "TeamRunner"]

TEAM_STATUSES = ("completed", "interrupted", "budget_exhausted", "cancelled", "failed")


@dataclass
class MemberState:
    plan: MemberPlan
    session_id: str
    status: str = "pending"
    reason: str = ""
    output: str = ""
    usage: Usage = field(default_factory=Usage)  # the member's subtree: itself and its Task children
    turns: int = 0
    started: float | None = None
    finished: float | None = None
    run: AgentRun | None = None
    delegator: Delegator | None = None
    scope: anyio.CancelScope | None = None
    done: anyio.Event = field(default_factory=anyio.Event)

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def duration(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or time.monotonic()) - self.started


@dataclass
class TeamResult:
    session_id: str
    status: str
    members: list[MemberState]
    trip: Trip | None
    usage: Usage
    duration: float
    ledger: Ledger

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
                    "wallSeconds": round(self.duration, 3),
                },
                "tripped": None
                if self.trip is None
                else {
                    "limit": self.trip.limit,
                    "used": self.trip.used,
                    "held": self.trip.held,
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
                    "usage": m.usage.to_json(),
                    "costUsd": m.usage.to_json()["costUsd"],
                    "durationMs": int(m.duration * 1000),
                    "output": m.output,
                }
                for m in self.members
            ],
        }


class TeamRunner:
    """Runs one plan. ``interrupt()`` (Ctrl-C, SIGTERM) stops everything, recorded ``interrupted``."""

    def __init__(
        self,
        plan: TeamPlan,
        *,
        store: SessionStore,
        registry: SpecialistRegistry,
        workspace: Workspace,
        providers: Callable[[str], Provider],
        prices: PriceTable,
        sink: EventSink,
        retries: int | None = None,
        max_depth: int = 1,
        retry_delay: float = 1.0,
    ):
        self.plan = plan
        self.store = store
        self.registry = registry
        self.workspace = workspace
        self.providers = providers
        self.prices = prices
        self.sink = sink
        self.retry = RetryPolicy(
            retries=plan.team.scheduler.retries if retries is None else retries, base_delay=retry_delay
        )
        self.max_depth = max_depth
        self.session_id = new_session_id("team")
        self.ledger = Ledger(plan.budget, name="team")
        self.members = {name: MemberState(m, new_session_id("member")) for name, m in plan.members.items()}
        self.mailbox = Mailbox(store, self.session_id, list(plan.members))
        self._stopping: RunStatus | None = None  # why unfinished members end, once the team is stopping
        self._scope: anyio.CancelScope | None = None
        self._limiter = anyio.CapacityLimiter(plan.max_concurrency)

    @property
    def members_by_session(self) -> dict[str, str]:
        return {s.session_id: name for name, s in self.members.items()}

    # -- lifecycle -------------------------------------------------------------

    async def run(self) -> TeamResult:
        started = time.monotonic()
        await anyio.to_thread.run_sync(self._create_sessions)
        first = next(iter(self.plan.members.values()))
        await self.sink(RunStarted(self.session_id, first.provider, first.model, str(self.workspace.root), ()))
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                async with anyio.create_task_group() as tg:
                    wall = self.plan.budget.wall_seconds
                    if wall is not None:
                        tg.start_soon(self._wall_clock, wall)
                    async with anyio.create_task_group() as members:
                        for state in self.members.values():
                            members.start_soon(self._member, state)
                    tg.cancel_scope.cancel()  # members are done: stop the wall clock
        finally:
            with anyio.CancelScope(shield=True):
                result = await self._finish(started)
        return result

    def interrupt(self) -> None:
        self._stop("interrupted")
        if self._scope is not None:
            self._scope.cancel()

    def _stop(self, status: RunStatus) -> None:
        if self._stopping is None:
            self._stopping = status
        for state in self.members.values():
            if state.status == "running" and state.run is not None:
                state.run.cancel_status = status
                if state.delegator is not None:
                    state.delegator.mark_stopping(status)

    async def _wall_clock(self, seconds: float) -> None:
        await anyio.sleep(max(0.0, seconds - self.ledger.elapsed()))
        try:
            self.ledger.check()  # trips the ledger on time
        except BudgetExhaustedError:
            pass
        self._stop("budget_exhausted")
        for state in self.members.values():
            if state.scope is not None:
                state.scope.cancel()

    # -- members ---------------------------------------------------------------

    async def _member(self, state: MemberState) -> None:
        deps = [self.members[d] for d in state.plan.spec.depends_on]
        for dep in deps:
            await dep.done.wait()
        try:
            if (reason := self._why_not(state, deps)) is not None:
                await self._end_unstarted(state, *reason)
                return
            async with self._limiter:
                if (reason := self._why_not(state, deps)) is not None:
                    await self._end_unstarted(state, *reason)
                    return
                await self._run_member(state)
        finally:
            state.done.set()

    def _why_not(self, state: MemberState, deps: list[MemberState]) -> tuple[str, str] | None:
        if self._stopping is not None:
            return self._stopping, {
                "interrupted": "the run was interrupted before it started",
                "budget_exhausted": f"the team budget ran out before it started ({self.ledger.trip})",
                "cancelled": 'the team stopped after a failure (on_failure = "stop")',
            }.get(self._stopping, "")
        if self.ledger.trip is not None:
            return "budget_exhausted", f"the team budget ran out before it started ({self.ledger.trip})"
        for dep in deps:
            if dep.status != "completed":
                return "skipped", f"dependency {dep.name!r} ended {dep.status}"
        return None

    async def _run_member(self, state: MemberState) -> None:
        plan = state.plan
        member_ledger = self.ledger
        if plan.spec.budget is not None:
            member_ledger = Ledger(plan.spec.budget, parent=self.ledger, name=f"member {plan.name!r}")
        ctx = AgentContext(
            store=self.store,
            registry=self.registry,
            workspace=self.workspace,
            provider=self.providers(plan.provider),
            model=plan.model,
            providers=self.providers,
            sink=self.sink,
            prices=self.prices,
            retry=self.retry,
            max_depth=self.max_depth + 1,  # a member sits at depth 1; its Task children below it
            guards=(BudgetGuard(member_ledger, self.prices),),
        )
        recorder = SessionRecorder(self.store, state.session_id)

        async def sink(event: RunEvent) -> None:
            if event.session_id == state.session_id:
                await recorder(event)
            await self.sink(event)

        others = [n for n in self.plan.members if n != plan.name]
        role = (
            f'You are "{plan.name}", a member of the team "{self.plan.name}", working as the {plan.specialist.name} '
            f"specialist. The other members are: {', '.join(others) or 'none'}; use send_message and read_inbox "
            "to coordinate with them when it helps. Do your own task only. Your final message is your report: "
            "members that depend on you receive it as their input, so lead with the result, then the evidence."
        )
        extra = (SendMessage(self.mailbox, plan.name), ReadInbox(self.mailbox, plan.name))
        run, delegator = specialist_agent(
            ctx,
            plan.specialist,
            session_id=state.session_id,
            root_session_id=self.session_id,
            depth=1,
            provider=ctx.provider,
            model=plan.model,
            permission_mode=plan.permission_mode,
            caller_tools={t.name for t in builtin_tools()},
            sink=sink,
            max_turns=plan.max_turns,
            extra_tools=extra,
            role=role,
        )
        state.run, state.delegator = run, delegator
        outputs = {n: m.output for n, m in self.members.items()}
        task = render_prompt(plan.spec.prompt, self.plan.team.goal, outputs)
        prompt = f"Team goal:\n{self.plan.team.goal.strip()}\n\nYour task:\n{task}" if self.plan.team.goal else task
        state.status, state.started = "running", time.monotonic()
        self._log(
            "child_start",
            {
                "childSessionId": state.session_id,
                "member": plan.name,
                "specialist": plan.specialist.name,
                "mode": "member",
            },
        )
        await self.sink(
            SubagentStarted(
                state.session_id,
                self.session_id,
                self.session_id,
                plan.name,
                plan.specialist.name,
                member=plan.name,
                description=plan.spec.prompt[:80],
            )
        )
        try:
            with anyio.CancelScope() as scope:
                state.scope = scope
                if self._stopping:
                    run.cancel_status = self._stopping
                if delegator is not None:
                    async with delegator:
                        await run.run(prompt)
                else:
                    await run.run(prompt)
        finally:
            with anyio.CancelScope(shield=True):
                await self._end_member(state, member_ledger)

    async def _end_member(self, state: MemberState, member_ledger: Ledger) -> None:
        run = state.run
        assert run is not None
        result = run.result
        state.finished = time.monotonic()
        if result is None:
            state.status = run.cancel_status
        else:
            state.status, state.output, state.turns = result.status, result.output, result.turns
            state.reason = result.error or ""
        if state.status == "budget_exhausted" and member_ledger.trip is not None and not state.reason:
            state.reason = str(member_ledger.trip)
        meta = await anyio.to_thread.run_sync(self.store.metadata, state.session_id)
        state.usage = meta.subtree_usage
        if result is None:
            self.store.submit(state.session_id, (), set_status(state.status))
        self._log_end(state)
        await self.sink(SubagentFinished(state.session_id, state.status, state.usage, int(state.duration * 1000)))
        if state.status == "failed" and self.plan.team.scheduler.on_failure == "stop":
            self._stop("cancelled")
            for other in self.members.values():
                if other.scope is not None and other is not state:
                    other.scope.cancel()
        if self.ledger.trip is not None:
            self._stop("budget_exhausted")

    async def _end_unstarted(self, state: MemberState, status: str, reason: str) -> None:
        state.status, state.reason = status, reason
        self.store.submit(state.session_id, (), set_status(status))
        self._log_end(state)
        await self.sink(StatusChanged(state.session_id, status, reason))

    # -- sessions ---------------------------------------------------------------

    def _create_sessions(self) -> None:
        first = next(iter(self.plan.members.values()))
        self.store.create(
            SessionMetadata(
                session_id=self.session_id,
                session_kind="team",
                title=self.plan.name,
                cwd=str(self.workspace.root),
                provider=first.provider,
                model_id=first.model,
                root_session_id=self.session_id,
                agent_name=self.plan.name,
                team_name=self.plan.name,
                status="running",
            )
        )
        budget = self.plan.budget.model_dump(exclude_none=True)
        self.store.append(
            self.session_id,
            [
                (
                    "team_start",
                    {
                        "team": self.plan.name,
                        "goal": self.plan.team.goal,
                        "file": str(self.plan.path),
                        "budget": budget,
                        "members": [
                            {
                                "name": n,
                                "sessionId": s.session_id,
                                "specialist": s.plan.specialist.name,
                                "dependsOn": s.plan.spec.depends_on,
                                "model": s.plan.model,
                            }
                            for n, s in self.members.items()
                        ],
                    },
                )
            ],
        )
        for name, state in self.members.items():
            self.store.create(
                SessionMetadata(
                    session_id=state.session_id,
                    session_kind="member",
                    title=f"{self.plan.name}: {name}",
                    cwd=str(self.workspace.root),
                    provider=state.plan.provider,
                    model_id=state.plan.model,
                    parent_session_id=self.session_id,
                    root_session_id=self.session_id,
                    agent_name=name,
                    specialist=state.plan.specialist.name,
                    team_name=self.plan.name,
                    member_name=name,
                    depth=1,
                )
            )

    def _log(self, kind: str, payload: dict[str, Any]) -> None:
        self.store.submit(self.session_id, [(kind, payload)])

    def _log_end(self, state: MemberState) -> None:
        payload = {
            "childSessionId": state.session_id,
            "member": state.name,
            "status": state.status,
            "reason": state.reason or None,
            "usage": state.usage.to_json(),
            "costUsd": state.usage.to_json()["costUsd"],
            "durationMs": int(state.duration * 1000),
        }
        self.store.submit(self.session_id, [("child_end", payload)], add_children_usage(state.usage))

    async def _finish(self, started: float) -> TeamResult:
        for state in self.members.values():  # a member the cancellation reached before it began
            if state.status == "pending":
                await self._end_unstarted(state, self._stopping or "cancelled", "the team stopped before it started")
        statuses = {s.status for s in self.members.values()}
        if self._stopping == "interrupted":
            status = "interrupted"
        elif self.ledger.trip is not None or "budget_exhausted" in statuses:
            status = "budget_exhausted"
        elif statuses == {"completed"}:
            status = "completed"
        else:
            status = "failed"
        meta = await anyio.to_thread.run_sync(self.store.metadata, self.session_id)
        trip = self.ledger.trip
        payload = {
            "status": status,
            "durationMs": int((time.monotonic() - started) * 1000),
            "usage": meta.subtree_usage.to_json(),
            "tripped": None if trip is None else str(trip),
        }
        self.store.submit(self.session_id, [("team_end", payload)], set_status(status))
        await anyio.to_thread.run_sync(self.store.flush)  # every member's final status, on disk
        return TeamResult(
            self.session_id,
            status,
            list(self.members.values()),
            trip,
            meta.subtree_usage,
            time.monotonic() - started,
            self.ledger,
        )
