"""Rate-limit benchmark: a fan-out on one key against a server that enforces its limits with 429s.

A loopback server takes 0.2 s a model call and enforces two limits the way providers do: at most 10
requests in flight (past that: a 429 with ``retry-after-ms``) and a tokens-per-minute bucket (a call
costs its prompt, about four characters a token, plus the output cap it asks for, as OpenAI counts;
the bucket refills continuously; past it: a 429 saying when it will hold the call). Each answer carries
the real headers, OpenAI's (``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``) or Anthropic's
(``anthropic-ratelimit-{requests,input-tokens,output-tokens}-{limit,remaining,reset}``), in each
provider's own streaming format. The "minute" is 6 s here, so the bench runs in seconds.

A team of 50 members, each making 3 calls (two tool calls, then an answer; one retry each, the team
default), runs twice per provider: without the rate governor (each call retries on its own, as before
``agent/governor.py``) and with it. Printed: failed members, 429s received, calls made, wall time, and
the ideal wall time the limits allow: the longest of the 3 calls in a row each member makes, 150 calls
10 at a time, and the tokens past the bucket's first fill at its refill rate.

    python bench/bench_ratelimit.py
    python bench/bench_ratelimit.py --members 100 --tpm 200000
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.llm_server import LLMServer, Reply, anthropic_reply, error_reply, openai_reply  # noqa: E402

CALL_SECONDS = 0.2
IN_FLIGHT = 10
MINUTE = 6.0  # the server's "minute": its token bucket refills in this many seconds
OUTPUT_CAP = 512


@dataclass
class Limits:
    """The server's side: what is in flight, the token buckets, and what it refused."""

    tokens: float  # tokens a "minute": OpenAI's one bucket (prompt and output cap), Anthropic's input bucket
    provider: str

    def __post_init__(self) -> None:
        sizes = {"tokens": self.tokens} if self.provider == "openai" else {
            "input_tokens": self.tokens, "output_tokens": self.tokens / 4}  # fmt: skip
        self.size, self.level = dict(sizes), dict(sizes)
        self.spent = dict.fromkeys(sizes, 0.0)
        self.stamp = time.monotonic()
        self.ends: list[float] = []  # when each call in flight ends
        self.refused = self.calls = 0
        self.why: dict[str, int] = {}  # the 429s by what they said
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        prompt = len(json.dumps([request.get("messages"), request.get("system"), request.get("tools")])) / 4
        cost = {"tokens": prompt + OUTPUT_CAP, "input_tokens": prompt, "output_tokens": float(OUTPUT_CAP)}
        with self.lock:
            now = time.monotonic()
            for kind, size in self.size.items():
                self.level[kind] = min(size, self.level[kind] + (now - self.stamp) * size / MINUTE)
            self.stamp = now
            self.ends = [end for end in self.ends if end > now]
            if len(self.ends) >= IN_FLIGHT:
                return self._refuse(min(self.ends) - now, "too many requests in flight")
            short = max((cost[k] - self.level[k]) * MINUTE / self.size[k] for k in self.size)
            if short > 0:
                return self._refuse(short, "tokens per minute")
            for kind in self.size:
                self.level[kind] -= cost[kind]
                self.spent[kind] += cost[kind]
            self.calls += 1
            self.ends.append(now + CALL_SECONDS)
            headers = self._headers()
        done = sum(m["role"] == "assistant" for m in request["messages"])
        make = openai_reply if self.provider == "openai" else anthropic_reply
        counted = (int(prompt), 40)  # the usage it reports is what it counted
        if done < 2:
            reply = make("Looking around.", [(f"call_{done}", "list_directory", {"path": "."})], usage=counted)
        else:
            reply = make("The folder holds a README and a src package.", usage=counted)
        # The status and headers at once, the answer streamed over the call's time, as real servers do.
        reply.headers, reply.pace = headers, CALL_SECONDS / max(1, len(reply.events) - 1)
        return reply

    def ideal(self, calls: int) -> float:
        """The shortest wall time these limits allow ``calls`` calls (3 in a row per member)."""
        waves = math.ceil(calls / IN_FLIGHT) * CALL_SECONDS
        per_call = {k: self.spent[k] / max(1, self.calls) for k in self.size}
        tokens = max(max(0.0, calls * per_call[k] - self.size[k]) * MINUTE / self.size[k] for k in self.size)
        return max(3 * CALL_SECONDS, waves, tokens + CALL_SECONDS)

    def _headers(self) -> dict[str, str]:
        refill = {k: (self.size[k] - self.level[k]) * MINUTE / self.size[k] for k in self.size}
        if self.provider == "openai":
            return {
                "x-ratelimit-limit-requests": "10000",
                "x-ratelimit-remaining-requests": "9999",
                "x-ratelimit-reset-requests": "6ms",
                "x-ratelimit-limit-tokens": str(int(self.size["tokens"])),
                "x-ratelimit-remaining-tokens": str(int(self.level["tokens"])),
                "x-ratelimit-reset-tokens": f"{refill['tokens']:.3f}s",
            }
        headers = {
            "anthropic-ratelimit-requests-limit": "10000",
            "anthropic-ratelimit-requests-remaining": "9999",
            "anthropic-ratelimit-requests-reset": _at(0.006),
        }
        for kind in self.size:
            name = kind.replace("_", "-")
            headers[f"anthropic-ratelimit-{name}-limit"] = str(int(self.size[kind]))
            headers[f"anthropic-ratelimit-{name}-remaining"] = str(int(self.level[kind]))
            headers[f"anthropic-ratelimit-{name}-reset"] = _at(refill[kind])
        return headers

    def _refuse(self, wait: float, what: str) -> Reply:
        self.refused += 1
        self.why[what] = self.why.get(what, 0) + 1
        if self.provider == "openai":
            headers = {"retry-after-ms": str(max(1, math.ceil(wait * 1000))), **self._headers()}
            return error_reply(429, f"Rate limit reached: {what}", "rate_limit_exceeded", headers)
        headers = {"retry-after": str(max(1, math.ceil(wait))), **self._headers()}  # whole seconds, as Anthropic
        return error_reply(429, f"Rate limit reached: {what}", "rate_limit_error", headers)


def _at(seconds: float) -> str:
    """An RFC 3339 time ``seconds`` from now, as Anthropic's reset headers give it."""
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def run_team(provider_name: str, members: int, tpm: float, governed: bool) -> dict[str, Any]:
    import anyio

    from zero.agent import PriceTable, RateGovernors
    from zero.agent.providers.anthropic import AnthropicProvider
    from zero.agent.providers.openai import OpenAIProvider
    from zero.orchestrator import TeamRunner, build_plan
    from zero.sessions import FileSessionStore
    from zero.specialists import AgentContext, SpecialistRegistry
    from zero.tools import Workspace

    class Ungoverned(RateGovernors):
        """No governor: each call retries on its own (what Zero did before ``agent/governor.py``)."""

        def of(self, provider: str, model: str) -> Any:
            return None

    model = "gpt-4.1-mini" if provider_name == "openai" else "claude-sonnet-4-6"
    limits = Limits(tokens=tpm, provider=provider_name)
    with tempfile.TemporaryDirectory(prefix="zero-bench-ratelimit-") as tmp, LLMServer(limits) as server:
        ws = Path(tmp) / "ws"
        (ws / "src").mkdir(parents=True)
        (ws / "README.md").write_text("# bench\n")
        body = "".join(
            f'[[members]]\nname = "m{i}"\nspecialist = "explorer"\nprompt = "Map the folder ({i})."\n'
            for i in range(members)
        )
        team = Path(tmp) / "team.toml"
        team.write_text(
            f'name = "fan-out"\n[defaults]\nmodel = "{model}"\nmax_output_tokens = {OUTPUT_CAP}\n'
            f"[scheduler]\nmax_concurrency = {members}\n{body}"
        )
        registry = SpecialistRegistry.load(ws)
        prices = PriceTable.builtin()
        plan = build_plan(
            team, registry, provider=provider_name, model=model, permission_mode="auto", prices=prices, workspace=ws
        )
        provider: Any = (
            OpenAIProvider(api_key="sk-bench", base_url=server.url + "/v1")
            if provider_name == "openai"
            else AnthropicProvider(api_key="sk-ant-bench", base_url=server.url)
        )
        ctx = AgentContext(
            store=FileSessionStore(Path(tmp) / "sessions"),
            registry=registry,
            workspace=Workspace([ws]),
            provider=provider,
            model=model,
            providers=lambda name: provider,
            prices=prices,
            governors=RateGovernors() if governed else Ungoverned(),
        )

        async def main() -> Any:
            result = await TeamRunner(plan, ctx).run()
            await provider.aclose()
            return result

        started = time.perf_counter()
        result = anyio.run(main)
        wall = time.perf_counter() - started
    ideal = limits.ideal(members * 3)
    failed = [m for m in result.members if m.status != "completed"]
    return {
        "failed": len(failed),
        "refused": limits.refused,
        "calls": limits.calls,
        "wall": wall,
        "ideal": ideal,
        "reasons": sorted({m.reason.split(":")[0] for m in failed})[:2],
        "why": limits.why,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--tpm", type=float, default=150_000, help="the token bucket's size (a 6 s 'minute')")
    args = parser.parse_args()
    print(
        f"{args.members} members x 3 calls; server: {IN_FLIGHT} in flight, {args.tpm:,.0f} tokens a {MINUTE:.0f} s "
        f"'minute', {CALL_SECONDS} s a call; load {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    columns = ("failed", 7), ("429s", 6), ("429/calls", 10), ("wall", 7), ("ideal", 7), ("x ideal", 8)
    print(f"{'provider':<10} {'governor':<9} " + " ".join(f"{name:>{width}}" for name, width in columns))
    for provider in ("openai", "anthropic"):
        for governed in (False, True):
            r = run_team(provider, args.members, args.tpm, governed)
            share = r["refused"] / max(1, r["calls"])
            print(
                f"{provider:<10} {'on' if governed else 'off':<9} {r['failed']:>7} {r['refused']:>6} {share:>9.1%} "
                f"{r['wall']:>6.2f}s {r['ideal']:>6.2f}s {r['wall'] / r['ideal']:>7.2f}x"
                + "  429s: "
                + (", ".join(f"{n} {what}" for what, n in r["why"].items()) or "none")
                + (f"; failed: {', '.join(r['reasons'])}" if r["failed"] else "")
            )


if __name__ == "__main__":
    main()
