"""``AgentSession``: one agent's conversation as a session on disk, the one object that runs an agent.

``zero exec``, every team member and every ``Task`` child run through it: open it (a new
session, a resume of one, or a fork of one at an event), ``send`` prompts, read its events,
``cancel`` a run, close it. It owns the message history, the recorder (the first consumer of
every event), the tool sets (entered in one exit stack, leaving in reverse order), its call
guards (a budget) and, when it may delegate, its Task machinery.

Its events stream includes its children's: a child relays every event to its parent, so the
root session sees the whole tree.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from types import TracebackType
from typing import Protocol

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream

from zero.agent import (
    AgentConfig,
    AgentRun,
    CallPermit,
    Event,
    EventHub,
    Listener,
    Message,
    ModelRequest,
    RunResult,
    RunStatus,
    StatusChanged,
    ToolCall,
    Usage,
)
from zero.errors import SessionError
from zero.sessions.fork import fork_session
from zero.sessions.models import SessionMetadata, UsageTotals
from zero.sessions.recorder import SessionRecorder
from zero.sessions.replay import messages_from_events
from zero.sessions.rollup import close_open_children
from zero.sessions.store import SessionStore
from zero.tools import PermissionMode, Tool

__all__ = ["AgentSession", "Delegating", "ToolSet"]

_NEVER_RAN = "closed before it ever ran"

ToolSet = AbstractAsyncContextManager[Sequence[Tool]]
"""Tools that live as long as a session: entered when it opens (giving their tools), left when it closes."""


class Delegating(Protocol):
    """The Task machinery a session that may delegate holds (``zero.specialists.Delegator``): its tool set,
    and the permission mode the children it starts next get."""

    permission_mode: PermissionMode

    def opened(self) -> ToolSet: ...

    def mark_stopping(self, status: RunStatus) -> None: ...


class AgentSession:
    """An agent and its session. Use ``async with`` (or ``aclose``) around its runs."""

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        config: AgentConfig,
        history: list[Message],
        *,
        recorded: int,
        toolsets: Sequence[ToolSet] = (),
        relay: Listener | None = None,
        pending: bool = False,
    ):
        self.store = store
        self.session_id = session_id
        self.hub = EventHub()
        self.hub.listen(SessionRecorder(store, session_id))  # the recorder first
        self.hub.listen(self._track)
        if relay is not None:
            self.hub.listen(relay)
        config.guards = (_Recorded(store, session_id), *config.guards)  # before a budget reserves anything
        self.agent = AgentRun(config, session_id, history, self.hub.emit, recorded=recorded, checkpoint=self._written)
        self.delegator: Delegating | None = None  # its Task machinery, when it may delegate
        self._toolsets = list(toolsets)
        self._stack = AsyncExitStack()
        self._scope = anyio.CancelScope()
        self._usage = Usage()  # this run's own usage and what its children spent in it
        self._entered = False
        self._pending = pending  # it has never run: if it closes so, its log says it (never a crash)

    # -- opening ---------------------------------------------------------------------

    @classmethod
    async def create(
        cls,
        store: SessionStore,
        meta: SessionMetadata,
        config: AgentConfig,
        system_prompt: str,
        *,
        toolsets: Sequence[ToolSet] = (),
        relay: Listener | None = None,
        exists: bool = False,
    ) -> AgentSession:
        """A new session: its metadata is on disk before anything runs (``exists``: created already,
        as a team creates its members' sessions up front)."""
        if not exists:
            if config.prices.price(config.model) is None:
                meta = meta.model_copy(update={"usage": UsageTotals.nothing(priced=False)})
            await anyio.to_thread.run_sync(store.create, meta)
        history = [Message("system", system_prompt)]
        return cls(store, meta.session_id, config, history, recorded=0, toolsets=toolsets, relay=relay, pending=True)

    @classmethod
    async def resume(
        cls,
        store: SessionStore,
        session_id: str,
        config: AgentConfig,
        *,
        toolsets: Sequence[ToolSet] = (),
        relay: Listener | None = None,
        system_prompt: str | None = None,
    ) -> AgentSession:
        """An existing session, continued with the history its log records; one that never ran (its log says
        no more than that it was closed before it ran) starts from ``system_prompt``, as a new one would. This
        process holds the session while it runs; another process running it is an error (``SessionError``)."""
        await anyio.to_thread.run_sync(store.acquire, session_id)
        try:
            await anyio.to_thread.run_sync(close_open_children, store, session_id)  # what a dead run left open
            history, recorded = await anyio.to_thread.run_sync(_history, store, session_id, system_prompt)
        except BaseException:
            store.release(session_id)  # not resumed: nobody runs it
            raise
        return cls(
            store, session_id, config, history, recorded=recorded, toolsets=toolsets, relay=relay, pending=not recorded
        )

    @classmethod
    async def fork(
        cls,
        store: SessionStore,
        origin: str,
        config: AgentConfig,
        *,
        at_sequence: int | None = None,
        session_id: str | None = None,
        toolsets: Sequence[ToolSet] = (),
        relay: Listener | None = None,
    ) -> AgentSession:
        """A new session holding ``origin``'s conversation up to event ``at_sequence`` (all of it if None),
        linked to its origin."""
        fork, history = await anyio.to_thread.run_sync(
            functools.partial(fork_session, store, origin, at_sequence=at_sequence, session_id=session_id)
        )
        new_id = fork.session_id
        await anyio.to_thread.run_sync(store.acquire, new_id)
        return cls(store, new_id, config, history, recorded=len(history), toolsets=toolsets, relay=relay, pending=True)

    def add_toolset(self, toolset: ToolSet) -> None:
        """A tool set to enter when the session opens."""
        self._toolsets.append(toolset)

    def delegate_with(self, delegator: Delegating) -> None:
        """Let the session delegate: the Task tools join when it opens; ``delegator`` learns when the run
        is stopping and the permission mode the next children get."""
        self.add_toolset(delegator.opened())
        self.delegator = delegator

    # -- using -----------------------------------------------------------------------

    async def __aenter__(self) -> AgentSession:
        self._entered = True
        try:
            for toolset in self._toolsets:
                for tool in await self._stack.enter_async_context(toolset):
                    self.agent.config.tools.add(tool)
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Leave the tool sets (a delegator stops its background children). A session closed before it ever
        ran records that it is still ``pending``, so a reader never takes it for a run that crashed."""
        if self._entered:
            self._entered = False
            await self._stack.aclose()  # not shielded: a task group must be left inside its own scope
        if self._pending and self.agent.result is None and not self.hub.closed:
            self._pending = False
            self.emit(StatusChanged(session_id=self.session_id, status="pending", reason=_NEVER_RAN))
        self.store.release(self.session_id)  # after everything it wrote
        self.hub.close()

    def events(self) -> MemoryObjectReceiveStream[Event]:
        """Every event of this session and its descendants from now on, until it closes."""
        return self.hub.subscribe()

    def emit(self, event: Event) -> None:
        self.hub.emit(event)

    async def send(self, prompt: str | None, *, call: ToolCall | None = None) -> RunResult:
        """Run the agent on ``prompt`` until it answers, a limit stops it, or it is cancelled; with ``call``,
        make that tool call for the user instead of asking the model (see ``AgentRun.run``)."""
        self._usage = Usage()
        try:
            with self._scope:  # a cancel that came before this run ends it at once
                await self.agent.run(prompt, call=call)
        finally:
            self._scope = anyio.CancelScope()
        assert self.agent.result is not None  # the loop records a result even when cancelled
        return self.agent.result

    def cancel(self, status: RunStatus = "cancelled") -> None:
        """Stop the run in progress (or the next one): it ends ``status``, and so does every child."""
        self.mark_stopping(status)
        self._scope.cancel()

    def set_permission_mode(self, mode: PermissionMode) -> None:
        """Use ``mode`` from the next run on, for this agent and the children it starts (the caller keeps it
        within the run's ceiling)."""
        self.agent.set_permission_mode(mode)
        if self.delegator is not None:
            self.delegator.permission_mode = mode

    def mark_stopping(self, status: RunStatus) -> None:
        self.agent.cancel_status = status
        if self.delegator is not None:
            self.delegator.mark_stopping(status)

    def end_unstarted(self, status: RunStatus) -> RunResult:
        """Give a session that never ran (stopped before it could start) its final status."""
        result = RunResult(status, "", Usage(), 0, 0)
        self.agent.result = result
        self.emit(StatusChanged(session_id=self.session_id, status=status))
        return result

    @property
    def result(self) -> RunResult | None:
        return self.agent.result

    @property
    def run_usage(self) -> Usage:
        """What the last (or current) run spent, its children included."""
        return self._usage

    async def _written(self) -> None:
        """Write-ahead: wait until the session's log holds everything so far (a tool call before its side effect)."""
        await anyio.to_thread.run_sync(self.store.written, self.session_id)

    def _track(self, event: Event) -> None:
        if event.session_id != self.session_id:
            return
        if event.kind == "usage":
            self._usage = self._usage + event.usage
        elif event.kind == "child_end":
            self._usage = self._usage + event.usage
        elif event.kind == "run_end" and event.usage.partly_unpriced:  # unknown, even with no call done
            self._usage = self._usage + Usage(cost_usd=None)


class _Recorded:
    """The call guard that stops a run whose session can no longer be written, before its next model
    call (a tool with a side effect waits for its call to be written anyway: see ``_written``)."""

    def __init__(self, store: SessionStore, session_id: str):
        self.store = store
        self.session_id = session_id

    async def before_call(self, request: ModelRequest, run_usage: Usage) -> CallPermit | None:
        self.store.check(self.session_id)
        return None

    async def before_retry(self, permit: CallPermit | None) -> None:
        self.store.check(self.session_id)

    async def after_call(self, permit: CallPermit | None, usage: Usage | None) -> None:
        return None


def _history(store: SessionStore, session_id: str, system_prompt: str | None) -> tuple[list[Message], int]:
    """The conversation a resumed session goes on with, and how much of it its log holds already."""
    events = store.events(session_id)
    history = messages_from_events(e.event for e in events)
    if history:
        return history, len(history)
    never_ran = all(isinstance(e.event, StatusChanged) and e.event.status == "pending" for e in events)
    if system_prompt is None or not never_ran or len(events) < store.metadata(session_id).event_count:
        raise SessionError(f"session {session_id} has no conversation to resume")
    return [Message("system", system_prompt)], 0  # its first run records the prompt
