"""The pre-flight estimate of a team's run (docs/TEAMS.md, "The estimate"): for each member and in total,
low, expected and high tokens, model calls and cost, from what earlier runs of the same member (or, else,
of the same specialist on the same model) spent, else from what its calls would send."""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from zero.agent import Message, PriceTable, Usage, visible_specs
from zero.orchestrator.mailbox import Mailbox, ReadInbox, SendMessage
from zero.orchestrator.plan import MemberPlan, TeamPlan, member_prompt, member_role
from zero.orchestrator.team import TeamBudget, placeholders
from zero.sessions import Rollup, SessionStore
from zero.specialists import DELEGATE_TOOLS, SpecialistRegistry, child_system_prompt
from zero.tools import builtin_tools

__all__ = ["MemberEstimate", "Over", "Span", "TeamEstimate", "estimate_team"]

Source = Literal["team history", "specialist history", "prompt sizes", "reused"]

LOW_OUTPUT = 200
"""Tokens a call answers, low: a short report at once."""
EXPECTED_OUTPUT = 400
"""Tokens a call answers, expected (a tool call and a few words, or a report); a dependency's report too."""
EXPECTED_RESULT = 800
"""Tokens a tool result adds to the conversation, expected."""
EXPECTED_CALLS = 4
"""Model calls a member makes, expected (never more than its ``max_turns``)."""
HISTORY_RUNS = 5
"""The latest recorded runs an estimate is drawn from."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Span:
    low: float
    expected: float
    high: float

    @classmethod
    def of(cls, figures: Sequence[float]) -> Span:
        """From ``[low, expected, high]``."""
        low, expected, high = figures
        return cls(low=low, expected=expected, high=high)

    def __add__(self, other: Span) -> Span:
        return Span(low=self.low + other.low, expected=self.expected + other.expected, high=self.high + other.high)

    def capped(self, limit: float | None) -> Span:
        """No figure above ``limit`` (a member's own grant, which its ledger holds it to)."""
        if limit is None:
            return self
        return Span(low=min(self.low, limit), expected=min(self.expected, limit), high=min(self.high, limit))

    def to_json(self, digits: int | None = None) -> dict[str, float]:
        def shown(x: float) -> float:
            return round(x) if digits is None else round(x, digits)

        return {"low": shown(self.low), "expected": shown(self.expected), "high": shown(self.high)}


NOTHING = Span(low=0, expected=0, high=0)


@dataclass(frozen=True, kw_only=True)
class MemberEstimate:
    name: str
    source: Source
    runs: int  # how many recorded runs it is drawn from (0: from prompt sizes)
    first_prompt: int  # tokens of its first call's prompt: system prompt, tool definitions and its task
    tokens: Span
    calls: Span
    cost: Span | None  # None: its model has no price

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "runs": self.runs,
            "firstPromptTokens": self.first_prompt,
            "tokens": self.tokens.to_json(),
            "calls": self.calls.to_json(),
            "costUsd": None if self.cost is None else self.cost.to_json(6),
        }


@dataclass(frozen=True, kw_only=True)
class Over:
    """A budget limit the expected figure exceeds."""

    key: str  # as the team file's [budget] spells it
    expected: float
    limit: float

    def __str__(self) -> str:
        if self.key == "cost_usd":
            return f"expected cost ${self.expected:.4f} is more than budget.cost_usd = ${self.limit:.4f}"
        unit = "model calls" if self.key == "turns" else "tokens"
        return f"expected {self.expected:,.0f} {unit} is more than budget.{self.key} = {self.limit:,.0f}"


@dataclass(frozen=True, kw_only=True)
class TeamEstimate:
    members: list[MemberEstimate]

    @property
    def tokens(self) -> Span:
        return sum((m.tokens for m in self.members), NOTHING)

    @property
    def calls(self) -> Span:
        return sum((m.calls for m in self.members), NOTHING)

    @property
    def cost(self) -> Span | None:
        """None: some member's model has no price, so the team's cost is not known."""
        costs = [m.cost for m in self.members]
        return None if any(c is None for c in costs) else sum((c for c in costs if c), NOTHING)

    def over(self, budget: TeamBudget) -> list[Over]:
        """The team budget's limits the expected figures exceed."""
        cost = self.cost
        expected = {
            "tokens": self.tokens.expected,
            "cost_usd": None if cost is None else cost.expected,
            "turns": self.calls.expected,
        }
        found = []
        for key, value in expected.items():
            limit = getattr(budget, key)
            if limit is not None and value is not None and value > limit:
                found.append(Over(key=key, expected=value, limit=float(limit)))
        return found

    def to_json(self) -> dict[str, Any]:
        cost = self.cost
        return {
            "tokens": self.tokens.to_json(),
            "calls": self.calls.to_json(),
            "costUsd": None if cost is None else cost.to_json(6),
            "members": [m.to_json() for m in self.members],
        }


def estimate_team(
    plan: TeamPlan,
    prices: PriceTable,
    store: SessionStore,
    registry: SpecialistRegistry,
    *,
    root: str,
    instructions: str,
    reused: Collection[str] = (),
) -> TeamEstimate:
    """Each member's estimate: nothing for a member whose output is ``reused``; else from its recorded runs
    in ``store`` where there are any, else from the sizes of its prompts (``root``: the workspace its system
    prompt names; ``instructions``: the project's section of it)."""
    rows = store.rows()
    rollup = Rollup.of_rows(rows)
    mailbox = Mailbox(store=store, team_session_id="", members=list(plan.members))
    members = []
    for m in plan.members.values():
        first = _first_prompt(plan, m, mailbox, registry, root, instructions)
        recorded = _recorded(rows, rollup, plan.name, m)
        if m.name in reused:
            members.append(_estimate(m, "reused", 0, first, [Usage()] * 3, NOTHING, prices))
        elif recorded is not None:
            source, runs = recorded
            members.append(_from_history(m, source, runs, prices, first))
        else:
            members.append(_from_prompts(m, prices, first))
    return TeamEstimate(members=members)


def _first_prompt(
    team: TeamPlan, m: MemberPlan, mailbox: Mailbox, registry: SpecialistRegistry, root: str, instructions: str
) -> int:
    """The tokens of a member's first call as the ledger counts them: its system prompt, its task (each
    dependency's report taken as ``EXPECTED_OUTPUT`` tokens), and the tool definitions it is sent."""
    may_delegate = bool(registry.specialists) and any(t in DELEGATE_TOOLS for t in m.specialist.tools)
    system = child_system_prompt(m.specialist, root, may_delegate, registry, member_role(team, m), instructions)
    task = member_prompt(team, m, lambda name, keys: "")
    reports = sum(1 for expr in placeholders(m.spec.prompt) if expr != "goal") * EXPECTED_OUTPUT
    tools = [t for t in builtin_tools() if t.name in m.specialist.tools]
    specs = visible_specs([*tools, SendMessage(mailbox, m.name), ReadInbox(mailbox, m.name)], m.permission_mode)
    messages = (Message(role="system", content=system), Message(role="user", content=task))
    return sum(x.tokens for x in messages) + reports + sum(s.tokens for s in specs)


def _from_prompts(m: MemberPlan, prices: PriceTable, first: int) -> MemberEstimate:
    """Low: one call answering ``LOW_OUTPUT`` tokens. Expected: ``EXPECTED_CALLS`` calls answering
    ``EXPECTED_OUTPUT`` tokens, each later call sending the answer and a tool result of ``EXPECTED_RESULT``
    more. High: ``max_turns`` calls answering their whole output cap, each later one sending twice the cap
    more; no call's prompt beyond the model's context window."""
    cap = m.max_output_tokens or prices.output_cap(m.model)
    window = prices.context_window(m.model)
    cases = (
        (1, min(cap, LOW_OUTPUT), 0),
        (min(m.max_turns, EXPECTED_CALLS), min(cap, EXPECTED_OUTPUT), EXPECTED_OUTPUT + EXPECTED_RESULT),
        (m.max_turns, cap, 2 * cap),
    )
    usages = [
        Usage(prompt_tokens=sum(min(window, first + k * step) for k in range(calls)), completion_tokens=calls * out)
        for calls, out, step in cases
    ]
    calls = Span.of([float(c) for c, _, _ in cases])
    return _estimate(m, "prompt sizes", 0, first, usages, calls, prices)


def _from_history(
    m: MemberPlan, source: Source, runs: Sequence[Usage], prices: PriceTable, first: int
) -> MemberEstimate:
    """Low, expected and high: the least, the mean and the most the recorded runs spent."""
    by_tokens = sorted(runs, key=lambda u: u.total_tokens)
    mean = Usage(
        prompt_tokens=round(statistics.fmean(u.prompt_tokens for u in runs)),
        completion_tokens=round(statistics.fmean(u.completion_tokens for u in runs)),
        cached_tokens=round(statistics.fmean(u.cached_tokens for u in runs)),
    )
    calls = sorted(u.calls for u in runs)
    span = Span(low=float(calls[0]), expected=statistics.fmean(calls), high=float(calls[-1]))
    return _estimate(m, source, len(runs), first, [by_tokens[0], mean, by_tokens[-1]], span, prices)


def _estimate(
    m: MemberPlan,
    source: Source,
    runs: int,
    first: int,
    usages: Sequence[Usage],
    calls: Span,
    prices: PriceTable,
) -> MemberEstimate:
    """``usages``: the low, expected and high usage; each figure held to the member's own grant."""
    grant = m.spec.budget
    price = prices.price(m.model)
    cost = None if price is None else Span.of([price.cost(u) for u in usages])
    if cost is not None and grant is not None:
        cost = cost.capped(grant.cost_usd)
    return MemberEstimate(
        name=m.name,
        source=source,
        runs=runs,
        first_prompt=first,
        tokens=Span.of([float(u.total_tokens) for u in usages]).capped(grant.tokens if grant else None),
        calls=calls.capped(grant.turns if grant else None),
        cost=cost,
    )


def _recorded(
    rows: Sequence[Mapping[str, Any]], rollup: Rollup, team: str, m: MemberPlan
) -> tuple[Source, list[Usage]] | None:
    """What the latest completed runs of this member of ``team`` on its model spent, else those of its
    specialist on its model (as a member or a Task child); None: none is recorded."""
    mine = [
        r
        for r in rows
        if r.get("status") == "completed"
        and not r.get("reusedFrom")  # (it did no work: its origin's row counts)
        and r.get("modelId") == m.model
        and r.get("specialist") == m.specialist.name
    ]
    members = [r for r in mine if r.get("sessionKind") == "member" and r.get("teamName") == team]
    candidates: list[tuple[Source, list[Mapping[str, Any]]]] = [
        ("team history", [r for r in members if r.get("memberName") == m.name]),
        ("specialist history", [r for r in mine if r.get("sessionKind") in ("member", "child")]),
    ]
    for source, found in candidates:
        if found:
            latest = sorted(found, key=lambda r: str(r.get("createdAt", "")), reverse=True)[:HISTORY_RUNS]
            return source, [rollup.subtree(str(r["sessionId"])) for r in latest]
    return None
