"""Building a top-level agent: the one ``zero exec``, the shell and ACP run (not a specialist), new or resumed."""

from __future__ import annotations

import anyio.to_thread

from zero.agent import AgentConfig
from zero.agent.prompts import default_system_prompt
from zero.sessions import AgentSession, SessionMetadata, new_session_id
from zero.specialists.agents import can_delegate, delegate, top_tools
from zero.specialists.context import AgentContext, specialists_prompt
from zero.tools import PermissionMode, ToolRegistry

__all__ = ["open_agent", "resume_agent"]


def _top_config(ctx: AgentContext, permission_mode: PermissionMode, max_turns: int | None) -> AgentConfig:
    return AgentConfig(
        provider=ctx.provider,
        model=ctx.model,
        tools=ToolRegistry(top_tools(ctx)),
        workspace=ctx.workspace,
        permission_mode=permission_mode,
        max_turns=max_turns,
        max_output_tokens=ctx.max_output_tokens,
        prices=ctx.prices,
        retry=ctx.retry,
        guards=ctx.guards,
        approver=ctx.approver,
        redactor=ctx.redactor,
        shell=ctx.shell,
        governor=ctx.governors.of(ctx.provider.name, ctx.model),
    )


def _top_prompt(ctx: AgentContext, system_prompt: str) -> str:
    """A top-level agent's system prompt: ``system_prompt``, and the specialists it may delegate to."""
    return system_prompt + "\n\n" + specialists_prompt(ctx.registry) if can_delegate(ctx) else system_prompt


async def open_agent(
    ctx: AgentContext,
    *,
    title: str,
    system_prompt: str,
    permission_mode: PermissionMode,
    max_turns: int | None,
    session_id: str | None = None,
    agent_name: str = "zero",
) -> AgentSession:
    """A new top-level agent: every built-in tool, and Task when there are specialists to delegate to."""
    session_id = session_id or new_session_id()
    config = _top_config(ctx, permission_mode, max_turns)
    meta = SessionMetadata(
        session_id=session_id,
        title=title[:80],
        cwd=str(ctx.workspace.root),
        provider=ctx.provider.name,
        model_id=ctx.model,
        root_session_id=session_id,
        agent_name=agent_name,
        replay_of=ctx.replay_of or None,
    )
    node = ctx.tree.add(session_id, title=meta.title)
    session = await AgentSession.create(ctx.store, node, meta, config, _top_prompt(ctx, system_prompt))
    if can_delegate(ctx):
        tools = config.tools.names()  # the built-in tools and the run's MCP tools: what children may be granted
        delegate(ctx, session, permission_mode=permission_mode, tools=tools)
    return session


async def resume_agent(
    ctx: AgentContext, session_id: str, *, permission_mode: PermissionMode, max_turns: int | None
) -> AgentSession:
    """A top-level session continued with its history (one that never ran starts as a new one would)."""
    meta = await anyio.to_thread.run_sync(ctx.store.metadata, session_id)
    config = _top_config(ctx, permission_mode, max_turns)
    prompt = _top_prompt(ctx, default_system_prompt(str(ctx.workspace.root)))
    session = await AgentSession.resume(ctx.store, ctx.tree.recorded(meta), config, system_prompt=prompt)
    if can_delegate(ctx, meta.depth):
        delegate(ctx, session, permission_mode=permission_mode, tools=session.agent.config.tools.names())
    return session
