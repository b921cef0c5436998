"""Where team members run: the seam between the scheduler and the agents.

The scheduler asks an executor to start a member, may read its events, stop it, and waits
for its outcome; it never touches the agent itself. ``InProcessExecutor`` runs each member as
an ``AgentSession`` on this event loop; an executor running members in other processes or on
other machines would keep the same four verbs, and the scheduler and the ledger would not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from anyio.streams.memory import MemoryObjectReceiveStream

from zero.agent import Event, EventHub, Listener, RunResult, RunStatus, Usage
from zero.orchestrator.ledger import BudgetGuard, Ledger
from zero.orchestrator.plan import MemberPlan
from zero.sessions import AgentSession
from zero.specialists import AgentContext, Placement, open_specialist
from zero.tools import Tool

__all__ = ["InProcessExecutor", "MemberExecutor", "MemberOutcome", "MemberRun", "MemberTask"]


@dataclass(frozen=True, kw_only=True)
class MemberTask:
    """Everything a member needs to run: who it is, where its session is, what to do, under which ledger."""

    plan: MemberPlan
    session_id: str
    team_session_id: str
    team_name: str
    prompt: str
    role: str
    ledger: Ledger
    tools: Sequence[Tool] = ()  # the team's own tools for it (messaging)
    resume: bool = False  # continue the member's recorded conversation (a resumed team run)


@dataclass(frozen=True)
class MemberOutcome:
    """How a member's run ended; ``usage`` is what it and its Task children spent in it."""

    result: RunResult
    usage: Usage


class MemberRun(Protocol):
    session_id: str

    def events(self) -> MemoryObjectReceiveStream[Event]:
        """The member's events (and its children's) from now on."""
        ...

    def mark_stopping(self, status: RunStatus) -> None:
        """What the member, and what it started, end as when they stop (a spent budget, Ctrl-C)."""
        ...

    def stop(self, status: RunStatus) -> None:
        """Stop it now: it ends ``status``."""
        ...

    async def outcome(self) -> MemberOutcome:
        """Wait for the member to end (the in-process executor runs it meanwhile)."""
        ...

    def current(self) -> MemberOutcome | None:
        """How it ended, once it has (a stop included); None if it never started."""
        ...


class MemberExecutor(Protocol):
    def start(self, task: MemberTask) -> MemberRun: ...


class InProcessExecutor:
    """Members as agent sessions on this event loop, relaying their events to ``relay``."""

    def __init__(self, ctx: AgentContext, relay: Listener):
        self.ctx = ctx
        self.relay = relay

    def start(self, task: MemberTask) -> _InProcessRun:
        return _InProcessRun(self, task)


class _InProcessRun:
    def __init__(self, executor: InProcessExecutor, task: MemberTask):
        self.executor = executor
        self.task = task
        self.session_id = task.session_id
        self.hub = EventHub()
        self.hub.listen(executor.relay)
        self.session: AgentSession | None = None
        self._stopping: RunStatus | None = None
        self._stopped = False

    def events(self) -> MemoryObjectReceiveStream[Event]:
        return self.hub.subscribe()

    def mark_stopping(self, status: RunStatus) -> None:
        self._stopping = status
        if self.session is not None:
            self.session.mark_stopping(status)

    def stop(self, status: RunStatus) -> None:
        self._stopping, self._stopped = status, True
        if self.session is not None:
            self.session.cancel(status)

    async def outcome(self) -> MemberOutcome:
        task, ctx = self.task, self.executor.ctx
        plan = task.plan
        member_ctx = replace(
            ctx,
            guards=(BudgetGuard(task.ledger, ctx.prices),),
            max_depth=ctx.max_depth + 1,  # a member sits at depth 1; its Task children below it
        )
        placement = Placement(
            kind="member",
            parent_session_id=task.team_session_id,
            root_session_id=task.team_session_id,
            depth=1,
            title=f"{task.team_name}: {plan.name}",
            team_name=task.team_name,
            member_name=plan.name,
        )
        self.session = session = await open_specialist(
            member_ctx,
            plan.specialist,
            placement,
            session_id=task.session_id,
            created=not task.resume,
            resume=task.resume,
            permission_mode=plan.permission_mode,
            provider=plan.provider,
            model=plan.model,
            max_turns=plan.max_turns,
            max_output_tokens=plan.max_output_tokens,
            extra_tools=task.tools,
            role=task.role,
            relay=self.hub.emit,
            stopping=self._stopping,
        )
        if self._stopped:
            session.cancel(self._stopping or "cancelled")
        async with session:
            result = await session.send(task.prompt)
        return MemberOutcome(result, session.run_usage)

    def current(self) -> MemberOutcome | None:
        if self.session is None or self.session.result is None:
            return None
        return MemberOutcome(self.session.result, self.session.run_usage)
