"""``zero mcp serve``: Zero as an MCP server on stdio, so other agents can hand work to its
specialists and teams.

Tools: one per specialist (``prompt`` in; the final answer and the session id out, with progress
notifications while it works), ``run_team`` (a team file; the team's summary out),
``session_tree`` and ``session_show`` (sessions of the served workspace only, by whole id; an id of
another workspace gets the same answer as one that does not exist). ``--permission-mode`` is the
ceiling of every run, and a run has no one to approve anything: what needs approval is denied.
Cancelling a call cancels its run (the session ends ``cancelled``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from zero.cli.common import Streams, open_context, settings_from_args, workspace_from_args
from zero.cli.config import RunSettings, load_config, resolve_settings
from zero.cli.transcript import Transcript
from zero.errors import ZeroError
from zero.orchestrator import TeamRunner, build_plan
from zero.orchestrator.team import load_team, with_limits
from zero.sessions import SessionStore, new_session_id, same_folder, session_tree, validate_session_id
from zero.specialists import AgentContext, Placement, Specialist, open_specialist
from zero.tools.describe import describe_call

__all__ = ["serve"]


def serve(args: argparse.Namespace, streams: Streams) -> int:
    workspace = workspace_from_args(args)
    settings = settings_from_args(args, workspace)
    anyio.run(_serve, args, streams, workspace, settings)
    return 0


async def _serve(args: argparse.Namespace, streams: Streams, workspace: Path, settings: RunSettings) -> None:
    async with open_context(args, settings, workspace, streams) as ctx:
        server: MCPServer = MCPServer("zero", instructions=_INSTRUCTIONS.format(workspace=workspace))
        for spec in ctx.registry.specialists.values():
            server.add_tool(_specialist_tool(ctx, spec, settings), name=spec.name, description=spec.description)

        async def run_team(
            team: str,
            context: Context,
            budget_tokens: int | Literal["none"] | None = None,
            budget_cost: float | Literal["none"] | None = None,
            budget_seconds: float | Literal["none"] | None = None,
        ) -> str:
            """Run a team file (a path in the workspace) under its shared budget; the team's summary. A budget
            limit given here overrides the team file's; "none" lifts it."""
            path = _in_workspace(workspace, team)
            try:
                limits = {"tokens": budget_tokens, "cost_usd": budget_cost, "wall_seconds": budget_seconds}
                return await _team(ctx, args, path, limits, context)
            except ZeroError as e:  # a team file with mistakes, a bad limit: what they are, for the caller to fix
                raise ToolError(str(e)) from None

        def session_tree_tool(session_id: str) -> str:
            """A session of this workspace and its children: status, own and subtree usage (JSON)."""
            return json.dumps(session_tree(ctx.store, _own(ctx.store, session_id, workspace)).to_json(), indent=2)

        def session_show(session_id: str) -> str:
            """A session of this workspace as a transcript: messages, tool calls and results, usage."""
            lines = Transcript(ctx.store).lines(_own(ctx.store, session_id, workspace))
            return "\n".join(lines)

        server.add_tool(run_team, name="run_team")
        server.add_tool(session_tree_tool, name="session_tree")
        server.add_tool(session_show, name="session_show")
        await server.run_stdio_async()


_INSTRUCTIONS = (
    "Zero's specialists and teams, working in {workspace}. Each specialist tool runs that specialist on a "
    "task and returns its report with its session id; run_team runs a team file."
)


def _specialist_tool(ctx: AgentContext, spec: Specialist, settings: RunSettings) -> Any:
    async def run(prompt: str, context: Context) -> str:
        session_id = new_session_id(spec.name)
        placement = Placement(kind="", parent_session_id="", root_session_id=session_id, depth=0, title=prompt[:80])
        try:
            session = await open_specialist(
                ctx,
                spec,
                placement,
                session_id=session_id,
                permission_mode=settings.permission_mode,
            )
        except ZeroError as e:  # (a run that fails after it starts says so in its answer)
            raise ToolError(str(e)) from None
        steps = 0
        events = session.events()  # subscribed before the run starts: no step is missed
        reported = anyio.Event()

        async def progress() -> None:
            nonlocal steps
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

    run.__doc__ = spec.description
    return run


async def _team(
    ctx: AgentContext, args: argparse.Namespace, path: Path, limits: Mapping[str, float | str | None], context: Any
) -> str:
    team, _, _ = load_team(path)
    # What members inherit, as `zero swarm run` has it: the flags, else the team's [defaults], else config.
    settings = resolve_settings(
        load_config(ctx.workspace.root),
        provider=args.provider or team.defaults.provider,
        model=args.model or team.defaults.model,
        base_url=args.base_url,
        permission_mode=args.permission_mode,
        max_turns=None,
    )
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
        async with events:
            async for event in events:
                if event.kind == "child_end" and event.session_id == runner.session_id:
                    done += 1
                    await context.report_progress(done, len(plan.members), f"{event.member} {event.status}")

    async with anyio.create_task_group() as tg:
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
