"""Building a specialist's agent (a Task child, a team member, a specialist run alone), and what every agent
builder shares (a top-level agent is built in ``zero.specialists.top_level``).

Each is an ``AgentSession`` with its tools, limits and guards fixed, and, while its depth
allows, a ``Delegator`` of its own, whose children are built here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from zero.agent import AgentConfig, smallest_cap
from zero.agent.output_schema import OutputSchema
from zero.agent.providers import DEFAULT_MODELS
from zero.sessions import AgentSession, RunNode, SessionMetadata
from zero.specialists.context import DELEGATE_TOOLS, AgentContext, InvocationBudget, child_system_prompt
from zero.specialists.delegation import Delegator
from zero.specialists.registry import Specialist
from zero.tools import PermissionMode, Tool, ToolRegistry, Workspace, builtin_tools

__all__ = [
    "SpecialistOptions",
    "can_delegate",
    "delegate",
    "mcp_tools",
    "open_child",
    "open_specialist",
    "top_tools",
]


@dataclass(frozen=True, kw_only=True)
class SpecialistOptions:
    """How a specialist's agent is opened: its session's node in the run tree (its id, kind, parent, root,
    depth and names), new or resumed, and what its caller narrows or sets; None leaves the manifest's."""

    node: RunNode
    permission_mode: PermissionMode  # never wider than the caller's
    resume: bool = False  # continue the session's recorded conversation
    created: bool = False  # a new session whose metadata is on disk already (a team's member)
    caller_tools: frozenset[str] | None = None  # None: the caller is no agent, so every top-level tool
    provider: str | None = None
    model: str | None = None
    max_turns: int | None = None
    max_output_tokens: int | None = None
    extra_tools: Sequence[Tool] = ()  # tools of its caller's for it (a team's messaging)
    role: str | None = None  # its part in the system prompt (a team member's); None: a Task child's
    output_schema: OutputSchema | None = None  # the result it ends with (a member's, a Task's); None: the manifest's


def delegate(
    ctx: AgentContext, session: AgentSession, *, permission_mode: PermissionMode, tools: Sequence[str]
) -> None:
    """Give ``session`` Task tools of its own: its children get ``permission_mode`` and at most ``tools``."""
    delegator = Delegator(
        ctx, session, permission_mode=permission_mode, caller_tools=frozenset(tools), open_child=open_child
    )
    session.delegate_with(delegator)


def mcp_tools(ctx: AgentContext, grants: Sequence[str] | None = None) -> list[Tool]:
    """The MCP tools of the run: all of them, or those ``grants`` name (``mcp:SERVER`` or
    ``mcp__SERVER__TOOL``)."""
    found = []
    for server, tools in ctx.mcp.items():
        for tool in tools:
            full = getattr(tool, "full_name", tool.name)
            if grants is None or f"mcp:{server}" in grants or full in grants or tool.name in grants:
                found.append(tool)
    return found


def top_tools(ctx: AgentContext) -> list[Tool]:
    """The tools of a top-level agent: every built-in one and every MCP tool of the run."""
    return [*builtin_tools(), *mcp_tools(ctx)]


def can_delegate(ctx: AgentContext, depth: int = 0) -> bool:
    return bool(ctx.registry.specialists) and depth < ctx.max_depth


def _model_for(ctx: AgentContext, spec: Specialist) -> tuple[str, str]:
    provider = spec.provider or ctx.provider.name
    if spec.model:
        return provider, spec.model
    if provider != ctx.provider.name:
        return provider, DEFAULT_MODELS.get(provider, ctx.model)
    return provider, ctx.model


async def open_specialist(ctx: AgentContext, spec: Specialist, options: SpecialistOptions) -> AgentSession:
    """An agent working as ``spec``: its manifest's tools narrowed to the caller's, the caller's permission
    mode, its limits, and Task tools of its own while its depth allows."""
    node = options.node
    depth = node.depth
    caller_tools = options.caller_tools
    if caller_tools is None:
        caller_tools = frozenset(t.name for t in top_tools(ctx))
    allowed = [t for t in spec.tools if t in caller_tools or t in DELEGATE_TOOLS]
    granted = [t for t in mcp_tools(ctx, spec.tools) if t.name in caller_tools]  # the manifest's, the caller's
    tools: list[Tool] = [t for t in builtin_tools() if t.name in allowed] + granted + list(options.extra_tools)
    wants_delegate = any(t in DELEGATE_TOOLS for t in allowed)
    may_delegate = wants_delegate and depth < ctx.max_depth
    unavailable: dict[str, str] = {}
    if wants_delegate and not may_delegate:
        reason = f"this agent is at depth {depth} and max_depth is {ctx.max_depth}; do the work yourself"
        unavailable = dict.fromkeys(DELEGATE_TOOLS, reason)
    guards = ctx.guards
    if spec.budget_tokens is not None or spec.budget_cost_usd is not None:
        guards = (*guards, InvocationBudget(spec.budget_tokens, spec.budget_cost_usd))
    default_provider, default_model = _model_for(ctx, spec)
    provider_name = options.provider or default_provider
    provider = ctx.provider if provider_name == ctx.provider.name else ctx.providers(provider_name)
    model = options.model or default_model
    config = AgentConfig(
        provider=provider,
        model=model,
        tools=ToolRegistry(tools),
        workspace=ctx.workspace,
        permission_mode=options.permission_mode,
        max_turns=options.max_turns or spec.max_turns or ctx.default_max_turns,
        max_output_tokens=smallest_cap(ctx.max_output_tokens, spec.max_output_tokens, options.max_output_tokens),
        reasoning_effort=spec.reasoning_effort,
        prices=ctx.prices,
        retry=ctx.retry,
        guards=guards,
        approver=ctx.approver,
        unavailable=unavailable,
        redactor=ctx.redactor,
        shell=ctx.shell,
        governor=ctx.governors.of(provider.name, model),
        output_schema=options.output_schema or OutputSchema.of(spec.output_schema, spec.output_retries),
    )
    if options.resume:
        session = await AgentSession.resume(ctx.store, node, config)
    else:
        meta = SessionMetadata(
            session_id=node.session_id,
            session_kind=node.kind,
            title=node.title[:80],
            cwd=str(ctx.workspace.root),
            provider=config.provider.name,
            model_id=config.model,
            parent_session_id=node.parent_session_id,
            root_session_id=node.root_session_id,
            agent_name=node.member_name or spec.name,
            specialist=spec.name,
            team_name=node.team_name,
            member_name=node.member_name,
            depth=depth,
        )
        root = str(ctx.workspace.root)
        prompt = child_system_prompt(spec, root, may_delegate, ctx.registry, options.role, ctx.instructions_of(root))
        session = await AgentSession.create(ctx.store, node, meta, config, prompt, exists=options.created)
    if may_delegate:
        delegate(ctx, session, permission_mode=options.permission_mode, tools=[t.name for t in tools])
    return session


async def open_child(
    delegator: Delegator,
    spec: Specialist,
    *,
    session_id: str,
    description: str,
    resume: bool,
    workspace: Workspace | None = None,
    output_schema: OutputSchema | None = None,
) -> AgentSession:
    """A Task child of ``delegator``'s agent (the ``ChildFactory`` every delegator uses), below it in the run
    tree; ``workspace``: its own (a worktree), for it and every task it starts; ``output_schema``: the result
    the Task asks for (None: the manifest's)."""
    node = delegator.ctx.tree.add(session_id, kind="child", under=delegator.parent.node, title=description)
    options = SpecialistOptions(
        node=node,
        resume=resume,
        permission_mode=delegator.permission_mode,
        caller_tools=delegator.caller_tools,
        output_schema=output_schema,
    )
    ctx = delegator.ctx if workspace is None else replace(delegator.ctx, workspace=workspace)
    return await open_specialist(ctx, spec, options)
