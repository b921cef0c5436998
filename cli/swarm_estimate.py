"""The pre-flight estimate as ``zero swarm validate`` and ``run`` show it, and ``run``'s refusal of a team
whose expected figures exceed its budget (the model: ``zero.orchestrator.estimate``; docs/TEAMS.md)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from rich.console import Console

from zero.agent import PriceTable, format_tokens
from zero.agent.prompts import project_instructions
from zero.cli.common import session_store
from zero.errors import UsageError
from zero.orchestrator import TeamPlan
from zero.orchestrator.estimate import MemberEstimate, Span, TeamEstimate, estimate_team
from zero.specialists import SpecialistRegistry

__all__ = ["check_estimate", "estimate_line", "estimate_of", "print_estimate"]

_FLAGS = {"tokens": "--budget-tokens", "cost_usd": "--budget-cost"}


def estimate_of(
    plan: TeamPlan, registry: SpecialistRegistry, workspace: Path, prices: PriceTable, reused: Collection[str] = ()
) -> TeamEstimate:
    """The estimate of ``plan`` run in ``workspace``, from the runs this user's session store records
    (``reused``: the members whose output is taken from an earlier run: nothing to spend)."""
    root = str(workspace)
    return estimate_team(
        plan, prices, session_store(), registry, root=root, instructions=project_instructions(root), reused=reused
    )


def _tokens(span: Span) -> str:
    return " / ".join(format_tokens(round(x)) for x in (span.low, span.expected, span.high))


def _calls(span: Span) -> str:
    return " / ".join(f"{x:,.0f}" if x == round(x) else f"{x:,.1f}" for x in (span.low, span.expected, span.high))


def _cost(span: Span | None) -> str:
    if span is None:
        return "unknown (no price)"
    return " / ".join(f"${x:.4f}" for x in (span.low, span.expected, span.high))


def _source(m: MemberEstimate) -> str:
    if m.source == "reused":
        return "reused: nothing to spend"
    if m.source == "prompt sizes":
        return f"from prompt sizes ({format_tokens(m.first_prompt)} tokens a first call)"
    return f"from {m.source} ({m.runs} run{'s' if m.runs != 1 else ''})"


def print_estimate(estimate: TeamEstimate, console: Console) -> None:
    console.print('Estimate, low / expected / high (docs/TEAMS.md, "The estimate"):')
    for m in estimate.members:
        console.print(
            f"  {m.name:<16} tokens {_tokens(m.tokens)} · calls {_calls(m.calls)} · cost {_cost(m.cost)} · "
            f"{_source(m)}",
            markup=False,
        )
    console.print(
        f"  {'total':<16} tokens {_tokens(estimate.tokens)} · calls {_calls(estimate.calls)} · "
        f"cost {_cost(estimate.cost)}",
        markup=False,
    )


def estimate_line(estimate: TeamEstimate) -> str:
    """The expected figures in one line, as ``run`` says them before its first call."""
    cost = estimate.cost
    shown = "unknown cost" if cost is None else f"${cost.expected:.4f}"
    return (
        f"estimate: expected {format_tokens(round(estimate.tokens.expected))} tokens, "
        f"{estimate.calls.expected:,.0f} model calls, {shown} "
        f"(high {format_tokens(round(estimate.tokens.high))} tokens)"
    )


def check_estimate(estimate: TeamEstimate, plan: TeamPlan, team_file: str) -> None:
    """``UsageError`` (exit 2) when the expected figures exceed the team budget, naming each limit and
    how to lift it, or ``--accept-estimate``."""
    over = estimate.over(plan.budget)
    if not over:
        return
    fixes = "; ".join(
        f"raise budget.{o.key} in {team_file}" + (f" (or {_FLAGS[o.key]})" if o.key in _FLAGS else "") for o in over
    )
    raise UsageError(
        f"team {plan.name!r} not started, no model called: {'; '.join(str(o) for o in over)}. "
        f"{fixes[0].upper()}{fixes[1:]}, or pass --accept-estimate to run anyway (the budget still stops the run "
        "when it is spent)"
    )
