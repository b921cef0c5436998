"""The budget ledger: one per team run, shared by every member and every sub-task.

Before each model call the caller reserves an estimate (the prompt's tokens, the call's output
cap, one turn, and their price); after it, the actual usage is booked and the rest released.
A reservation that does not fit while other calls hold reservations waits for them to settle;
one that does not fit with nothing held trips the ledger: from then on every reservation is
refused, and the summary names the limit and the amounts.

The bound on overshoot: a limit is passed only by what the calls in flight at the trip used
beyond what they reserved, which is the error of their prompt estimates (their output is capped
at what they reserved, unless a server ignores the cap). Prompt estimates err high (see
``estimate_tokens``) and each model's real ratio is learnt from the usage it reports, so after
a model's first call the error is that of one call's change in the mix of text.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from zero.agent import CallPermit, ModelRequest, PriceTable, Usage
from zero.errors import BudgetExhaustedError
from zero.orchestrator.team import MemberBudget, TeamBudget

__all__ = ["BudgetGuard", "Calibration", "Ledger", "Trip"]

WARN_AT = 0.8
LIMIT_NAMES = {"tokens": "tokens", "cost_usd": "cost", "turns": "turns", "wall_seconds": "time", "retries": "retries"}
_UNITS = {"tokens": " tokens", "turns": " model calls", "wall_seconds": " s", "retries": " retries"}


@dataclass(frozen=True)
class Trip:
    """Which limit stopped the team, and the amounts when it did."""

    limit: str
    used: float
    allowed: float
    requested: float = 0.0

    def __str__(self) -> str:
        if self.limit == "cost_usd":
            text = f"cost limit reached: ${self.used:.4f} used of ${self.allowed:.4f}"
            return text + (f"; the next call needed up to ${self.requested:.4f} more" if self.requested else "")
        unit = _UNITS[self.limit]
        text = f"{LIMIT_NAMES[self.limit]} limit reached: {self.used:g}{unit} used of {self.allowed:g}{unit}"
        return text + (f"; the next call needed up to {self.requested:g} more" if self.requested else "")


@dataclass
class _Account:
    tokens: float = 0
    cost_usd: float = 0
    turns: float = 0
    retries: float = 0


@dataclass
class Reservation:
    tokens: int
    cost_usd: float
    turns: int = 1
    ledgers: list[Ledger] = field(default_factory=list)


@dataclass(frozen=True)
class _Held:
    """A guard's permit: the reservation, and the estimate it was made from (to learn from)."""

    reservation: Reservation
    model: str
    estimate: int


class Calibration:
    """Each model's ratio of the prompt tokens its server reports to Zero's estimate of them,
    where the server counts more than the estimate (which errs high already, so a lower ratio
    is never used: a mix that changes from English to CJK must not be underestimated). A higher
    ratio is taken at once and forgotten slowly."""

    def __init__(self) -> None:
        self._ratio: dict[str, float] = {}

    def prompt_tokens(self, model: str, estimate: int) -> int:
        return math.ceil(estimate * self._ratio.get(model, 1.0))

    def learn(self, model: str, estimate: int, reported: int) -> None:
        if estimate <= 0 or reported <= 0:
            return
        ratio = max(1.0, reported / estimate)
        old = self._ratio.get(model, 1.0)
        self._ratio[model] = max(ratio, 0.8 * old + 0.2 * ratio)


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
        self.in_flight = 0  # reservations held (counted, not summed: float sums do not return to 0)
        self.trip: Trip | None = None
        self.calibration: Calibration = parent.calibration if parent is not None else Calibration()
        self._clock = clock
        self._changed = anyio.Event()  # set (and replaced) whenever a reservation settles or the ledger trips
        self.started = clock()

    def _limit(self, key: str) -> float | None:
        value = getattr(self.limits, key, None)
        return None if value is None else float(value)

    def _chain(self) -> list[Ledger]:
        """This ledger and its parents, the team last."""
        chain = []
        ledger: Ledger | None = self
        while ledger is not None:
            chain.append(ledger)
            ledger = ledger.parent
        return chain

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

    async def reserve(self, tokens: int, cost_usd: float | None, turns: int = 1) -> Reservation:
        """Hold room for one call in this ledger and its parents: at once if it fits, after the calls
        in flight settle if it may fit then, or never (the ledger trips and this raises)."""
        chain = self._chain()
        while True:
            # The team first: its trip is the one to report.
            waiting = next((ledger for ledger in reversed(chain) if not ledger._fits(tokens, cost_usd, turns)), None)
            if waiting is None:
                break
            await waiting._changed.wait()
        for ledger in chain:
            ledger.in_flight += 1
            ledger.reserved.tokens += tokens
            ledger.reserved.cost_usd += cost_usd or 0
            ledger.reserved.turns += turns
        return Reservation(tokens, cost_usd or 0, turns, chain)

    def _fits(self, tokens: int, cost_usd: float | None, turns: int) -> bool:
        """Whether a call needing this much fits now (True), may fit once the calls in flight
        settle (False), or never will (trips and raises)."""
        self.check()
        fits = True
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
            if used + held + amount <= limit:
                continue
            if self.in_flight:
                fits = False
                continue
            self._trip(Trip(key, round(used, 6), limit, amount))
            raise BudgetExhaustedError(f"{self.name} budget exhausted: {self.trip}", limit=key)
        return fits

    def retry(self) -> None:
        """Count one retry of a model call in this ledger and its parents, or trip and raise when
        a ``retries`` limit allows no more."""
        chain = self._chain()
        for ledger in reversed(chain):
            ledger.check()
            limit = ledger._limit("retries")
            if limit is not None and ledger.used.retries + 1 > limit:
                ledger._trip(Trip("retries", ledger.used.retries, limit, 1))
                raise BudgetExhaustedError(f"{ledger.name} budget exhausted: {ledger.trip}", limit="retries")
        for ledger in chain:
            ledger.used.retries += 1

    def _trip(self, trip: Trip) -> None:
        if self.trip is None:
            self.trip = trip
            self._wake()
            if self.on_trip is not None:
                self.on_trip(trip)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    @staticmethod
    def settle(reservation: Reservation, usage: Usage | None) -> None:
        """Release the reservation and book what the call really used (nothing, if it failed)."""
        for ledger in reservation.ledgers:
            ledger.in_flight -= 1
            ledger.reserved.tokens -= reservation.tokens
            ledger.reserved.cost_usd -= reservation.cost_usd
            ledger.reserved.turns -= reservation.turns
            if usage is not None:
                ledger.used.tokens += usage.total_tokens
                ledger.used.cost_usd += usage.cost_usd or 0
                ledger.used.turns += 1
            ledger._wake()

    def fractions(self) -> dict[str, float]:
        """How much of each limit is used (0..1+), for warnings and the live view."""
        out = {}
        for key in ("tokens", "cost_usd", "turns", "retries"):
            limit = self._limit(key)
            if limit:
                out[key] = getattr(self.used, key) / limit
        wall = self._limit("wall_seconds")
        if wall:
            out["wall_seconds"] = self.elapsed() / wall
        return out


class BudgetGuard:
    """The call guard of one member and its sub-tasks: reserve before, settle after, count
    retries, warn at 80 %. The output part of a reservation is the request's own output cap."""

    def __init__(self, ledger: Ledger, prices: PriceTable):
        self.ledger = ledger
        self.prices = prices
        self._warned: set[str] = set()

    async def before_call(self, request: ModelRequest, run_usage: Usage) -> CallPermit:
        estimate = request.estimated_prompt_tokens()
        prompt = self.ledger.calibration.prompt_tokens(request.model, estimate)
        output = request.max_output_tokens or 0
        price = self.prices.price(request.model)
        cost: float | None
        if price is not None:
            cost = price.cost(Usage(prompt, output))
        else:  # unknown price: nothing to hold, unless a cost limit must be checked (then refuse)
            cost = None if self._needs_price() else 0.0
        reservation = await self.ledger.reserve(prompt + output, cost)
        note = self._note(request.metadata.get("session_id", ""))
        return CallPermit(_Held(reservation, request.model, estimate), note)

    async def before_retry(self, permit: CallPermit | None) -> None:
        self.ledger.retry()

    def _needs_price(self) -> bool:
        ledger: Ledger | None = self.ledger
        while ledger is not None:
            if getattr(ledger.limits, "cost_usd", None) is not None:
                return True
            ledger = ledger.parent
        return False

    async def after_call(self, permit: CallPermit | None, usage: Usage | None) -> None:
        if permit is not None and isinstance(permit.token, _Held):
            held = permit.token
            Ledger.settle(held.reservation, usage)
            if usage is not None and not usage.estimated:
                self.ledger.calibration.learn(held.model, held.estimate, usage.prompt_tokens)

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
