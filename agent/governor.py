"""One rate governor per (provider, model), shared by every agent of a run: a fan-out waits its turn instead of
burning its retries together on 429s.

A governor holds, for its key, what the server said of its limits and what the run learned:

- **buckets** for requests, tokens (OpenAI: input and output together), input tokens and output tokens, filled
  from the servers' own headers (OpenAI ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, Anthropic
  ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}``) or seeded from
  config (``rpm``, ``tpm``). A call takes one request, its prompt's estimate (scaled by how far the estimates
  before it fell from what the server counted) and its whole output cap up front. What it did not use goes
  back when it ends to a bucket only config seeded: one the server states is as full as its next answer says
  (OpenAI counts the output cap and gives none back; a refund the server does not make is a 429 later).
- **concurrency** that adapts, as TCP's does: a few calls go first; a server whose answer states no limits
  (a local one) then gets as many as come. Against one that states them, one more may go for every two calls
  it accepts (slow start, half as many again each round trip) until it first says no; then as many as it held at that
  moment, one more after each run of twice that many clean calls, and that run twice as long each time the
  server says no again at the same level (so a limit it does not state, such as calls in flight, costs a
  few refusals, not one a round).
- **one cooldown** for the key, from the answer that said no (``retry-after-ms``, ``retry-after`` in seconds or
  as an HTTP date) or a backoff.

Waiting for the governor is neither a failure nor a retry and spends nothing; ``acquire`` says why it waits.
"""

from __future__ import annotations

import math
import re
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import anyio

__all__ = [
    "COOLDOWN",
    "RateGovernor",
    "RateGovernors",
    "RateLimits",
    "Slot",
    "limits_from_headers",
    "parse_retry_after",
]

_KINDS = ("requests", "tokens", "input_tokens", "output_tokens")


def _header_names(kind: str) -> tuple[tuple[str, str, str], tuple[str, str, str]]:
    """The (limit, remaining, reset) header names of ``kind``: OpenAI's, then Anthropic's."""
    d = kind.replace("_", "-")
    return (
        (f"x-ratelimit-limit-{d}", f"x-ratelimit-remaining-{d}", f"x-ratelimit-reset-{d}"),
        (f"anthropic-ratelimit-{d}-limit", f"anthropic-ratelimit-{d}-remaining", f"anthropic-ratelimit-{d}-reset"),
    )


_HEADERS = tuple((kind, _header_names(kind)) for kind in _KINDS)

MAX_WAIT = 600.0  # seconds: the most a server's word makes a call wait at once (a reset or retry-after of years)
START = 4  # calls that go before the server's first answer says whether it states limits
FIRST_ANSWER = "rate limit: the server's first answer"  # (a wait of one round trip at a run's start: not said)
COOLDOWN = "rate limit: the server said to wait"


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimits:
    """What one answer's headers said: for each kind (``_KINDS``), (limit, remaining, seconds until full)."""

    buckets: dict[str, tuple[float, float, float]] = field(default_factory=dict)


def limits_from_headers(headers: Mapping[str, str]) -> RateLimits | None:
    """The rate limits an answer's headers state (OpenAI's or Anthropic's names), or None if it states none."""
    lowered = ((name.lower(), value) for name, value in headers.items())
    stated = {name: value for name, value in lowered if "ratelimit-" in name}
    if not stated:  # (most servers: one look at each header, not eight lookups)
        return None
    found: dict[str, tuple[float, float, float]] = {}
    for kind, families in _HEADERS:
        for limit, remaining, reset in families:
            try:
                whole, left = float(stated[limit]), float(stated[remaining])
            except (KeyError, ValueError):
                continue
            if whole > 0 and left >= 0:
                found[kind] = (whole, min(left, whole), _seconds(stated.get(reset, "")))
                break
    return RateLimits(buckets=found) if found else None


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms``, else ``retry-after`` (seconds, or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    import email.utils  # (an HTTP date is rare: not paid for by every run that imports the governor)

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time()) if when.tzinfo is not None else None


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _seconds(text: str) -> float:
    """A reset time as OpenAI writes it (``6m0s``, ``20ms``, ``1.5s``) or as Anthropic does (an RFC 3339
    time), in seconds from now; 60 when it says nothing readable (the limits are per minute)."""
    text = text.strip()
    if parts := _DURATION.findall(text):
        if "".join(n + u for n, u in parts) == text:
            return sum(float(n) * _UNIT[u] for n, u in parts)
    try:
        return float(text)
    except ValueError:
        pass
    try:
        from datetime import datetime

        return max(0.0, datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() - time.time())
    except ValueError:
        return 60.0


@dataclass(slots=True, kw_only=True)
class _Bucket:
    capacity: float
    level: float
    rate: float  # per second
    stamp: float
    stated: bool = False  # the server's headers fill it (else config seeded it)

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait(self, amount: float) -> float:
        """Seconds until ``amount`` can be taken (an amount above the capacity waits for a full bucket)."""
        short = min(amount, self.capacity) - self.level
        return 0.0 if short <= 0 else short / self.rate if self.rate > 0 else math.inf


@dataclass(slots=True, kw_only=True, eq=False)
class Slot:
    """One call's leave to go: what it took from each bucket, to give back what it did not use; ``accepted``:
    the server took it (its answer began)."""

    taken: dict[str, float]
    estimate: int = 0  # its prompt's estimated tokens, unscaled
    accepted: bool = False
    number: int = 0  # the order it went in


@dataclass(slots=True, eq=False)
class _Waiter:
    woken: anyio.Event = field(default_factory=anyio.Event)
    gone: bool = False


Waiting = Callable[[str, float | None], None]
"""Told why a call waits (``"rate limit"``, ...) and for how long, when that is known."""


class RateGovernor:
    """The governor of one (provider, model) (see the module docstring). Owned by one event loop."""

    def __init__(self, key: str, *, rpm: float | None = None, tpm: float | None = None):
        self.key = key
        now = time.monotonic()
        self.buckets: dict[str, _Bucket] = {}
        for kind, per_minute in (("requests", rpm), ("tokens", tpm)):
            if per_minute:
                self.buckets[kind] = _Bucket(capacity=per_minute, level=per_minute, rate=per_minute / 60, stamp=now)
        self.limit: int | None = START  # how many calls may be under way; None: as many as come
        self.learning = True  # slow start: the server has neither stated no limits nor said no yet
        self.answered = False  # the server has taken a call (before that, the calls beyond START wait unsaid)
        self._credit = 0.0  # slow start's half calls
        self.scale = 1.0  # what the server counts of a prompt, over its estimate (a moving average)
        self.running = 0
        self.sent = 0  # calls that went, ever (a slot's number)
        self.accepted = 0  # of those running, the calls the server took
        self.clean = 0  # calls that went through since the limit last moved
        self.refusals = 0  # times the server said no since the limit last rose past where it did
        self.until = 0.0  # the cooldown's end (monotonic)
        self.penalties = 0  # 429s in a row, for the backoff when the server gives no retry-after
        self._unanswered: set[Slot] = set()  # calls sent that the server has not answered yet
        self._waiters: deque[_Waiter] = deque()  # woken first come, first served: never all at once

    @property
    def counts_tokens(self) -> bool:
        """Whether a call's tokens are counted (a bucket of tokens is known): else its size need not be."""
        return any(kind != "requests" for kind in self.buckets)

    def _wake(self, count: int = 1) -> None:
        """Let the ``count`` calls waiting longest look again (each that still cannot go waits anew)."""
        while count > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.gone:
                waiter.woken.set()
                count -= 1

    def _reason(self, cost: dict[str, float]) -> tuple[str, float | None] | None:
        """Why a call of ``cost`` must wait now, and for how long if known; None: it may go."""
        now = time.monotonic()
        if now < self.until:
            return COOLDOWN, self.until - now
        waits = []
        for kind, bucket in self.buckets.items():
            bucket.refill(now)
            if (need := bucket.wait(cost.get(kind, 0.0))) > 0:
                waits.append((min(need, MAX_WAIT), kind))
        if waits:
            need, kind = max(waits)
            return f"rate limit: {kind.replace('_', ' ')} per minute", need
        if self.limit is not None and self.running >= self.limit:
            if not self.answered:
                return FIRST_ANSWER, None
            return f"rate limit: {self.running} of {self.limit} calls under way", None
        return None

    async def acquire(self, prompt_tokens: int, output_cap: int, waiting: Waiting, said: str | None = None) -> Slot:
        """Wait until a call of this size may go (telling ``waiting`` why, once for each reason but ``said``,
        which the caller told already), and take its share. ``prompt_tokens`` is an estimate: it is scaled by
        how far the estimates of the calls before fell from what the server counted."""
        prompt = prompt_tokens * self.scale
        cost = {
            "requests": 1.0,
            "tokens": prompt + output_cap,
            "input_tokens": prompt,
            "output_tokens": float(output_cap),
        }
        while (why := self._reason(cost)) is not None:
            reason, seconds = why
            if reason != said and reason != FIRST_ANSWER:
                said = reason
                waiting(reason, None if seconds is None else round(seconds, 1))
            waiter = _Waiter()
            self._waiters.append(waiter)
            try:
                with anyio.move_on_after(seconds if seconds is not None and seconds < math.inf else 1.0):
                    await waiter.woken.wait()
            finally:
                waiter.gone = True
        # (a call larger than a bucket waited for it full, and empties it: it never owes more than it holds)
        taken = {kind: min(cost[kind], bucket.capacity) for kind, bucket in self.buckets.items()}
        for kind, amount in taken.items():
            self.buckets[kind].level -= amount
        self.running += 1
        self.sent += 1
        slot = Slot(taken=taken, estimate=prompt_tokens, number=self.sent)
        self._unanswered.add(slot)
        return slot

    def release(self, slot: Slot, used: Mapping[str, float] | None) -> None:
        """A call ended: its leave goes back; ``used`` (input_tokens, output_tokens): what it spent, so the
        rest of its share returns to the buckets (None: it failed or was cut short, nothing returns)."""
        self.running -= 1
        if slot.accepted:
            self.accepted -= 1
        self._unanswered.discard(slot)
        if used is not None:
            if slot.estimate and (counted := used.get("input_tokens", 0)) > 0:  # learn how far off estimates are
                self.scale = min(4.0, max(0.5, 0.7 * self.scale + 0.3 * counted / slot.estimate))
            spent = {
                "tokens": used.get("input_tokens", 0) + used.get("output_tokens", 0),
                "input_tokens": used.get("input_tokens", 0),
                "output_tokens": used.get("output_tokens", 0),
            }
            for kind, amount in slot.taken.items():
                bucket = self.buckets[kind]
                if kind in spent and (back := amount - spent[kind]) > 0 and not bucket.stated:
                    bucket.level = min(bucket.capacity, bucket.level + back)
            self.penalties = 0
            if self.limit is not None and not self.learning:
                self.clean += 1
                if self.clean >= 2 * self.limit * 2 ** min(self.refusals, 6):
                    self.limit, self.clean = self.limit + 1, 0
                    self._wake()
        self._wake()

    def accept(self, slot: Slot, limits: RateLimits | None) -> None:
        """The server took the call of ``slot`` (its answer began), stating ``limits`` (None: it states none)."""
        slot.accepted = self.answered = True
        self.accepted += 1
        self._unanswered.remove(slot)
        if limits is not None and limits.buckets:
            self.observe(limits)
        if self.learning and self.limit is not None:
            if not self.buckets and (limits is None or not limits.buckets):
                self.limit, self.learning = None, False  # a server that states no limits: as many as come
                self._wake(len(self._waiters))
            else:  # slow start: one more for every two calls taken (half as much again each round trip)
                self._credit += 0.5
                if self._credit >= 1:
                    self.limit, self._credit = self.limit + 1, self._credit - 1
                    self._wake()

    def limited(self, retry_after: float | None, slot: Slot | None = None) -> float:
        """The server said no (429, 529, overloaded) to ``slot``'s call (not released yet): from now on at most as
        many calls as it holds now may be under way, and the key cools down for ``retry_after`` seconds (else a
        backoff that doubles, to 60 s). The cooldown, in seconds.

        It holds the calls whose answers began and those sent before the refused one whose answers have not
        been read yet (a busy loop reads a quick 429 before the answers that came ahead of it; should the
        server have refused one of those too, its own refusal lowers the limit again)."""
        self.penalties += 1
        ahead = 0 if slot is None else sum(1 for other in self._unanswered if other.number < slot.number)
        held = max(1, self.accepted + ahead)
        if self.limit is not None and not self.learning and held >= self.limit - 1:
            self.refusals += 1  # no again where it said no before: probe above it less often
        elif self.limit is not None and held < self.limit - 1:
            self.refusals = 0  # a new, lower level (the buckets, say): learn it afresh
        self.limit, self.learning, self.clean = held, False, 0
        wait = retry_after if retry_after is not None else min(60.0, 2.0 ** (self.penalties - 1))
        wait = min(wait, MAX_WAIT) if math.isfinite(wait) and wait >= 0 else MAX_WAIT
        self.until = max(self.until, time.monotonic() + wait)
        return wait

    def observe(self, limits: RateLimits) -> None:
        """An answer's headers: the buckets follow what the server says is left, less what the calls sent
        since (not answered yet, so perhaps not counted in it) took."""
        now = time.monotonic()
        for kind, (whole, left, reset) in limits.buckets.items():
            if not (math.isfinite(whole) and math.isfinite(left)):
                continue
            reset = min(reset, MAX_WAIT) if math.isfinite(reset) and reset >= 0 else MAX_WAIT
            left = max(0.0, left - sum(slot.taken.get(kind, 0.0) for slot in self._unanswered))
            rate = (whole - left) / reset if reset > 0 and whole > left else whole / 60
            bucket = self.buckets.get(kind)
            if bucket is None:
                self.buckets[kind] = _Bucket(capacity=whole, level=left, rate=rate, stamp=now, stated=True)
            else:
                bucket.capacity, bucket.level, bucket.rate, bucket.stamp = whole, min(left, whole), rate, now
                bucket.stated = True
        self._wake()  # (the first waiting for a bucket looks again: there may be more left than it thought)


class RateGovernors:
    """The governors of one run, one per (provider, model), seeded from config's ``[rate_limits."p/m"]``."""

    def __init__(self, seeds: Mapping[str, tuple[float | None, float | None]] | None = None):
        self.seeds = dict(seeds or {})
        self.governors: dict[str, RateGovernor] = {}

    def of(self, provider: str, model: str) -> RateGovernor:
        key = f"{provider}/{model}"
        if key not in self.governors:
            rpm, tpm = self.seeds.get(key, (None, None))
            self.governors[key] = RateGovernor(key, rpm=rpm, tpm=tpm)
        return self.governors[key]
