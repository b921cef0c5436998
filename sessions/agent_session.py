"""``AgentSession``: one agent's conversation as a session on disk, the one object that runs an agent.

``zero exec``, every team member and every ``Task`` child run through it: open it (a new
session, a resume of one, or a fork of one at an event), ``send`` prompts, read its events,
``cancel`` a run, close it. It owns the message history, the tool sets (entered in one exit
stack, leaving in reverse order), its call guards (a budget) and, when it may delegate, its
Task machinery.

It is a node of the run tree (``zero.sessions.run_tree``): its events go to the tree, which hands
them to its recorder (the first consumer of every event) and then to whoever listens to it or to a
node above it, so ``events()`` has its children's too. Why its run stops, the tree says.
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
from zero.sessions.run_tree import Listener, RunNode, RunTree
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


class AgentSession:
    """An agent and its session, the node ``node`` of its run tree. Use ``async with`` (or ``aclose``) around
    its runs."""

    def __init__(
        self,
        store: SessionStore,
        node: RunNode,
        config: AgentConfig,
        history: list[Message],
        *,
        recorded: int,
        toolsets: Sequence[ToolSet] = (),
        pending: bool = False,
    ):
        self.store = store
        self.session_id = node.session_id
        self.node = node
        self.tree = tree = node.tree
        tree.attach(node, SessionRecorder(store, self.session_id))  # the recorder first
        tree.attach(node, self._track)
        config.guards = (_Recorded(store, self.session_id), *config.guards)  # before a budget reserves anything
        self.agent = AgentRun(
            config,
            self.session_id,
            history,
            tree.emit,
            recorded=recorded,
            checkpoint=self._written,
            stop_reason=lambda: tree.why(node),
        )
        self.delegator: Delegating | None = None  # its Task machinery, when it may delegate
        self._toolsets = list(toolsets)
        self._stack = AsyncExitStack()
        self._usage = Usage()  # this run's own usage and what its children spent in it
        self._entered = False
        self._pending = pending  # it has never run: if it closes so, its log says it (never a crash)

    # -- opening ---------------------------------------------------------------------

    @classmethod
    async def create(
        cls,
        store: SessionStore,
        node: RunNode,
        meta: SessionMetadata,
        config: AgentConfig,
        system_prompt: str,
        *,
        toolsets: Sequence[ToolSet] = (),
        exists: bool = False,
    ) -> AgentSession:
        """A new session at ``node``: its metadata is on disk before anything runs (``exists``: created already,
        as a team creates its members' sessions up front)."""
        if not exists:
            if config.prices.price(config.model) is None:
                meta = meta.model_copy(update={"usage": UsageTotals.nothing(priced=False)})
            await anyio.to_thread.run_sync(store.create, meta)
        history = [Message(role="system", content=system_prompt)]
        return cls(store, node, config, history, recorded=0, toolsets=toolsets, pending=True)

    @classmethod
    async def resume(
        cls,
        store: SessionStore,
        node: RunNode,
        config: AgentConfig,
        *,
        toolsets: Sequence[ToolSet] = (),
        system_prompt: str | None = None,
    ) -> AgentSession:
        """The session at ``node``, continued with the history its log records; one whose log holds no message (it
        never ran, or its run ended before its first) starts from ``system_prompt``, as a new one would. This
        process holds the session while it runs; another process running it is an error (``SessionError``)."""
        session_id = node.session_id
        await anyio.to_thread.run_sync(store.acquire, session_id)
        try:
            await anyio.to_thread.run_sync(close_open_children, store, session_id)  # what a dead run left open
            history, recorded = await anyio.to_thread.run_sync(_history, store, session_id, system_prompt)
        except BaseException:
            store.release(session_id)  # not resumed: nobody runs it
            node.tree.close(node)
            raise
        return cls(store, node, config, history, recorded=recorded, toolsets=toolsets, pending=not recorded)

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
        tree: RunTree | None = None,
    ) -> AgentSession:
        """A new session holding ``origin``'s conversation up to event ``at_sequence`` (all of it if None),
        linked to its origin; a node of ``tree`` (by default a run of its own)."""
        fork, history = await anyio.to_thread.run_sync(
            functools.partial(fork_session, store, origin, at_sequence=at_sequence, session_id=session_id)
        )
        await anyio.to_thread.run_sync(store.acquire, fork.session_id)
        node = (tree or RunTree()).recorded(fork)
        return cls(store, node, config, history, recorded=len(history), toolsets=toolsets, pending=True)

    def add_toolset(self, toolset: ToolSet) -> None:
        """A tool set to enter when the session opens."""
        self._toolsets.append(toolset)

    def delegate_with(self, delegator: Delegating) -> None:
        """Let the session delegate: the Task tools join when it opens; ``delegator`` learns the permission
        mode the next children get."""
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
        if self._pending and self.agent.result is None and not self.node.closed:
            self._pending = False
            self.emit(StatusChanged(session_id=self.session_id, status="pending", reason=_NEVER_RAN))
        self.store.release(self.session_id)  # after everything it wrote
        self.tree.close(self.node)

    def events(self) -> MemoryObjectReceiveStream[Event]:
        """Every event of this session and its descendants from now on, until it closes."""
        return self.tree.subscribe(self.node)

    def listen(self, listener: Listener) -> None:
        """``listener`` hears every event of this session and its descendants at once, as it is emitted."""
        self.tree.listen(listener, under=self.node)

    def emit(self, event: Event) -> None:
        self.tree.emit(event)

    async def send(self, prompt: str | None, *, call: ToolCall | None = None) -> RunResult:
        """Run the agent on ``prompt`` until it answers, a limit stops it, or it is cancelled; with ``call``,
        make that tool call for the user instead of asking the model (see ``AgentRun.run``)."""
        self._usage = Usage()
        try:
            with self.node.scope:  # a cancel that came before this run ends it at once
                await self.agent.run(prompt, call=call)
        finally:
            self.node.next_run()
        assert self.agent.result is not None  # the loop records a result even when cancelled
        return self.agent.result

    def cancel(self, status: RunStatus = "cancelled") -> None:
        """Stop the run in progress (or the next one): it ends ``status``, and so does every child."""
        self.tree.stop(status, under=self.node)

    def set_permission_mode(self, mode: PermissionMode) -> None:
        """Use ``mode`` from the next run on, for this agent and the children it starts (the caller keeps it
        within the run's ceiling)."""
        self.agent.set_permission_mode(mode)
        if self.delegator is not None:
            self.delegator.permission_mode = mode

    def end_unstarted(self, status: RunStatus | None = None) -> RunResult:
        """Give a session that never ran (stopped before it could start) its final status (None: the one the
        run tree says it stops with)."""
        result = RunResult(status=status or self.tree.why(self.node), output="", usage=Usage(), turns=0, duration_ms=0)
        self.agent.result = result
        self.emit(StatusChanged(session_id=self.session_id, status=result.status))
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
        await self.store.awritten(self.session_id)

    def _track(self, event: Event) -> None:
        """Its own events (the tree hands it no other): what this run spent, its children's included."""
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
    # No conversation was ever recorded (it never ran, or its node died before its first message): it starts
    # over from its system prompt, its first run recording it (a log that lost events is an error of events()).
    if system_prompt is None:
        raise SessionError(f"session {session_id} has no conversation to resume")
    return [Message(role="system", content=system_prompt)], 0
