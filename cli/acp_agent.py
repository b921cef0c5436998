"""``zero acp``: editors drive Zero over the Agent Client Protocol (JSON-RPC on stdio).

Sessions are Zero's own (``zero sessions`` shows them); which stored ones an editor may take, and the
errors for those it may not, are ``_acp_sessions``'; what it is shown of a session, ``_acp_updates``'. A
session is held by one process at a time (its lease), so two clients never interleave turns in its log.
A session is titled by its first prompt. ``session/list`` without a ``cwd`` lists the workspaces this
connection opened sessions in. A turn that fails answers ``session/prompt`` with a JSON-RPC error. When
the editor closes its end (or on SIGTERM, SIGINT or SIGHUP) every turn stops ``interrupted``, every
session is closed (its tools, the MCP servers and commands it started, its lease) and the process ends
within a second.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, assert_never

import anyio
import anyio.abc
import anyio.lowlevel
from acp import PROTOCOL_VERSION, RequestError, update_agent_message_text
from acp.helpers import update_current_mode
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    CloseSessionResponse,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionForkCapabilities,
    SessionInfo,
    SessionInfoUpdate,
    SessionListCapabilities,
    SessionMode,
    SessionModeState,
    SessionResumeCapabilities,
    SetSessionModeResponse,
    ToolCallUpdate,
)

from zero import __version__
from zero.agent import (
    Approval,
    ApprovalRequest,
    Event,
    MessageAdded,
    PermissionRequested,
    RunFinished,
    RunResult,
    RunStatus,
    incomplete_message,
)
from zero.agent.mcpconfig import HOST_ENDING
from zero.agent.prompts import default_system_prompt
from zero.cli._acp_sessions import Checked, history, listable, recorded, requested
from zero.cli._acp_updates import Shown, options, prompt_text, replayed, shown
from zero.cli.approvals import judge, visible
from zero.cli.common import (
    Streams,
    open_context,
    print_error,
    print_warnings,
    session_store,
    settings_from,
    stop_signals,
)
from zero.cli.options import AcpOptions
from zero.errors import ZeroError
from zero.sessions import AgentSession, FileSessionStore, fork_session
from zero.specialists import AgentContext, open_agent, resume_agent
from zero.tools import PERMISSION_MODES, PermissionMode, within
from zero.tools.describe import describe_call, printable

__all__ = ["ZeroAcpAgent", "serve"]

PAGE = 50
SHUTDOWN_SECONDS = 0.8  # from the editor leaving (or a signal) to every session closed; then the process ends
TURN_FAILED = -32603  # the JSON-RPC code of a turn that failed (an internal error, to the protocol)
_T = TypeVar("_T")
StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


@dataclass(kw_only=True)
class _Live:
    """An ACP session: its agent session, held by a task of its own until it is closed."""

    session: AgentSession
    shown: Shown
    ceiling: PermissionMode  # the flag's (else the user's) narrowed by the workspace's project config
    closed: anyio.Event  # its task has closed it: its tools, servers and lease are let go
    titled: bool  # the editor has its title
    stop: anyio.Event = field(default_factory=anyio.Event)
    turn: anyio.Lock = field(default_factory=anyio.Lock)
    running: bool = False  # a turn is under way (a cancel with none is ignored, not kept for the next)
    closing: bool = False  # no new turn starts
    forwarding: bool = False  # a turn's events are being shown
    allowed: set[str] = field(default_factory=set)
    asked: dict[tuple[str, str], anyio.Event] = field(default_factory=dict)  # requests waiting for their call

    def heard(self, event: Event) -> None:
        """It hears the session's subtree of the run tree (at once, in order): a permission request made while
        the turn is shown waits until everything before it (its call) is on the editor's screen."""
        self.shown.track(event)
        if isinstance(event, PermissionRequested) and self.forwarding:
            self.asked[(event.session_id, event.id)] = anyio.Event()

    def shown_up_to(self, event: Event | None) -> None:
        """Everything up to ``event`` is shown (None: the turn is over): its request may go out."""
        if event is None:
            self.forwarding = False
            for gate in self.asked.values():
                gate.set()
            self.asked.clear()
        elif isinstance(event, PermissionRequested) and (event.session_id, event.id) in self.asked:
            self.asked.pop((event.session_id, event.id)).set()


class ZeroAcpAgent:
    def __init__(self, args: AcpOptions, streams: Streams, tg: anyio.abc.TaskGroup):
        self.args = args
        self.streams = streams
        self.tg = tg
        self.conn: Any = None
        self.sessions: dict[str, _Live] = {}
        self.contexts: dict[str, tuple[AgentContext, PermissionMode]] = {}  # by workspace: and its ceiling
        self.workspaces: list[Path] = []  # those this connection opened sessions in: what a bare list lists
        self.closing = anyio.Event()  # the contexts may close (after every session has)
        self.kept: list[anyio.Event] = []  # set as each context's task ends
        self.checked = Checked()
        self._listing: FileSessionStore | None = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    # -- handshake ---------------------------------------------------------------

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(embedded_context=True),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    resume=SessionResumeCapabilities(),
                    fork=SessionForkCapabilities(),
                    close=SessionCloseCapabilities(),
                ),
            ),
            agent_info=Implementation(name="zero", title="Zero", version=__version__),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    # -- sessions ----------------------------------------------------------------

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        workspace = requested(cwd)
        ctx, mode = await self._context(workspace)

        async def opener() -> AgentSession:  # untitled: its first prompt titles it
            return await open_agent(
                ctx, title="", system_prompt=default_system_prompt(str(workspace)), permission_mode=mode, max_turns=None
            )

        live = await self._hold(opener, workspace, mode, mcp_servers or [], titled=False)
        return NewSessionResponse(session_id=live.session.session_id, modes=_modes(live))

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> LoadSessionResponse:
        live = await self._reopen(cwd, session_id, mcp_servers, replay=True)
        return LoadSessionResponse(modes=_modes(live))

    async def resume_session(
        self, session_id: str, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> ResumeSessionResponse:
        live = await self._reopen(cwd, session_id, mcp_servers, replay=False)
        return ResumeSessionResponse(modes=_modes(live))

    async def fork_session(
        self, session_id: str, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> ForkSessionResponse:
        workspace = requested(cwd)
        ctx, _ = await self._context(workspace)
        meta = await anyio.to_thread.run_sync(recorded, ctx.store, session_id, workspace)
        await anyio.to_thread.run_sync(history, ctx.store, meta)  # a damaged one: the error load gives
        try:
            fork, _ = await anyio.to_thread.run_sync(lambda: fork_session(ctx.store, session_id))
        except ZeroError as e:
            raise RequestError.internal_error({"message": str(e)}) from e
        live = await self._reopen(cwd, fork.session_id, mcp_servers, replay=False)
        return ForkSessionResponse(session_id=live.session.session_id, modes=_modes(live))

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        live = self.sessions.get(session_id)
        if live is not None:
            await self._close(live, "cancelled")
        return CloseSessionResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        workspaces = [requested(cwd)] if cwd is not None else list(self.workspaces)
        if not workspaces:  # no workspace named nor opened: no other workspace's sessions are shown
            return ListSessionsResponse(sessions=[])
        if self._listing is None:
            self._listing = session_store()
        for ctx, _ in self.contexts.values():  # what this connection's sessions wrote is on disk before listing
            await anyio.to_thread.run_sync(ctx.store.flush)
        start = int(cursor) if cursor and cursor.isdigit() else 0
        page, after = await anyio.to_thread.run_sync(listable, self._listing, workspaces, self.checked, start, PAGE)
        sessions = [
            SessionInfo(
                session_id=str(r["sessionId"]),
                cwd=str(r["cwd"]),
                title=str(r.get("title") or "") or None,
                updated_at=str(r.get("updatedAt") or "") or None,
            )
            for r in page
        ]
        return ListSessionsResponse(sessions=sessions, next_cursor=None if after is None else str(after))

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        live = self._live(session_id)
        if mode_id not in PERMISSION_MODES:
            raise RequestError.invalid_params(
                {"message": f"unknown mode {mode_id!r}; one of {', '.join(PERMISSION_MODES)}"}
            )
        mode, narrowed = within(live.ceiling, mode_id, "session/set_mode")
        if narrowed:
            raise RequestError.invalid_params(
                {"message": f"{mode_id} is above the ceiling of this session ({live.ceiling})"}
            )
        live.shown.mode = mode
        live.session.set_permission_mode(mode)
        await self._notify(session_id, update_current_mode(mode))
        return SetSessionModeResponse()

    # -- turns -------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        live = self._live(session_id)
        text = prompt_text(prompt)
        async with live.turn:  # one turn at a time: the log holds whole turns
            if live.closing:
                raise RequestError.resource_not_found(session_id)
            events = live.session.events()
            forwarded = anyio.Event()
            live.forwarding = True
            self.tg.start_soon(self._forward, live, events, forwarded)
            live.running = True
            try:
                result = await live.session.send(text)
            finally:
                live.running = False
            with anyio.move_on_after(10):
                await forwarded.wait()  # every notification of the turn goes out before its answer
        return PromptResponse(stop_reason=await self._stop_reason(session_id, result))

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        live = self.sessions.get(session_id)
        if live is not None and live.running:
            live.session.cancel("cancelled")  # the turn ends cancelled, its children too

    async def _stop_reason(self, session_id: str, result: RunResult) -> StopReason:
        """Why the turn stopped, as ACP says it; a failed turn is the request's error (its message, and the
        session's status in ``data``), a limit's note is the answer's last line."""
        status = result.status
        match status:
            case "completed":
                return "end_turn"
            case "cancelled" | "interrupted":
                return "cancelled"
            case "failed":
                data = {"sessionId": session_id, "status": status, "code": result.error_code}
                raise RequestError(TURN_FAILED, result.error or "the turn failed", data)
            case "max_turns" | "timed_out" | "budget_exhausted" | "output_capped" | "invalid_output":
                note = result.error or incomplete_message(status, result.turns)
                await self._notify(session_id, update_agent_message_text(f"\n\n[{status}] {note}"))
                if status == "invalid_output":  # the turn ended, with an answer its schema refused
                    return "end_turn"
                return "max_turn_requests" if status in ("max_turns", "timed_out") else "max_tokens"
            case _:
                assert_never(status)

    # -- events to notifications ------------------------------------------------------

    async def _forward(self, live: _Live, events: Any, forwarded: anyio.Event) -> None:
        root = live.session.session_id
        try:
            async with events:
                async for event in events:
                    update = live.shown.update(event)
                    if update is not None:
                        await self._notify(root, update)
                    live.shown_up_to(event)
                    if isinstance(event, MessageAdded) and event.session_id == root and not live.titled:
                        await self._title(live)
                    if isinstance(event, RunFinished) and event.session_id == root:
                        break
        finally:
            live.shown_up_to(None)
            forwarded.set()

    async def _title(self, live: _Live) -> None:
        """Tell the editor the title its first prompt gave the session (as stored: redacted)."""
        meta = await anyio.to_thread.run_sync(live.session.store.metadata, live.session.session_id)
        if meta.title:
            live.titled = True
            update = SessionInfoUpdate(session_update="session_info_update", title=meta.title)
            await self._notify(live.session.session_id, update)

    async def _notify(self, session_id: str, update: Any) -> None:
        with contextlib.suppress(ConnectionError):  # the editor is gone: nobody to show it to
            await self.conn.session_update(session_id=session_id, update=update)

    # -- approvals -----------------------------------------------------------------

    async def _approve(self, approval: ApprovalRequest) -> Approval:
        """Every agent's permission request (a child's too) goes to the editor of its session, after the
        call it is about."""
        request = approval.shown
        live = next(
            (v for v in self.sessions.values() if request.session_id in (v.shown.root, *v.shown.task_calls)), None
        )
        if live is None:
            return Approval(granted=False, note="no editor session to ask")
        judged = await anyio.to_thread.run_sync(judge, approval, live.shown.workspace, live.shown.redact)
        rule = judged.rule
        if rule is not None and rule.key in live.allowed:
            return Approval(granted=True, note="allowed for this session", pin=judged.pin)
        gate = live.asked.get((request.session_id, request.id))
        if gate is not None:
            await gate.wait()
        child = live.shown.names.get(request.session_id)
        command = request.arguments.get("command")
        said = {**request.arguments, "command": visible(command)} if isinstance(command, str) else request.arguments
        title = describe_call(request.name, said, width=100) + (f" (asked by {child})" if child else "")
        if judged.preview is not None and judged.preview.via:  # through a link: where it lands
            title += f" (lands in {printable(judged.preview.path)})"
        title += "".join(f" (warning: {why})" for why in judged.once)
        try:
            answer = await self.conn.request_permission(
                session_id=live.shown.root,
                tool_call=ToolCallUpdate(
                    tool_call_id=live.shown.call_of(request.session_id, request.id),
                    title=title,
                    status="pending",
                    raw_input=request.arguments,
                    content=shown(request.name, request.arguments, judged.preview),
                ),
                options=options(rule),
            )
        except ConnectionError:  # the editor is gone: the turn ends with it, not without the call
            live.session.cancel("interrupted")
            await anyio.lowlevel.checkpoint()
            return Approval(granted=False, note="the editor is gone")
        except RequestError as e:
            return Approval(granted=False, note=f"the editor did not answer: {e}")
        outcome = answer.outcome
        if isinstance(outcome, AllowedOutcome) and outcome.option_id == "allow_always" and rule is not None:
            live.allowed.add(rule.key)
            return Approval(granted=True, note="allowed for this session", pin=judged.pin)
        if isinstance(outcome, AllowedOutcome) and outcome.option_id == "allow_once":
            return Approval(granted=True, pin=judged.pin)
        return Approval(granted=False, note="rejected in the editor")

    # -- ending ------------------------------------------------------------------------

    async def shutdown(self) -> None:
        """The editor is gone (or a signal came): every turn stops ``interrupted``; every session is closed
        (its tools, the MCP servers and commands it started, its lease), then the workspaces' contexts; at
        most SHUTDOWN_SECONDS, after which what is left is cancelled."""
        with anyio.move_on_after(SHUTDOWN_SECONDS):
            async with anyio.create_task_group() as tg:
                for live in list(self.sessions.values()):
                    tg.start_soon(self._close, live, "interrupted")
            self.closing.set()
            for kept in self.kept:
                await kept.wait()

    async def _close(self, live: _Live, status: RunStatus) -> None:
        """Stop the session's turn (it ends ``status``) and close it once the turn has ended."""
        self.sessions.pop(live.shown.root, None)
        live.closing = True
        if live.running:
            live.session.cancel(status)
        async with live.turn:  # the turn is over, its last events are recorded
            live.stop.set()
        await live.closed.wait()

    # -- plumbing ------------------------------------------------------------------

    def _live(self, session_id: str) -> _Live:
        live = self.sessions.get(session_id)
        if live is None:
            raise RequestError.resource_not_found(session_id)
        return live

    async def _context(self, workspace: Path) -> tuple[AgentContext, PermissionMode]:
        """The shared context of a workspace's sessions (store, specialists, providers), made once and held
        by a task of its own until the server ends; and the ceiling of its sessions' modes: the flag's (else
        the user's config's), narrowed by the workspace's project config as every front end narrows it."""
        key = str(workspace)
        if key not in self.contexts:
            try:
                settings = settings_from(self.args.run, workspace)
            except ZeroError as e:
                raise RequestError.invalid_params({"message": str(e)}) from None
            print_warnings(settings.warnings, self.streams.stderr)

            @asynccontextmanager
            async def opened() -> AsyncIterator[AgentContext]:
                async with open_context(
                    self.args.run, settings, workspace, self.streams, approver=self._approve
                ) as ctx:
                    yield ctx

            kept = anyio.Event()
            ctx = await self._keep(opened, lambda ctx: self.closing.wait(), kept)
            self.kept.append(kept)
            self.contexts[key] = ctx, settings.permission_mode
        return self.contexts[key]

    async def _hold(
        self,
        opener: Callable[[], Awaitable[AgentSession]],
        workspace: Path,
        mode: PermissionMode,
        mcp: list[Any],
        *,
        titled: bool,
    ) -> _Live:
        """Open a session in a task of its own (its tools live there) and keep it until it is closed."""
        closed = anyio.Event()

        @asynccontextmanager
        async def opened() -> AsyncIterator[_Live]:
            session = await opener()
            if mcp:
                session.add_toolset(_editor_servers(mcp))
            config = session.agent.config
            shown = Shown(root=session.session_id, workspace=config.workspace, mode=mode, redact=config.redactor)
            live = _Live(session=session, shown=shown, ceiling=mode, closed=closed, titled=titled)
            session.listen(live.heard)  # at once, in order: before any child asks
            async with session:
                self.sessions[session.session_id] = live
                yield live

        live = await self._keep(opened, lambda live: live.stop.wait(), closed)
        if not any(w == workspace for w in self.workspaces):
            self.workspaces.append(workspace)
        return live

    async def _keep(
        self,
        opened: Callable[[], AbstractAsyncContextManager[_T]],
        until: Callable[[_T], Awaitable[object]],
        closed: anyio.Event,
    ) -> _T:
        """Enter ``opened()`` in a task of the server's (what it opens lives there, past this request) and
        stay inside until ``until(value)`` returns (then ``closed`` is set); the value, or the error that kept
        it from opening, comes back to the request."""
        ready = anyio.Event()
        holder: list[_T | Exception] = []

        async def keep() -> None:
            try:
                async with opened() as value:
                    holder.append(value)
                    ready.set()
                    await until(value)
            except Exception as e:  # noqa: BLE001 - reported to the request that asked
                holder.append(e)
            finally:
                ready.set()
                closed.set()

        self.tg.start_soon(keep)
        await ready.wait()
        if not holder:
            raise RequestError.internal_error({"message": "the server is shutting down"})
        if isinstance(holder[0], Exception):
            raise RequestError.internal_error({"message": str(holder[0])})
        return holder[0]

    async def _reopen(self, cwd: str, session_id: str, mcp: list[Any] | None, *, replay: bool) -> _Live:
        workspace = requested(cwd)  # before anything: a request without a workspace learns nothing
        ctx, ceiling = await self._context(workspace)
        meta = await anyio.to_thread.run_sync(recorded, ctx.store, session_id, workspace)
        conversation = await anyio.to_thread.run_sync(history, ctx.store, meta)  # never a fresh one if unreadable
        live = self.sessions.get(session_id)  # this connection holds it already: the same session, shown again
        if live is None:
            live = await self._hold(
                lambda: resume_agent(ctx, session_id, permission_mode=ceiling, max_turns=None),
                workspace,
                ceiling,
                mcp or [],
                titled=bool(meta.title),
            )
        if replay:
            for update in replayed(conversation):
                await self._notify(session_id, update)
        return live


def _modes(live: _Live) -> SessionModeState:
    """The session's mode, and those it may switch to: none above its ceiling."""
    allowed = [m for m in PERMISSION_MODES if within(live.ceiling, m, "")[1] is None]
    return SessionModeState(
        current_mode_id=live.shown.mode, available_modes=[SessionMode(id=m, name=m) for m in allowed]
    )


def _editor_servers(servers: list[Any]) -> Any:
    """The MCP servers an editor sends with a session, started for it like configured ones (untrusted)."""
    from zero.agent.mcp import open_servers
    from zero.agent.mcpconfig import McpServer

    configs = []
    for s in servers:
        if getattr(s, "url", None):
            configs.append(McpServer(name=s.name, url=s.url, headers={h.name: h.value for h in s.headers}))
        elif getattr(s, "command", None):
            env = {e.name: e.value for e in s.env}
            configs.append(McpServer(name=s.name, command=s.command, args=tuple(s.args), env=env))

    @asynccontextmanager
    async def toolset() -> Any:
        async with open_servers(configs, lambda problem: None) as tools:
            yield [t for ts in tools.values() for t in ts]

    return toolset()


async def serve(args: AcpOptions, streams: Streams) -> int:
    """Serve one editor on stdio until it closes its end (0) or a signal says stop (130)."""
    from acp.agent.connection import AgentSideConnection

    from zero.cli._acp_wire import Wire, quiet_logs, stdio

    quiet_logs(args.debug)
    try:
        reader, writer = await stdio()
    except ZeroError as e:
        print_error(str(e), streams.stderr)
        return e.exit_code
    ending = anyio.Event()
    HOST_ENDING.set(ending)  # the editor gone, MCP servers get no long grace: the process ends within a second
    with anyio.open_signal_receiver(*stop_signals()) as signals:
        async with anyio.create_task_group() as tg:
            agent = ZeroAcpAgent(args, streams, tg)
            wire = Wire(reader, writer)
            conn = AgentSideConnection(agent, wire, listening=False, use_unstable_protocol=True)  # type: ignore[arg-type]
            signalled: list[int] = []
            async with anyio.create_task_group() as until:

                async def listen() -> None:
                    await conn.listen()
                    until.cancel_scope.cancel()

                async def watch() -> None:
                    async for signum in signals:
                        signalled.append(signum)
                        until.cancel_scope.cancel()

                until.start_soon(listen)
                until.start_soon(watch)
            ending.set()
            with anyio.CancelScope(shield=True):
                await agent.shutdown()  # (a turn under way answers: it ended interrupted)
                with anyio.move_on_after(SHUTDOWN_SECONDS):  # what was asked before the end has its answer
                    await wire.answered()
                await agent.shutdown()  # (a session made meanwhile)
                await conn.close()
            tg.cancel_scope.cancel()
    gc.freeze()  # the process ends now: its objects need no collection (under load ~0.5 s of its exit)
    return 130 if signalled else 0
