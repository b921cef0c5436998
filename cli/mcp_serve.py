"""``zero mcp serve``: Zero as an MCP server on stdio, so other agents can hand work to its
specialists and teams.

Tools: one per specialist (``prompt`` in; the final answer and the session id out, with progress
notifications while it works), ``run_team`` (a team file; the team's summary out), ``control_team``
(stop, message, pause or continue a member of a running team, through its control socket),
``session_tree`` and ``session_show`` (sessions of the served workspace only, by whole id; an id of
another workspace gets the same answer as one that does not exist). ``--permission-mode`` is the
ceiling of every run, and a run has no one to approve anything: what needs approval is denied.
Cancelling a call cancels its run (the session ends ``cancelled``). Only tools are served (and
advertised). When Zero cannot run here (no provider configured, a broken config), the server still starts
and lists its tools, and each run answers with the error ``zero exec`` would print.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Literal

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND

from zero import __version__
from zero.cli.common import (
    Streams,
    open_context,
    print_error,
    session_store,
    settings_from,
    stop_signals,
    team_settings,
    unwrap,
    workspace_from,
)
from zero.cli.config import RunSettings, load_config
from zero.cli.options import McpOptions
from zero.cli.transcript import Transcript
from zero.cli.trust import load_specialists
from zero.errors import OutputError, ZeroError
from zero.orchestrator import TeamRunner, build_plan
from zero.orchestrator.control_socket import request, serve_control
from zero.orchestrator.team import load_team, with_limits
from zero.sessions import SessionStore, default_data_dir, new_session_id, same_folder, session_tree, validate_session_id
from zero.specialists import AgentContext, Specialist, SpecialistOptions, SpecialistRegistry, open_specialist
from zero.tools.describe import describe_call

__all__ = ["serve"]


def serve(args: McpOptions, streams: Streams) -> int:
    """Serve until the client closes stdin (0), or a signal says stop (130: running calls end ``interrupted``)."""
    relay = _Relay()
    signalled: list[int] = []
    try:
        anyio.run(_serve, args, streams, relay, signalled)
    except Exception as e:  # (the SDK writes stdout itself: a full disk or a closed stdout surfaces here)
        error = unwrap(e)
        if isinstance(error, BrokenPipeError):
            return 130 if signalled else 0  # the client closed its end: it is gone, as at the end of stdin
        if isinstance(error, OSError):
            raise OutputError(f"cannot write to standard output: {error.strerror or error}") from e
        raise
    return 130 if signalled else 0


class _Relay:
    """stdin as the SDK reads it: fd 0 becomes a pipe a thread fills from the real stdin, so a signal can end
    the input (``end``: the SDK reads its end, as when the client closes stdin). The SDK reads on a thread no
    cancellation reaches: a signal left it waiting for the client's next line, and the server ran on."""

    def __init__(self) -> None:
        source = os.dup(0)  # (a closed stdin is /dev/null by now: see cli.main)
        read, self._write = os.pipe()
        os.dup2(read, 0)
        os.close(read)
        self._lock = threading.Lock()
        self._ended = False
        self.calls = 0  # requests being answered
        self._idle: anyio.Event | None = None
        threading.Thread(target=self._copy, args=(source,), name="zero-stdin", daemon=True).start()

    def _copy(self, source: int) -> None:
        try:
            while data := os.read(source, 1 << 16):
                with self._lock:
                    if self._ended:
                        return
                    os.write(self._write, data)
        except OSError:
            pass  # the client's end failed, or the SDK's: either way the input is over
        self.end()

    async def counting(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """The server's middleware that counts the requests being answered."""
        self.calls += 1
        try:
            return await call_next(ctx)
        finally:
            self.calls -= 1
            if not self.calls and self._idle is not None:
                self._idle.set()

    async def idle(self) -> None:
        """Until no request is being answered."""
        while self.calls:
            self._idle = anyio.Event()
            await self._idle.wait()

    def end(self) -> None:
        with self._lock:
            if not self._ended:
                self._ended = True
                os.close(self._write)


async def _serve(args: McpOptions, streams: Streams, relay: _Relay, signalled: list[int]) -> None:
    """Serve until the client closes stdin or a signal comes. A setup that cannot run (no provider configured,
    a broken config file, a bad flag) still serves: hosts start servers with a minimal environment and often
    hide stderr, so the tools are listed and each run answers with what is wrong."""
    async with AsyncExitStack() as stack, anyio.create_task_group() as watching:
        ctxs: list[AgentContext] = []
        watching.start_soon(_watch, relay, signalled, ctxs)
        workspace: Path | None = None
        try:
            workspace = workspace_from(args)
            settings = settings_from(args.run, workspace)
            ctx = await stack.enter_async_context(open_context(args.run, settings, workspace, streams))
            ctxs.append(ctx)
        except ZeroError as e:
            print_error(f"{e} (zero mcp serve goes on: each run asked of it answers with this)", streams.stderr)
            served = _Served(args, session_store(), workspace, problem=str(e))
            registry = _registry_anyway(workspace)
            instructions = f"Zero cannot run its specialists and teams until it is configured: {e}"
        else:
            served = _Served(args, ctx.store, workspace, ctx=ctx, settings=settings)
            registry = ctx.registry
            instructions = _INSTRUCTIONS.format(workspace=workspace)
        tools = [_tool(served.specialist(spec), spec.name, spec.description) for spec in registry.specialists.values()]
        tools += [
            _tool(served.run_team, "run_team", title="Run a team"),
            _tool(served.control_team, "control_team", title="Control a running team"),
            _tool(served.session_tree, "session_tree", title="Session tree"),
            _tool(served.session_show, "session_show", title="Session transcript"),
        ]
        server: MCPServer = MCPServer(
            "zero", title="Zero", version=__version__, instructions=instructions, tools=tools, log_level="WARNING"
        )
        server.middleware.extend([_tools_only, relay.counting])
        await server.run_stdio_async()
        watching.cancel_scope.cancel()


SHUTDOWN_SECONDS = 0.8  # from a signal to the end of the input, at most


async def _watch(relay: _Relay, signalled: list[int], ctxs: list[AgentContext]) -> None:
    """At SIGTERM, SIGINT or SIGHUP: every run ends ``interrupted`` now, and the input ends."""
    with anyio.open_signal_receiver(*stop_signals()) as signals:
        async for signum in signals:  # (the first; a second meanwhile is taken here too)
            signalled.append(signum)
            break
        for ctx in ctxs:
            for node in [n for n in ctx.tree.nodes.values() if n.parent is None]:
                ctx.tree.stop("interrupted", under=node)
        with anyio.move_on_after(SHUTDOWN_SECONDS):  # each call under way answers that its run was interrupted
            await relay.idle()
        relay.end()


_INSTRUCTIONS = (
    "Zero's specialists and teams, working in {workspace}. Each specialist tool runs that specialist on a "
    "task and returns its report with its session id; run_team runs a team file."
)


def _tool(fn: Callable[..., Any], name: str, description: str | None = None, title: str | None = None) -> Tool:
    """``fn`` as a tool whose input schema carries no internal names (the SDK titles it after the function's
    argument model, ``runArguments``, and each property after its parameter) and whose answer is text (no
    output schema, which would be titled alike)."""
    described = description or inspect.getdoc(fn)
    tool = Tool.from_function(fn, name=name, title=title, description=described, structured_output=False)
    tool.parameters.pop("title", None)
    for prop in tool.parameters.get("properties", {}).values():
        prop.pop("title", None)
    return tool


async def _tools_only(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Zero serves tools only. The SDK's ``MCPServer`` always registers (empty) prompt and resource handlers,
    which it then advertises: they are taken out of what ``initialize`` and ``server/discover`` answer, and
    their methods are not found, as for any server without them."""
    if ctx.method.startswith(("prompts/", "resources/")):
        raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=ctx.method)
    result = await call_next(ctx)
    if ctx.method in ("initialize", "server/discover") and isinstance(result, dict):
        capabilities = result.get("capabilities")
        if isinstance(capabilities, dict):
            capabilities.pop("prompts", None)
            capabilities.pop("resources", None)
    return result


def _registry_anyway(workspace: Path | None) -> SpecialistRegistry:
    """The specialists to list when Zero cannot run them: the workspace's as far as its config reads."""
    if workspace is not None:
        try:
            return load_specialists(workspace, load_config(workspace), None)
        except ZeroError:
            pass
    return SpecialistRegistry.load(workspace)


class _Served:
    """What the tools work with: a run context, or the problem each run answers with when there is none."""

    def __init__(
        self,
        args: McpOptions,
        store: SessionStore,
        workspace: Path | None,
        *,
        ctx: AgentContext | None = None,
        settings: RunSettings | None = None,
        problem: str = "",
    ):
        self.args, self.store, self.workspace = args, store, workspace
        self.ctx, self.settings, self.problem = ctx, settings, problem

    def _context(self) -> tuple[AgentContext, RunSettings]:
        if self.ctx is None or self.settings is None:
            raise ToolError(self.problem)
        return self.ctx, self.settings

    def _workspace(self) -> Path:
        if self.workspace is None:
            raise ToolError(self.problem)
        return self.workspace

    def specialist(self, spec: Specialist) -> Callable[[str, Context], Awaitable[str]]:
        async def run(prompt: str, context: Context) -> str:
            ctx, settings = self._context()
            return await _run_specialist(ctx, spec, settings, prompt, context)

        run.__doc__ = spec.description
        return run

    async def run_team(
        self,
        team: str,
        context: Context,
        budget_tokens: int | Literal["none"] | None = None,
        budget_cost: float | Literal["none"] | None = None,
        budget_seconds: float | Literal["none"] | None = None,
    ) -> str:
        """Run a team file (a path in the workspace) under its shared budget; the team's summary. A budget
        limit given here overrides the team file's; "none" lifts it."""
        ctx, _ = self._context()
        path = _in_workspace(self._workspace(), team)
        try:
            limits = {"tokens": budget_tokens, "cost_usd": budget_cost, "wall_seconds": budget_seconds}
            return await _team(ctx, self.args, path, limits, context)
        except ZeroError as e:  # a team file with mistakes, a bad limit: what they are, for the caller to fix
            raise ToolError(str(e)) from None

    async def control_team(
        self,
        team_id: str,
        action: Literal["stop", "send", "pause", "continue"],
        member: str | None = None,
        text: str | None = None,
    ) -> str:
        """Steer a team of this workspace while it runs (here through run_team, or by zero swarm run): stop a
        member (it ends cancelled, keeping its output; its dependents follow on_failure), send it a message
        (text) it reads before its next model call, pause it or continue it (no member: every member)."""
        team_id = _own(self.store, team_id, self._workspace())
        if action in ("stop", "send") and not member:
            raise ToolError(f"{action} needs the member's name")
        if action == "send" and not text:
            raise ToolError("send needs the message's text")
        ask = functools.partial(request, self.store, default_data_dir(), team_id, action, member, text)
        try:
            return await anyio.to_thread.run_sync(ask)
        except ZeroError as e:  # not running, no such member, already ended
            raise ToolError(str(e)) from None

    def session_tree(self, session_id: str) -> str:
        """A session of this workspace and its children: status, own and subtree usage (JSON)."""
        return json.dumps(session_tree(self.store, _own(self.store, session_id, self._workspace())).to_json(), indent=2)

    def session_show(self, session_id: str) -> str:
        """A session of this workspace as a transcript: messages, tool calls and results, usage."""
        return "\n".join(Transcript(store=self.store).lines(_own(self.store, session_id, self._workspace())))


async def _run_specialist(
    ctx: AgentContext, spec: Specialist, settings: RunSettings, prompt: str, context: Context
) -> str:
    """Run ``spec`` on ``prompt``: a progress notification per tool call, then its report and session id."""
    session_id = new_session_id(spec.name)
    options = SpecialistOptions(
        node=ctx.tree.add(session_id, title=prompt[:80]), permission_mode=settings.permission_mode
    )
    try:
        session = await open_specialist(ctx, spec, options)
    except ZeroError as e:  # (a run that fails after it starts says so in its answer)
        raise ToolError(str(e)) from None
    steps = 0
    events = session.events()  # subscribed before the run starts: no step is missed
    reported = anyio.Event()

    async def progress() -> None:
        nonlocal steps
        # The session first: a call that is cancelled never answers, and its session is still there to read.
        await context.report_progress(0, None, f"session {session_id}")
        async with events:
            async for event in events:
                if event.kind == "tool_call" and event.session_id == session_id:
                    steps += 1
                    await context.report_progress(steps, None, describe_call(event.name, event.arguments))
                elif event.kind == "run_end" and event.session_id == session_id:
                    break
        reported.set()

    async with anyio.create_task_group() as tg, session:
        tg.start_soon(progress)
        result = await session.send(prompt)
        with anyio.move_on_after(5):  # the progress of what already happened goes out before the answer
            await reported.wait()
        tg.cancel_scope.cancel()
    reason = "" if result.status == "completed" else f"reason: {result.error or result.status}\n"
    return f"session_id: {session_id}\nstatus: {result.status}\n{reason}\n{result.output}"


async def _team(
    ctx: AgentContext, args: McpOptions, path: Path, limits: Mapping[str, float | str | None], context: Any
) -> str:
    team, _, _ = load_team(path)
    settings = team_settings(load_config(ctx.workspace.root), args.run, team.defaults)
    plan = build_plan(
        path,
        ctx.registry,
        provider=settings.provider,
        model=settings.model,
        permission_mode=settings.permission_mode,
        prices=ctx.prices,
        budget=with_limits(team.budget, **limits),
    )
    runner = TeamRunner(plan, ctx)
    done = 0
    events = runner.events()

    async def progress() -> None:
        nonlocal done
        await context.report_progress(0, len(plan.members), f"session {runner.session_id}")
        async with events:
            async for event in events:
                if event.kind == "child_end" and event.session_id == runner.session_id:
                    done += 1
                    await context.report_progress(done, len(plan.members), f"{event.member} {event.status}")

    async with anyio.create_task_group() as tg, serve_control(runner, default_data_dir()):
        tg.start_soon(progress)
        result = await runner.run()  # (its events end when it does: progress then returns)
    return json.dumps(result.to_json(), indent=2)


def _in_workspace(workspace: Path, name: str) -> Path:
    """The file ``name`` (relative to the workspace, or absolute) if it is in the workspace."""
    if not name or "\x00" in name:
        raise ToolError("team: give the path of a team file in the workspace (it is empty or holds a NUL byte)")
    path = (workspace / name).resolve()
    if not path.is_relative_to(workspace.resolve()):
        raise ToolError(f"{name}: a team file must be in the workspace ({workspace})")
    return path


def _own(store: SessionStore, session_id: str, workspace: Path) -> str:
    """A whole id of a session of ``workspace``; any other id gets one answer, whether it exists or not."""
    try:
        validate_session_id(session_id)
        if same_folder(store.metadata(session_id).cwd, workspace):
            return session_id
    except ZeroError:
        pass
    raise ToolError(f"no session {session_id} in this workspace")
