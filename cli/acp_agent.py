"""``zero acp``: editors drive Zero over the Agent Client Protocol (JSON-RPC on stdio).

Sessions are Zero's own (``zero sessions`` shows them). Every request that names a workspace must
carry an absolute ``cwd``, checked before anything else (so a request naming none learns nothing
about which sessions exist); a session is used only in the workspace it recorded, compared by
file-system identity (the one check of ``zero.sessions.session_workspace``); a session whose stored
workspace is missing, relative or gone is neither listed nor resumed; a history that cannot be read
fails the request rather than starting over under the old id. A session is held by one process at a
time (its lease), so two clients never interleave turns in its log.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
import anyio.abc
from acp import (
    PROTOCOL_VERSION,
    RequestError,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message_text,
)
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
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionForkCapabilities,
    SessionInfo,
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
    AssistantText,
    ChildFinished,
    ChildStarted,
    ErrorRaised,
    Event,
    Reasoning,
    RunFinished,
    ToolCallStarted,
    ToolFinished,
    format_cost,
)
from zero.agent.prompts import default_system_prompt
from zero.cli.approvals import HIDDEN_WARNING, SessionRule, edit_of, session_rule
from zero.cli.common import Streams, open_context, print_warnings, session_store, settings_from_args
from zero.errors import ZeroError
from zero.sessions import fork_session, messages_from_events, same_folder, session_workspace, validate_session_id
from zero.specialists import AgentContext, AgentSession, open_agent, resume_agent
from zero.tools import PERMISSION_MODES, PermissionMode, within
from zero.tools.describe import describe_call

__all__ = ["ZeroAcpAgent"]

PAGE = 50
_T = TypeVar("_T")
_KINDS = {
    "read_file": "read",
    "list_directory": "read",
    "glob": "search",
    "grep": "search",
    "write_file": "edit",
    "edit_file": "edit",
    "bash": "execute",
    "Task": "think",
    "TaskOutput": "think",
    "TaskStop": "think",
    "update_plan": "think",
}
_STOP: dict[str, Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]] = {
    "completed": "end_turn",
    "cancelled": "cancelled",
    "interrupted": "cancelled",
    "max_turns": "max_turn_requests",
    "output_capped": "max_tokens",
}


def _options(rule: SessionRule | None) -> list[PermissionOption]:
    """The answers an editor offers: allow once, allow for the session (saying what that covers), reject."""
    always = (
        [PermissionOption(option_id="allow_always", name=f"Allow {rule.label} for this session", kind="allow_always")]
        if rule is not None
        else []
    )
    return [
        PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
        *always,
        PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
    ]


@dataclass
class _Live:
    """An ACP session: its agent session, held by a task of its own until it is closed."""

    session: AgentSession
    workspace: Path
    mode: PermissionMode
    ceiling: PermissionMode  # the flag's (else the user's) narrowed by the workspace's project config
    stop: anyio.Event = field(default_factory=anyio.Event)
    turn: anyio.Lock = field(default_factory=anyio.Lock)
    running: bool = False  # a turn is under way (a cancel with none is ignored, not kept for the next)
    allowed: set[str] = field(default_factory=set)
    task_calls: dict[str, str] = field(default_factory=dict)  # child session id -> the Task call showing it
    names: dict[str, str] = field(default_factory=dict)  # child session id -> its specialist


class ZeroAcpAgent:
    def __init__(self, args: argparse.Namespace, streams: Streams, tg: anyio.abc.TaskGroup):
        self.args = args
        self.streams = streams
        self.tg = tg
        self.conn: Any = None
        self.sessions: dict[str, _Live] = {}
        self.contexts: dict[str, tuple[AgentContext, PermissionMode]] = {}  # by workspace: and its ceiling

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
        workspace = _requested(cwd)
        ctx, mode = await self._context(workspace)

        async def opener() -> AgentSession:
            return await open_agent(
                ctx,
                title="ACP session",
                system_prompt=default_system_prompt(str(workspace)),
                permission_mode=mode,
                max_turns=None,
            )

        live = await self._hold(opener, workspace, mode, mcp_servers or [])
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
        workspace = _requested(cwd)
        ctx, _ = await self._context(workspace)
        self._recorded(ctx, session_id, workspace)
        try:
            meta, _ = await anyio.to_thread.run_sync(lambda: fork_session(ctx.store, session_id))
        except ZeroError as e:
            raise RequestError.internal_error({"message": str(e)}) from e
        live = await self._reopen(cwd, meta.session_id, mcp_servers, replay=False)
        return ForkSessionResponse(session_id=live.session.session_id, modes=_modes(live))

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        live = self.sessions.pop(session_id, None)
        if live is not None:
            live.session.cancel("cancelled")
            live.stop.set()
        return CloseSessionResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        wanted = _requested(cwd) if cwd is not None else None
        store = (await self._context(wanted))[0].store if wanted is not None else session_store()
        usable = await anyio.to_thread.run_sync(_listable, store, wanted)
        start = int(cursor) if cursor and cursor.isdigit() else 0
        page = usable[start : start + PAGE]
        sessions = [
            SessionInfo(
                session_id=str(r["sessionId"]),
                cwd=str(r["cwd"]),
                title=str(r.get("title") or "") or None,
                updated_at=str(r.get("updatedAt") or "") or None,
            )
            for r in page
        ]
        more = start + PAGE < len(usable)
        return ListSessionsResponse(sessions=sessions, next_cursor=str(start + PAGE) if more else None)

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
        live.mode = mode
        live.session.set_permission_mode(mode)
        await self.conn.session_update(session_id=session_id, update=update_current_mode(mode))
        return SetSessionModeResponse()

    # -- turns -------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        live = self._live(session_id)
        text = _prompt_text(prompt)
        async with live.turn:  # one turn at a time: the log holds whole turns
            events = live.session.events()
            forwarded = anyio.Event()
            self.tg.start_soon(self._forward, live, events, forwarded)
            live.running = True
            try:
                result = await live.session.send(text)
            finally:
                live.running = False
            with anyio.move_on_after(10):
                await forwarded.wait()  # every notification of the turn goes out before its answer
        if result.status not in _STOP and result.error:
            await self.conn.session_update(
                session_id=session_id, update=update_agent_message_text(f"\n[{result.status}] {result.error}")
            )
        return PromptResponse(stop_reason=_STOP.get(result.status, "end_turn"))

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        live = self.sessions.get(session_id)
        if live is not None and live.running:
            live.session.cancel("cancelled")  # the turn ends cancelled, its children too

    # -- events to notifications ------------------------------------------------------

    async def _forward(self, live: _Live, events: Any, forwarded: anyio.Event) -> None:
        root = live.session.session_id
        try:
            async with events:
                async for event in events:
                    update = self._update(live, event)
                    if update is not None:
                        await self.conn.session_update(session_id=root, update=update)
                    if isinstance(event, RunFinished) and event.session_id == root:
                        break
        finally:
            forwarded.set()

    def _update(self, live: _Live, event: Event) -> Any:  # noqa: C901 - one branch a kind
        root = live.session.session_id
        if event.session_id != root:  # a child's: shown in the content of the Task call that started it
            call = live.task_calls.get(event.session_id)
            if call is None:
                return None
            name = live.names.get(event.session_id, "specialist")
            if isinstance(event, ToolCallStarted):
                line = f"{name}: {describe_call(event.name, event.arguments, width=100)}"
                return update_tool_call(call, status="in_progress", content=[tool_content(text_block(line))])
            return None
        match event:
            case AssistantText():
                return update_agent_message_text(event.delta)
            case Reasoning():
                return update_agent_thought_text(event.delta)
            case ToolCallStarted():
                kind = _KINDS.get(event.name, "fetch" if event.name.startswith("mcp__") else "other")
                content = _diff(event.name, event.arguments, live.workspace)
                return start_tool_call(
                    event.id,
                    describe_call(event.name, event.arguments, width=100),
                    kind=kind,  # type: ignore[arg-type]
                    status="in_progress",
                    content=content,
                    raw_input=event.arguments,
                )
            case ToolFinished():
                if event.name == "update_plan":
                    return None
                return update_tool_call(
                    event.tool_call_id,
                    status="completed" if event.status == "ok" else "failed",
                    content=[tool_content(text_block(event.output))],
                )
            case ChildStarted():
                label = f"{event.name} started" + (f": {event.description}" if event.description else "")
                return update_tool_call(
                    event.tool_call_id, status="in_progress", content=[tool_content(text_block(label))]
                )
            case ChildFinished():
                call = live.task_calls.get(event.child_session_id, "")
                usage = event.usage
                line = (
                    f"{event.specialist} {event.status} · {event.duration_ms / 1000:.1f} s · {usage.total_tokens:,} "
                    f"tokens · {format_cost(usage)} · session {event.child_session_id}"
                )
                return update_tool_call(call, content=[tool_content(text_block(line))]) if call else None
            case ErrorRaised():
                return update_agent_message_text(f"\n[{event.code}] {event.message}")
        return None

    # -- approvals -----------------------------------------------------------------

    async def _approve(self, approval: ApprovalRequest) -> Approval:
        """Every agent's permission request (a child's too) goes to the editor of its session."""
        request = approval.shown
        live = next(
            (v for v in self.sessions.values() if request.session_id in (v.session.session_id, *v.task_calls)), None
        )
        if live is None:
            return Approval(False, "no editor session to ask")
        rule = session_rule(approval, live.workspace)
        if rule is not None and rule.key in live.allowed:
            return Approval(True, "allowed for this session")
        child = live.names.get(request.session_id)
        title = describe_call(request.name, request.arguments, width=100) + (f" (asked by {child})" if child else "")
        if approval.hidden:
            title += f" (warning: {HIDDEN_WARNING})"
        call = live.task_calls.get(request.session_id, request.id)
        answer = await self.conn.request_permission(
            session_id=live.session.session_id,
            tool_call=ToolCallUpdate(
                tool_call_id=call,
                title=title,
                status="pending",
                raw_input=request.arguments,
                content=_diff(request.name, request.arguments, live.workspace),
            ),
            options=_options(rule),
        )
        outcome = answer.outcome
        if isinstance(outcome, AllowedOutcome) and outcome.option_id == "allow_always" and rule is not None:
            live.allowed.add(rule.key)
            return Approval(True, "allowed for this session")
        if isinstance(outcome, AllowedOutcome) and outcome.option_id == "allow_once":
            return Approval(True)
        return Approval(False, "rejected in the editor")

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
                settings = settings_from_args(self.args, workspace)
            except ZeroError as e:
                raise RequestError.invalid_params({"message": str(e)}) from None
            print_warnings(settings.warnings, self.streams.stderr)

            @asynccontextmanager
            async def opened() -> AsyncIterator[AgentContext]:
                async with open_context(self.args, settings, workspace, self.streams) as ctx:
                    yield replace(ctx, approver=self._approve)

            ctx = await self._keep(opened, lambda ctx: anyio.sleep_forever())
            self.contexts[key] = ctx, settings.permission_mode
        return self.contexts[key]

    async def _hold(
        self, opener: Callable[[], Awaitable[AgentSession]], workspace: Path, mode: PermissionMode, mcp: list[Any]
    ) -> _Live:
        """Open a session in a task of its own (its tools live there) and keep it until it is closed."""

        @asynccontextmanager
        async def opened() -> AsyncIterator[_Live]:
            session = await opener()
            if mcp:
                session.add_toolset(_editor_servers(mcp))
            live = _Live(session, workspace, mode, mode)
            session.hub.listen(lambda event: _track(live, event))  # at once, in order: before any child asks
            async with session:
                self.sessions[session.session_id] = live
                yield live

        return await self._keep(opened, lambda live: live.stop.wait())

    async def _keep(
        self, opened: Callable[[], AbstractAsyncContextManager[_T]], until: Callable[[_T], Awaitable[object]]
    ) -> _T:
        """Enter ``opened()`` in a task of the server's (what it opens lives there, past this request) and
        stay inside until ``until(value)`` returns; the value, or the error that kept it from opening, comes
        back to the request."""
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
                ready.set()

        self.tg.start_soon(keep)
        await ready.wait()
        if isinstance(holder[0], Exception):
            raise RequestError.internal_error({"message": str(holder[0])})
        return holder[0]

    def _recorded(self, ctx: AgentContext, session_id: str, workspace: Path) -> None:
        """The session exists, is a root one, and belongs to ``workspace``; else an error that says so."""
        try:
            validate_session_id(session_id)
            meta = ctx.store.metadata(session_id)
        except ZeroError:
            raise RequestError.resource_not_found(session_id) from None
        if meta.parent_session_id or meta.session_kind in ("team", "member", "child"):
            raise RequestError.invalid_params({"message": f"{session_id} is not a top-level session"})
        try:
            session_workspace(meta, workspace)
        except ZeroError as e:
            raise RequestError.invalid_params({"message": str(e)}) from None

    async def _reopen(self, cwd: str, session_id: str, mcp: list[Any] | None, *, replay: bool) -> _Live:
        workspace = _requested(cwd)  # before anything: a request without a workspace learns nothing
        ctx, ceiling = await self._context(workspace)
        self._recorded(ctx, session_id, workspace)
        try:
            history = messages_from_events(e.event for e in ctx.store.events(session_id))
        except (ZeroError, ValueError) as e:  # unreadable: never a fresh conversation under the old id
            raise RequestError.internal_error({"message": f"session {session_id} cannot be read: {e}"}) from None
        held = self.sessions.get(session_id)
        if held is not None:  # this connection holds it already: the same session, shown again if asked
            if replay:
                await self._replay(session_id, history)
            return held
        live = await self._hold(
            lambda: resume_agent(ctx, session_id, permission_mode=ceiling, max_turns=None),
            workspace,
            ceiling,
            mcp or [],
        )
        if replay:
            await self._replay(session_id, history)
        return live

    async def _replay(self, session_id: str, history: list[Any]) -> None:
        """The conversation as the client shows it: messages, and each tool call with its result."""
        results = {m.tool_call_id: m for m in history if m.role == "tool"}
        for message in history:
            if message.role == "user":
                await self.conn.session_update(session_id=session_id, update=update_user_message_text(message.content))
            elif message.role == "assistant":
                if message.content:
                    await self.conn.session_update(
                        session_id=session_id, update=update_agent_message_text(message.content)
                    )
                for call in message.tool_calls:
                    result = results.get(call.id)
                    await self.conn.session_update(
                        session_id=session_id,
                        update=start_tool_call(
                            call.id,
                            describe_call(call.name, call.arguments, width=100),
                            kind=_KINDS.get(call.name, "other"),  # type: ignore[arg-type]
                            status="failed" if result is None or result.is_error else "completed",
                            raw_input=call.arguments,
                            content=[tool_content(text_block(result.content))] if result is not None else None,
                        ),
                    )


def _modes(live: _Live) -> SessionModeState:
    """The session's mode, and those it may switch to: none above its ceiling."""
    allowed = [m for m in PERMISSION_MODES if within(live.ceiling, m, "")[1] is None]
    return SessionModeState(current_mode_id=live.mode, available_modes=[SessionMode(id=m, name=m) for m in allowed])


def _track(live: _Live, event: Event) -> None:
    """Which Task call shows each child (a grandchild shows in its ancestor's), and its specialist."""
    if isinstance(event, ChildStarted):
        root = event.session_id == live.session.session_id
        live.task_calls[event.child_session_id] = (
            event.tool_call_id if root else live.task_calls.get(event.session_id, "")
        )
        live.names[event.child_session_id] = event.name


def _requested(cwd: str | None) -> Path:
    """The workspace a request names: an absolute path to a folder, or invalid params."""
    if cwd is None or not cwd.strip():
        raise RequestError.invalid_params({"message": "cwd is required: an absolute path to the workspace"})
    if not os.path.isabs(cwd):
        raise RequestError.invalid_params({"message": f"cwd must be an absolute path, not {cwd!r}"})
    if not os.path.isdir(cwd):
        raise RequestError.invalid_params({"message": f"cwd {cwd} is not a folder"})
    return Path(os.path.realpath(cwd))


def _prompt_text(blocks: list[Any]) -> str:
    """The prompt as one message: text, links to resources, and embedded resources' text."""
    parts = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            parts.append(f"[resource: {block.name} {block.uri}]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(
                f'<file path="{resource.uri}">\n{text}\n</file>'
                if text is not None
                else f"[binary resource {resource.uri}]"
            )
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} attached: {getattr(block, 'mime_type', '')}, not shown to this model]")
    return "\n\n".join(parts)


def _diff(name: str, arguments: dict[str, Any], workspace: Path) -> list[Any] | None:
    """An edit as the editor shows it: a diff of the file."""
    edit = edit_of(name, arguments, workspace)
    return None if edit is None else [tool_diff_content(str(edit.path), edit.after, edit.before)]


def _listable(store: Any, wanted: Path | None) -> list[dict[str, Any]]:
    """The sessions a client may resume: top-level ones whose stored workspace is an absolute path to a
    folder that exists (and is ``wanted``, when given); anything else would fail when taken."""
    usable = []
    for row in store.rows():
        if row.get("parentSessionId") or row.get("sessionKind") in ("team", "member", "child"):
            continue  # children and members appear in their parent's replay
        stored = str(row.get("cwd") or "")
        if not os.path.isabs(stored) or not os.path.isdir(stored):
            continue  # not resumable: not on the menu
        if wanted is not None and not same_folder(stored, wanted):
            continue
        usable.append(row)
    return usable


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


async def serve(args: argparse.Namespace, streams: Streams) -> None:
    from acp import stdio_streams
    from acp.agent.connection import AgentSideConnection

    from zero.cli._acp_wire import LIMIT, Wire, quiet_logs

    quiet_logs(bool(getattr(args, "debug", False)))
    reader, writer = await stdio_streams(limit=LIMIT)
    async with anyio.create_task_group() as tg:
        agent = ZeroAcpAgent(args, streams, tg)
        conn = AgentSideConnection(agent, Wire(reader, writer), listening=False, use_unstable_protocol=True)  # type: ignore[arg-type]
        try:
            await conn.listen()
        finally:
            with anyio.CancelScope(shield=True):
                await conn.close()
        tg.cancel_scope.cancel()
