"""The budget ledger: one per team run, shared by every member and every sub-task.

Before each model call the caller reserves an estimate (prompt tokens + the call's
output cap, one turn, and their price); after it, the actual usage is committed and
the rest released. A reservation that does not fit is refused, so no call starts
that could push a total past its limit by more than that one call's own error of
estimate. The first refusal trips the ledger: from then on every reservation is
refused, and the summary names the limit and the amounts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from zero.agent import CallPermit, ModelRequest, PriceTable, Usage
from zero.errors import BudgetExhaustedError
from zero.orchestrator.team import MemberBudget, TeamBudget

__all__ = ["BudgetGuard", "Ledger", "Trip", "estimate_prompt_tokens"]

DEFAULT_OUTPUT_CAP = 4096
WARN_AT = 0.8
LIMIT_NAMES = {"tokens": "tokens", "cost_usd": "cost", "turns": "turns", "wall_seconds": "time"}


@dataclass(frozen=True)
class Trip:
    """Which limit stopped the team, and the amounts when it did."""

    limit: str
    used: float
    allowed: float
    requested: float = 0.0
    held: float = 0.0  # reserved by calls still in flight when the next one was refused

    def __str__(self) -> str:
        if self.limit == "cost_usd":
            text = f"cost limit reached: ${self.used:.4f} used of ${self.allowed:.4f}"
            held = f"; calls in flight held ${self.held:.4f}" if self.held else ""
            return text + held + (f"; the next call needed up to ${self.requested:.4f} more" if self.requested else "")
        unit = {"tokens": " tokens", "turns": " model calls", "wall_seconds": " s"}[self.limit]
        text = f"{LIMIT_NAMES[self.limit]} limit reached: {self.used:g}{unit} used of {self.allowed:g}{unit}"
        held = f"; calls in flight held {self.held:g}" if self.held else ""
        return text + held + (f"; the next call needed up to {self.requested:g} more" if self.requested else "")


@dataclass
class _Account:
    tokens: float = 0
    cost_usd: float = 0
    turns: float = 0


@dataclass
class Reservation:
    tokens: int
    cost_usd: float
    turns: int = 1
    ledgers: list[Ledger] = field(default_factory=list)


def estimate_prompt_tokens(request: ModelRequest) -> int:
    """About four characters a token: the messages, the tool calls, and the tool definitions."""
    chars = sum(len(m.content) + sum(len(json.dumps(c.arguments)) for c in m.tool_calls) for m in request.messages)
    chars += sum(t.size for t in request.tools)
    return chars // 4 + 1


class Ledger:
    """Limits and what is used and reserved against them. Not thread-safe: one event loop owns it."""

    def __init__(
        self,
        limits: TeamBudget | MemberBudget,
        *,
        clock: Callable[[], float] = time.monotonic,
        parent: Ledger | None = None,
        name: str = "team",
        on_trip: Callable[[Trip], None] | None = None,
    ):
        self.limits = limits
        self.on_trip = on_trip
        self.parent = parent
        self.name = name
        self.used = _Account()
        self.reserved = _Account()
        self.trip: Trip | None = None
        self._clock = clock
        self.started = clock()

    def _limit(self, key: str) -> float | None:
        value = getattr(self.limits, key, None)
        return None if value is None else float(value)

    def elapsed(self) -> float:
        return self._clock() - self.started

    def check_time(self) -> None:
        """Trip the ledger if its wall-clock limit has passed."""
        wall = self._limit("wall_seconds")
        if self.trip is None and wall is not None and self.elapsed() >= wall:
            self._trip(Trip("wall_seconds", round(self.elapsed(), 1), wall))

    def check(self) -> None:
        """Raise if this ledger (or its parent) is tripped, or out of time."""
        if self.parent is not None:
            self.parent.check()
        self.check_time()
        if self.trip is not None:
            raise BudgetExhaustedError(f"{self.name} budget exhausted: {self.trip}", limit=self.trip.limit)

    def reserve(self, tokens: int, cost_usd: float | None, turns: int = 1) -> Reservation:
        """Hold room for one call in this ledger and its parent, or trip and refuse."""
        chain = []
        ledger: Ledger | None = self
        while ledger is not None:
            chain.append(ledger)
            ledger = ledger.parent
        for ledger in reversed(chain):  # the team first: its trip is the one to report
            ledger._admit(tokens, cost_usd, turns)
        for ledger in chain:
            ledger.reserved.tokens += tokens
            ledger.reserved.cost_usd += cost_usd or 0
            ledger.reserved.turns += turns
        return Reservation(tokens, cost_usd or 0, turns, chain)

    def _admit(self, tokens: int, cost_usd: float | None, turns: int) -> None:
        self.check()
        for key, amount in (("tokens", tokens), ("cost_usd", cost_usd), ("turns", turns)):
            limit = self._limit(key)
            if limit is None:
                continue
            if amount is None:  # a cost limit with an unknown price: fail closed
                self._trip(Trip(key, self.used.cost_usd, limit))
                raise BudgetExhaustedError(
                    f"{self.name} budget: the cost of this call is unknown (the model has no price), so it "
                    "cannot be checked against the cost limit",
                    limit=key,
                )
            used = getattr(self.used, key)
            held = getattr(self.reserved, key)
            if used + held + amount > limit:
                self._trip(Trip(key, round(used, 6), limit, amount, round(held, 6)))
                raise BudgetExhaustedError(f"{self.name} budget exhausted: {self.trip}", limit=key)

    def _trip(self, trip: Trip) -> None:
        if self.trip is None:
            self.trip = trip
            if self.on_trip is not None:
                self.on_trip(trip)

    @staticmethod
    def settle(reservation: Reservation, usage: Usage | None) -> None:
        """Release the reservation and book what the call really used (nothing, if it failed)."""
        for ledger in reservation.ledgers:
            ledger.reserved.tokens -= reservation.tokens
            ledger.reserved.cost_usd -= reservation.cost_usd
            ledger.reserved.turns -= reservation.turns
            if usage is not None:
                ledger.used.tokens += usage.total_tokens
                ledger.used.cost_usd += usage.cost_usd or 0
                ledger.used.turns += 1

    def fractions(self) -> dict[str, float]:
        """How much of each limit is used (0..1+), for warnings and the live view."""
        out = {}
        for key in ("tokens", "cost_usd", "turns"):
            limit = self._limit(key)
            if limit:
                out[key] = getattr(self.used, key) / limit
        wall = self._limit("wall_seconds")
        if wall:
            out["wall_seconds"] = self.elapsed() / wall
        return out


class BudgetGuard:
    """The call guard of one member and its sub-tasks: reserve before, settle after, warn at 80 %."""

    def __init__(self, ledger: Ledger, prices: PriceTable, output_cap: int = DEFAULT_OUTPUT_CAP):
        self.ledger = ledger
        self.prices = prices
        self.output_cap = output_cap
        self._warned: set[str] = set()

    async def before_call(self, request: ModelRequest, run_usage: Usage) -> CallPermit:
        prompt = estimate_prompt_tokens(request)
        output = request.max_output_tokens or self.output_cap
        price = self.prices.price(request.model)
        cost: float | None
        if price is not None:
            cost = price.cost(Usage(prompt, output))
        else:  # unknown price: nothing to hold, unless a cost limit must be checked (then refuse)
            cost = None if self._needs_price() else 0.0
        reservation = self.ledger.reserve(prompt + output, cost)
        return CallPermit(reservation, self._note(request.metadata.get("session_id", "")))

    def _needs_price(self) -> bool:
        ledger: Ledger | None = self.ledger
        while ledger is not None:
            if getattr(ledger.limits, "cost_usd", None) is not None:
                return True
            ledger = ledger.parent
        return False

    async def after_call(self, permit: CallPermit | None, usage: Usage | None) -> None:
        if permit is not None and isinstance(permit.token, Reservation):
            Ledger.settle(permit.token, usage)

    def _note(self, session_id: str) -> str | None:
        if session_id in self._warned:
            return None
        ledger: Ledger | None = self.ledger
        while ledger is not None:
            for key, fraction in ledger.fractions().items():
                if fraction >= WARN_AT:
                    self._warned.add(session_id)
                    return (
                        f"[Zero] The {ledger.name} has used {fraction:.0%} of its {LIMIT_NAMES[key]} budget. "
                        "Wrap up now: finish the step you are on, then report what you have found or done, "
                        "and what is left."
                    )
            ledger = ledger.parent
        return None
