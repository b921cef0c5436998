"""What the agents of one run share, per-invocation budgets, and the prompts of delegation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from zero.agent import (
    Approver,
    CallGuard,
    CallPermit,
    ModelRequest,
    PriceTable,
    Provider,
    RateGovernors,
    RetryPolicy,
    Usage,
)
from zero.agent.prompts import project_instructions
from zero.errors import BudgetExhaustedError
from zero.sessions import RunTree, SessionStore
from zero.specialists.registry import Specialist, SpecialistRegistry
from zero.tools import CATEGORIES, Redactor, ShellSettings, Tool, Workspace

__all__ = ["DELEGATE_TOOLS", "AgentContext", "InvocationBudget", "child_system_prompt", "specialists_prompt"]

DELEGATE_TOOLS = CATEGORIES["delegate"]


@dataclass(kw_only=True)
class AgentContext:
    """What every agent of one run shares: where sessions go, how to reach models, limits, the run tree.

    ``provider`` is the run's main provider; ``providers`` gives the provider of another name
    (a specialist may pick one), made once and closed with the run.
    """

    store: SessionStore
    registry: SpecialistRegistry
    workspace: Workspace
    provider: Provider
    model: str
    providers: Callable[[str], Provider]
    prices: PriceTable = field(default_factory=PriceTable.builtin)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_depth: int = 1
    max_concurrency: int = 4
    default_max_turns: int = 30
    max_output_tokens: int | None = None  # the run's output cap a call (flag, config); the smallest set wins
    guards: tuple[CallGuard, ...] = ()
    approver: Approver | None = None  # who answers permission requests (the shell's user), for every agent
    mcp: dict[str, list[Tool]] = field(default_factory=dict)  # the tools of each MCP server the run started
    redactor: Callable[[str], str] = field(default_factory=Redactor)  # secrets of this run's environment
    shell: ShellSettings = field(default_factory=ShellSettings)  # what the user's setup says of shell commands
    tree: RunTree = field(default_factory=RunTree)  # the run's sessions, its one hub and its one stop reason
    governors: RateGovernors = field(default_factory=RateGovernors)  # one per (provider, model): its rate limits
    instructions: dict[str, str] = field(default_factory=dict)  # each workspace's AGENTS.md section, once a run
    replay_of: str = ""  # the recorded run this one replays (``zero replay``): its top session links to it
    # Remembers that the user trusts a project's specialist as it is (name, fingerprint): one they approved
    # as CreateSpecialist drafted it (None: trusted for this run only).
    trust: Callable[[str, str], None] | None = None

    def instructions_of(self, cwd: str) -> str:
        """The project instructions of the workspace at ``cwd`` as a system prompt's section (see
        ``project_instructions``), read once a run: a team of a thousand members reads the file once."""
        if cwd not in self.instructions:
            self.instructions[cwd] = project_instructions(cwd)
        return self.instructions[cwd]


class InvocationBudget:
    """A manifest's ``[budget]``: the child stops before a call once it has spent this much."""

    def __init__(self, tokens: int | None, cost_usd: float | None):
        self.tokens = tokens
        self.cost_usd = cost_usd

    async def before_call(self, request: ModelRequest, run_usage: Usage) -> CallPermit | None:
        if self.tokens is not None and run_usage.total_tokens >= self.tokens:
            raise BudgetExhaustedError(
                f"token budget of this invocation is spent: {run_usage.total_tokens} of {self.tokens} tokens",
                limit="tokens",
            )
        cost = run_usage.cost_usd
        if self.cost_usd is not None and cost is not None and cost >= self.cost_usd:
            raise BudgetExhaustedError(
                f"cost budget of this invocation is spent: ${cost:.4f} of ${self.cost_usd:.4f}", limit="cost_usd"
            )
        return None

    async def before_retry(self, permit: CallPermit | None) -> None:
        return None

    async def after_call(self, permit: CallPermit | None, usage: Usage | None) -> None:
        return None


def specialists_prompt(registry: SpecialistRegistry) -> str:
    """The part of a system prompt that tells an agent whom it can delegate to."""
    lines = "\n".join(f"- {s.name}: {s.description}" for s in registry.specialists.values())
    return (
        "You can delegate with the Task tool to these specialists, each a separate agent with its own "
        f"tools:\n{lines}\n"
        "Delegate work that is big enough to be worth a separate agent, or that can run in parallel: "
        "several Task calls in one turn run at the same time. Give each a complete, self-contained "
        "assignment (it does not see this conversation) and use its report. Do small, direct work yourself."
    )


def child_system_prompt(
    spec: Specialist,
    cwd: str,
    can_delegate: bool,
    registry: SpecialistRegistry,
    role: str | None = None,
    instructions: str | None = None,
) -> str:
    """A specialist's system prompt: its own, its role, the workspace and its instructions (``instructions``:
    read from ``cwd`` when not given), and the specialists it may delegate to."""
    role = role or (
        f'You are the "{spec.name}" specialist, started by another agent to do one task. '
        "Work only on the task you are given. Your final message is your report to that agent: "
        "lead with the answer, then the evidence. It cannot ask you follow-up questions."
    )
    if instructions is None:
        instructions = project_instructions(cwd)
    prompt = f"{spec.prompt}\n\n{role}\nWorkspace: {cwd}." + instructions
    return f"{prompt}\n\n{specialists_prompt(registry)}" if can_delegate else prompt
