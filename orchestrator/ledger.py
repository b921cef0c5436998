"""The budget ledger: one per team run, shared by every member and every sub-task.

Before each model call the caller reserves what the call can cost at most (the prompt's tokens,
the call's output cap, one turn, and their price); after it, the actual usage is booked and the
rest released. A reservation that does not fit while other calls hold reservations waits for them
to settle. One that still does not fit with nothing held is made smaller: the call's output cap
is lowered to what the rest of the limit can pay (never below ``MIN_OUTPUT`` tokens), and the
request is sent with that cap. Only when even that does not fit does the ledger trip: from then
on every reservation is refused, and the summary names the limit and the amounts.

The bound on overshoot: a limit is passed only by what the calls in flight at the trip used
beyond what they reserved, which is the error of their prompt estimates (their output is capped
at what they reserved, lowered cap included, unless a server ignores the cap). Prompt estimates
err high (see ``estimate_tokens``) and each model's real ratio is learnt from the usage it
reports, so after a model's first call the error is that of one call's change in the mix of text.
Without the lowering, a limit smaller than a few calls' caps stopped a team early: eight members
with 8,192-token caps reached a third of a $0.02 limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

import anyio

from zero.agent import CallPermit, ModelRequest, PriceTable, Usage
from zero.errors import BudgetExhaustedError
from zero.orchestrator.team import MemberBudget, TeamBudget

__all__ = ["MIN_OUTPUT", "BudgetGuard", "Calibration", "Ledger", "Shrink", "Trip"]

WARN_AT = 0.8
MIN_OUTPUT = 1024
"""A call's output cap is never lowered below this to fit a budget: a smaller answer is seldom of use."""
LIMIT_NAMES = {"tokens": "tokens", "cost_usd": "cost", "turns": "turns", "wall_seconds": "time", "retries": "retries"}
_UNITS = {"tokens": " tokens", "turns": " model calls", "wall_seconds": " s", "retries": " retries"}


@dataclass(frozen=True, kw_only=True)
class Trip:
    """Which limit stopped the team, and the amounts when it did."""

    limit: str
    used: float
    allowed: float
    requested: float = 0.0

    def __str__(self) -> str:
        if self.limit == "cost_usd":
            text = f"cost limit reached: ${self.used:.4f} used of ${self.allowed:.4f}"
            return text + (f"; the next call needed ${self.requested:.4f} more" if self.requested else "")
        unit = _UNITS[self.limit]
        text = f"{LIMIT_NAMES[self.limit]} limit reached: {self.used:g}{unit} used of {self.allowed:g}{unit}"
        return text + (f"; the next call needed {self.requested:g} more" if self.requested else "")


@dataclass(kw_only=True)
class _Account:
    tokens: float = 0
    cost_usd: float = 0
    turns: float = 0
    retries: float = 0


@dataclass(kw_only=True)
class Reservation:
    tokens: int
    cost_usd: float
    turns: int = 1
    ledgers: list[Ledger] = field(default_factory=list)
    output: int | None = None  # the output cap the call must be sent with, when it was lowered to fit


@dataclass(frozen=True, kw_only=True)
class Shrink:
    """How a reservation may be made smaller when it does not fit: the ``output`` tokens it holds (the call's
    cap) may be lowered to ``least``, each one costing ``price`` dollars."""

    output: int
    least: int
    price: float


@dataclass(frozen=True, kw_only=True)
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
            self._trip(Trip(limit="wall_seconds", used=round(self.elapsed(), 1), allowed=wall))

    def check(self) -> None:
        """Raise if this ledger (or its parent) is tripped, or out of time."""
        if self.parent is not None:
            self.parent.check()
        self.check_time()
        if self.trip is not None:
            raise BudgetExhaustedError(f"{self.name} budget exhausted: {self.trip}", limit=self.trip.limit)

    async def reserve(
        self, tokens: int, cost_usd: float | None, turns: int = 1, *, shrink: Shrink | None = None
    ) -> Reservation:
        """Hold room for one call in this ledger and its parents: at once if it fits, after the calls
        in flight settle if it may fit then, else with its output lowered as ``shrink`` allows, or never
        (the ledger trips and this raises)."""
        chain = self._chain()
        output = None
        while True:
            # The team first: its trip is the one to report.
            verdicts = [(ledger, ledger._verdict(tokens, cost_usd, turns)) for ledger in reversed(chain)]
            short = next(((ledger, v) for ledger, v in verdicts if v[0] == "short"), None)
            if short is not None:
                smaller = _shrunk(chain, tokens, cost_usd, turns, shrink, output)
                if smaller is None:
                    ledger, (_, key, amount) = short
                    ledger._refuse(key, _least(key, amount, shrink, output))
                tokens, cost_usd, output = smaller
                continue
            waiting = next((ledger for ledger, v in verdicts if v[0] == "wait"), None)
            if waiting is None:
                break
            await waiting._changed.wait()
        for ledger in chain:
            ledger.in_flight += 1
            ledger.reserved.tokens += tokens
            ledger.reserved.cost_usd += cost_usd or 0
            ledger.reserved.turns += turns
        return Reservation(tokens=tokens, cost_usd=cost_usd or 0, turns=turns, ledgers=chain, output=output)

    def _verdict(self, tokens: int, cost_usd: float | None, turns: int) -> tuple[str, str, float]:
        """Whether a call needing this much fits now (``fits``), may fit once the calls in flight settle
        (``wait``), or does not fit with nothing in flight (``short``, with the limit and the amount)."""
        self.check()
        verdict = "fits"
        for key, amount in (("tokens", tokens), ("cost_usd", cost_usd), ("turns", turns)):
            limit = self._limit(key)
            if limit is None:
                continue
            if amount is None:  # a cost limit with an unknown price: fail closed
                self._trip(Trip(limit=key, used=self.used.cost_usd, allowed=limit))
                raise BudgetExhaustedError(
                    f"{self.name} budget: the cost of this call is unknown (the model has no price), so it "
                    "cannot be checked against the cost limit",
                    limit=key,
                )
            if getattr(self.used, key) + getattr(self.reserved, key) + amount <= limit:
                continue
            if not self.in_flight:
                return "short", key, amount
            verdict = "wait"
        return verdict, "", 0.0

    def _refuse(self, key: str, amount: float) -> NoReturn:
        limit = self._limit(key)
        assert limit is not None
        self._trip(Trip(limit=key, used=round(getattr(self.used, key), 6), allowed=limit, requested=amount))
        raise BudgetExhaustedError(f"{self.name} budget exhausted: {self.trip}", limit=key)

    def _room(self, key: str) -> float:
        """What is left of a limit, counting what the calls in flight hold (inf: no limit)."""
        limit = self._limit(key)
        return math.inf if limit is None else limit - getattr(self.used, key) - getattr(self.reserved, key)

    def retry(self) -> None:
        """Count one retry of a model call in this ledger and its parents, or trip and raise when
        a ``retries`` limit allows no more."""
        chain = self._chain()
        for ledger in reversed(chain):
            ledger.check()
            limit = ledger._limit("retries")
            if limit is not None and ledger.used.retries + 1 > limit:
                ledger._trip(Trip(limit="retries", used=ledger.used.retries, allowed=limit, requested=1))
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

    def adopt(self, used: _Account, trip: Trip | None) -> None:
        """Take what the ledger that holds this run's budget (on another process: the Ray executor's) has used,
        and its trip, which this one then reports as its own (``on_trip`` included)."""
        self.used = used
        if trip is not None:
            self._trip(trip)

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


def _least(key: str, amount: float, shrink: Shrink | None, lowered: int | None) -> float:
    """The least of ``key`` a call needing ``amount`` could be made with (its output lowered all the way)."""
    if shrink is None or key not in ("tokens", "cost_usd"):
        return amount
    cut = (shrink.output if lowered is None else lowered) - shrink.least
    return amount - max(0, cut) * (1 if key == "tokens" else shrink.price)


def _shrunk(
    chain: list[Ledger], tokens: int, cost_usd: float | None, turns: int, shrink: Shrink | None, lowered: int | None
) -> tuple[int, float | None, int] | None:
    """The call's amounts with its output lowered to what every ledger of ``chain`` has room for, and that
    output; None if that is below ``shrink.least`` (or nothing may be lowered)."""
    if shrink is None or any(ledger._room("turns") < turns for ledger in chain):
        return None
    held = shrink.output if lowered is None else lowered
    prompt_tokens, prompt_cost = tokens - held, (cost_usd or 0.0) - held * shrink.price
    room = min(ledger._room("tokens") for ledger in chain) - prompt_tokens
    if shrink.price > 0:
        room = min(room, (min(ledger._room("cost_usd") for ledger in chain) - prompt_cost) / shrink.price)
    # At least one token less than it holds (it did not fit): a float sum a hair over the limit shrinks again.
    output = min(held - 1, math.floor(room)) if room < math.inf else -1
    if output < shrink.least:
        return None
    return prompt_tokens + output, None if cost_usd is None else prompt_cost + output * shrink.price, output


class BudgetGuard:
    """The call guard of one member and its sub-tasks: reserve before, settle after, count
    retries, warn at 80 %. The output part of a reservation is the request's own output cap."""

    def __init__(self, ledger: Ledger, prices: PriceTable):
        self.ledger = ledger
        self.prices = prices
        self._warned: set[str] = set()

    async def before_call(self, request: ModelRequest, run_usage: Usage) -> CallPermit:
        return await self.hold(
            request.model,
            request.estimated_prompt_tokens(),
            request.max_output_tokens or 0,
            request.metadata.get("session_id", ""),
        )

    async def hold(self, model: str, estimate: int, output: int, session_id: str) -> CallPermit:
        """The permit of a call to ``model`` whose prompt is estimated at ``estimate`` tokens, capped at ``output``
        (what ``before_call`` reads of the request: a guard on another machine sends just these)."""
        prompt = self.ledger.calibration.prompt_tokens(model, estimate)
        price = self.prices.price(model)
        cost: float | None
        if price is not None:
            cost = price.cost(Usage(prompt_tokens=prompt, completion_tokens=output))
        else:  # unknown price: nothing to hold, unless a cost limit must be checked (then refuse)
            cost = None if self._needs_price() else 0.0
        shrink = Shrink(
            output=output, least=min(output, MIN_OUTPUT), price=price.output / 1e6 if price is not None else 0.0
        )
        reservation = await self.ledger.reserve(prompt + output, cost, shrink=shrink)
        note = self._note(session_id)
        return CallPermit(
            token=_Held(reservation=reservation, model=model, estimate=estimate),
            note=note,
            max_output_tokens=reservation.output,
        )

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
