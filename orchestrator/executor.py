"""Where team members run: the seam between the scheduler and the agents.

The scheduler adds a member's node to the run tree and asks an executor to start it, then waits for
its outcome; it never touches the agent itself. The member's events reach the tree with its session
id, and a stop of its node's subtree stops it. ``InProcessExecutor`` runs each member as an
``AgentSession`` on this event loop; an executor running members in other processes or on other
machines would keep the same verbs, and the scheduler and the ledger would not change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from zero.agent import CallGuard, RunResult, Usage
from zero.orchestrator.ledger import BudgetGuard, Ledger
from zero.orchestrator.plan import MemberPlan
from zero.sessions import AgentSession, RunNode
from zero.specialists import AgentContext, Specialist, SpecialistOptions, open_specialist
from zero.tools import Owns, Tool, Workspace
from zero.tools.clones import NodeTree

__all__ = ["InProcessExecutor", "MemberExecutor", "MemberOutcome", "MemberRun", "MemberTask", "open_member"]


@dataclass(frozen=True, kw_only=True)
class MemberTask:
    """Everything a member needs to run: who it is, its session's node in the run tree (below its team's),
    what to do, under which ledger."""

    plan: MemberPlan
    node: RunNode
    prompt: str
    role: str
    ledger: Ledger | None  # None: on a node of a Ray cluster, whose guard spends from the team's ledger actor
    tools: Sequence[Tool] = ()  # the team's own tools for it (messaging)
    resume: bool = False  # continue the member's recorded conversation (a resumed team run)
    workspace: Workspace | None = None  # where it works, if not the run's workspace (its git worktree)
    tree: NodeTree | None = None  # the worktree its node makes from the team's repository ([workspace] repo)
    guards: tuple[CallGuard, ...] = ()  # checked before its budget's, its Task children's calls too (pause)


@dataclass(frozen=True, kw_only=True)
class MemberOutcome:
    """How a member's run ended; ``usage`` is what it and its Task children spent in it."""

    result: RunResult
    usage: Usage
    bundle: bytes | None = None  # what its branch gained on the node that made its worktree (a git bundle)


class MemberRun(Protocol):
    """A member the scheduler started. Its events reach the run tree with its session id; it is stopped as
    the subtree of its node is (``RunTree.stop``)."""

    session_id: str

    async def outcome(self) -> MemberOutcome:
        """Wait for the member to end (the in-process executor runs it meanwhile)."""
        ...

    def current(self) -> MemberOutcome | None:
        """How it ended, once it has (a stop included); None if it never started."""
        ...


class MemberExecutor(Protocol):
    remote: bool  # its members run on other machines: their worktrees are made there ([workspace] repo)

    def start(self, task: MemberTask) -> MemberRun: ...


async def open_member(
    ctx: AgentContext,
    spec: Specialist,
    options: SpecialistOptions,
    *,
    ledger: Ledger | None,
    owns: Owns | None,
    workspace: Workspace | None = None,
    guards: tuple[CallGuard, ...] = (),
    guard: CallGuard | None = None,
) -> AgentSession:
    """A team member's agent, spending from ``ledger`` (its team's, or its own grant of it; None: no budget to
    spend from, a member of a run that recorded none) or through ``guard`` (a ledger elsewhere), working in
    ``workspace`` (its git worktree; None: the run's), its file tools writing only what ``owns`` names (None:
    anything in the workspace), its Task children's too, and ``guards`` checking every call of them before the
    budget does (a pause waits there holding no reservation): the one place a member is built, in a team's run
    or resumed alone. It sits at depth 1, its Task children below it."""
    workspace = workspace or ctx.workspace
    if guard is None and ledger is not None:
        guard = BudgetGuard(ledger, ctx.prices)
    if owns is not None:
        workspace = workspace.owned_by(owns, f"member {options.node.member_name!r}")
    every, max_depth = (*guards, *ctx.guards), ctx.max_depth
    if guard is not None:
        every, max_depth = (*every, guard), ctx.max_depth + 1
    ctx = replace(ctx, guards=every, max_depth=max_depth, workspace=workspace)
    return await open_specialist(ctx, spec, options)


class InProcessExecutor:
    """Members as agent sessions on this event loop, nodes of the context's run tree; ``guard``: the budget guard
    of a member (default: its task's ledger's)."""

    remote = False

    def __init__(self, ctx: AgentContext, *, guard: Callable[[MemberTask], CallGuard] | None = None):
        self.ctx = ctx
        self.guard = guard

    def start(self, task: MemberTask) -> _InProcessRun:
        return _InProcessRun(self, task)


class _InProcessRun:
    def __init__(self, executor: InProcessExecutor, task: MemberTask):
        self.executor = executor
        self.task = task
        self.session_id = task.node.session_id
        self.session: AgentSession | None = None

    async def outcome(self) -> MemberOutcome:
        task, plan = self.task, self.task.plan
        options = SpecialistOptions(
            node=task.node,
            created=not task.resume,
            resume=task.resume,
            permission_mode=plan.permission_mode,
            provider=plan.provider,
            model=plan.model,
            max_turns=plan.max_turns,
            max_output_tokens=plan.max_output_tokens,
            extra_tools=task.tools,
            role=task.role,
            output_schema=plan.output_schema,
        )
        guard = self.executor.guard(task) if self.executor.guard is not None else None
        self.session = session = await open_member(
            self.executor.ctx,
            plan.specialist,
            options,
            ledger=task.ledger,
            owns=plan.owns,
            workspace=task.workspace,
            guards=task.guards,
            guard=guard,
        )
        async with session:
            result = await session.send(task.prompt)
        return MemberOutcome(result=result, usage=session.run_usage)

    def current(self) -> MemberOutcome | None:
        if self.session is None or self.session.result is None:
            return None
        return MemberOutcome(result=self.session.result, usage=self.session.run_usage)
