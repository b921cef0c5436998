"""The rate governor over real HTTP: a fan-out on one key waits its turn instead of burning its retries on
429s, the servers' rate-limit headers fill its buckets, and each way of saying "wait" is read."""

from __future__ import annotations

import email.utils
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.llm_server import LLMServer, Reply, error_reply, openai_reply

from zero import errors
from zero.agent import AgentConfig, AgentRun, Event, Message, RateGovernor, RetryPolicy
from zero.agent.governor import limits_from_headers, parse_retry_after
from zero.agent.providers._errors import status_error
from zero.agent.providers.openai import OpenAIProvider
from zero.tools import ToolRegistry, Workspace

pytestmark = pytest.mark.anyio


class Window:
    """A server's rate limit: ``allowed`` requests a window of ``seconds``; more get a 429 saying when the
    window ends (``retry-after-ms``)."""

    def __init__(self, allowed: int, seconds: float):
        self.allowed, self.seconds = allowed, seconds
        self.start, self.used, self.refused = time.monotonic(), 0, 0
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        with self.lock:
            now = time.monotonic()
            if now - self.start >= self.seconds:
                self.start, self.used = now, 0
            if self.used >= self.allowed:
                self.refused += 1
                left = self.seconds - (now - self.start)
                return error_reply(429, "Rate limit reached for requests", "rate_limit_exceeded",
                                   {"retry-after-ms": str(int(left * 1000) + 1)})  # fmt: skip
            self.used += 1
        return openai_reply("done", usage=(10, 2))


async def fan_out(url: str, workspace: Path, governor: RateGovernor | None, agents: int) -> list[list[Event]]:
    """``agents`` runs at once on one key, each allowed one retry (a team's default); their events."""
    provider = OpenAIProvider(api_key="sk-test", base_url=url)
    logs: list[list[Event]] = [[] for _ in range(agents)]
    results: list[str] = []

    async def one(i: int) -> None:
        config = AgentConfig(
            provider=provider,
            model="gpt-4.1-mini",
            tools=ToolRegistry([]),
            workspace=Workspace([workspace]),
            retry=RetryPolicy(retries=1, base_delay=0.01, max_delay=0.05),
            governor=governor,
        )
        run = AgentRun(config, f"agent_{i}", [Message(role="system", content="sys")], logs[i].append)
        results.append((await run.run("hi")).status)

    async with anyio.create_task_group() as tg:
        for i in range(agents):
            tg.start_soon(one, i)
    await provider.aclose()
    assert results == ["completed"] * agents, results
    return logs


async def test_a_fan_out_on_one_key_waits_its_turn_instead_of_failing(workspace: Path) -> None:
    window = Window(allowed=4, seconds=0.4)
    with LLMServer(window) as server:
        logs = await fan_out(server.url, workspace, RateGovernor("openai/gpt-4.1-mini"), agents=16)
    waits = [e for log in logs for e in log if e.kind == "rate_limit"]
    assert window.refused > 0 and waits  # the server said no, and the calls waited
    assert not [e for log in logs for e in log if e.kind == "retry"]  # none of it a retry
    told = next(e for e in waits if "Rate limit reached" in e.reason)
    assert told.wait_seconds is not None and 0 <= told.wait_seconds <= 0.4  # the server's retry-after-ms


async def test_without_the_governor_the_same_fan_out_fails(workspace: Path) -> None:
    with LLMServer(Window(allowed=4, seconds=0.4)) as server, pytest.raises(AssertionError, match="failed"):
        await fan_out(server.url, workspace, None, agents=16)


class InFlight:
    """A server that holds at most ``allowed`` calls at once (a limit no header states) and says so past it
    with a 429; each answer streams over about 0.2 s, its headers (a large token limit) sent at once."""

    def __init__(self, allowed: int):
        self.allowed, self.ends, self.refused, self.most = allowed, list[float](), 0, 0
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        headers = {"x-ratelimit-limit-tokens": "1000000", "x-ratelimit-remaining-tokens": "999000",
                   "x-ratelimit-reset-tokens": "60ms"}  # fmt: skip
        with self.lock:
            now = time.monotonic()
            self.ends = [end for end in self.ends if end > now]
            if len(self.ends) >= self.allowed:
                self.refused += 1
                return error_reply(429, "Too many requests in flight", "rate_limit_exceeded",
                                   {"retry-after-ms": str(int((min(self.ends) - now) * 1000) + 1)})  # fmt: skip
            self.ends.append(now + 0.2)
            self.most = max(self.most, len(self.ends))
        reply = openai_reply("done", usage=(10, 2), pieces=4)
        reply.headers, reply.pace = headers, 0.2 / len(reply.events)
        return reply


async def test_a_limit_no_header_states_costs_a_few_refusals_not_one_a_round(workspace: Path) -> None:
    """Slow start finds the server's limit of 4 calls in flight, the governor then holds it, and probes above
    it less and less often: a handful of 429s over 24 calls, where a burst would get 20 at once."""
    server_limit = InFlight(allowed=4)
    governor = RateGovernor("openai/gpt-4.1-mini")
    with LLMServer(server_limit) as server:
        logs = await fan_out(server.url, workspace, governor, agents=24)
    assert 1 <= server_limit.refused <= 6, server_limit.refused
    assert governor.limit is not None and 2 <= governor.limit <= 4 and not governor.learning  # (what it held)
    assert not [e for log in logs for e in log if e.kind == "retry"]


async def test_a_refusal_read_before_the_answers_ahead_of_it_counts_them_as_held() -> None:
    # A busy loop reads a quick 429 before the answers the server began ahead of it: the limit is what the server
    # held (the CI run that read one answer of four learned a limit of 1), and a refusal of one of those lowers it.
    governor = RateGovernor("openai/gpt-4.1-mini")
    first, second, third, refused = [await governor.acquire(10, 10, lambda why, seconds: None) for _ in range(4)]
    governor.accept(first, limits_from_headers({"x-ratelimit-limit-tokens": "1000000"}))
    governor.limited(0.0, refused)
    assert governor.limit == 3  # the one that answered and the two sent before the refused one
    governor.release(refused, None)
    governor.limited(0.0, third)
    assert governor.limit == 2


async def test_a_server_that_states_no_limits_gets_every_call_once_it_first_answers(workspace: Path) -> None:
    governor = RateGovernor("openai/gpt-4.1-mini")
    with LLMServer(lambda request: openai_reply("done", usage=(10, 2))) as server:
        logs = await fan_out(server.url, workspace, governor, agents=16)
    assert governor.limit is None and not governor.learning  # as many as come, from its first answer on
    assert not [e for log in logs for e in log if e.kind == "rate_limit"]  # (the first answer's wait is not said)


async def test_the_servers_headers_fill_the_buckets(workspace: Path) -> None:
    headers = {"x-ratelimit-limit-requests": "2", "x-ratelimit-remaining-requests": "0",
               "x-ratelimit-reset-requests": "300ms"}  # fmt: skip
    with LLMServer(lambda request: Reply(**{**vars(openai_reply("ok")), "headers": headers})) as server:
        governor = RateGovernor("openai/gpt-4.1-mini")
        first = await fan_out(server.url, workspace, governor, agents=1)  # its answer says none are left
        started = time.monotonic()
        logs = await fan_out(server.url, workspace, governor, agents=2)
        took = time.monotonic() - started
    assert not [e for e in first[0] if e.kind == "rate_limit"]
    waits = [e for log in logs for e in log if e.kind == "rate_limit"]
    assert waits and all(e.reason == "rate limit: requests per minute" for e in waits)
    assert took >= 0.25  # the two waited for the bucket to refill (2 requests in 300 ms)
    assert governor.buckets["requests"].capacity == 2


def test_every_way_a_server_says_how_long_to_wait_is_read() -> None:
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert 28 <= (parse_retry_after({"retry-after": later}) or 0) <= 30  # an HTTP date
    assert parse_retry_after({"retry-after": "soon"}) is None
    openai = limits_from_headers(
        {
            "x-ratelimit-limit-tokens": "200000",
            "x-ratelimit-remaining-tokens": "150000",
            "x-ratelimit-reset-tokens": "6m0s",
            "x-ratelimit-limit-requests": "500",
            "x-ratelimit-remaining-requests": "499",
            "x-ratelimit-reset-requests": "120ms",
        }  # fmt: skip
    )
    assert openai is not None and openai.buckets == {"requests": (500, 499, 0.12), "tokens": (200000, 150000, 360)}
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 20))
    anthropic = limits_from_headers(
        {
            "anthropic-ratelimit-output-tokens-limit": "8000",
            "anthropic-ratelimit-output-tokens-remaining": "10",
            "anthropic-ratelimit-output-tokens-reset": soon,
        }  # fmt: skip
    )
    assert anthropic is not None and 18 <= anthropic.buckets["output_tokens"][2] <= 20


def test_a_spent_quota_is_said_and_never_waited_for() -> None:
    error = status_error("openai", 429, "You exceeded your current quota", {}, "insufficient_quota")
    assert isinstance(error, errors.QuotaExhaustedError) and not error.retryable
    assert "check the plan and billing" in str(error)
    refused = status_error("openai", 503, "busy", {"x-should-retry": "false"})
    assert isinstance(refused, errors.OverloadedError) and not refused.retryable  # the server said not to


def test_a_rate_limit_in_your_config_paces_the_run_and_says_so(workspace: Path, tmp_path: Path) -> None:
    """``[rate_limits."scripted/scripted"] rpm = 1``: the first call takes the minute's one request, the second
    waits for the next, and stream-json says so as it starts waiting."""
    import json
    import os
    import subprocess

    from support.cli import ZERO, write_script

    config = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[rate_limits."scripted/scripted"]\nrpm = 1\n')
    script = write_script(
        tmp_path / "s.toml",
        '[[turns]]\nmatch = { turn = 1 }\ntool_calls = [{ name = "list_directory", arguments = {} }]\n'
        '[[turns]]\nmatch = { turn = 2 }\ntext = "done"\n',
    )
    args = ["exec", "go", "--provider", "scripted", "--script", str(script), "--cwd", str(workspace)]
    with subprocess.Popen([ZERO, *args, "--output-format", "stream-json"], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                event = json.loads(line)
                if event["type"] == "rate_limit":
                    break
            else:
                raise AssertionError("no rate_limit event")
        finally:
            proc.kill()
    assert event["reason"] == "rate limit: requests per minute" and 55 <= event["waitSeconds"] <= 60


def test_a_servers_word_of_years_makes_no_call_wait_past_the_most() -> None:
    from zero.agent.governor import MAX_WAIT, RateLimits

    governor = RateGovernor("openai/gpt-4.1-mini")
    assert governor.limited(315_360_000.0) == MAX_WAIT == governor.limited(float("inf"))
    governor.observe(RateLimits(buckets={"requests": (10.0, 0.0, float("inf"))}))
    wait = governor._reason({"requests": 1.0})
    assert wait is not None and wait[1] is not None and wait[1] <= MAX_WAIT


async def test_what_a_call_did_not_use_goes_back_only_to_a_bucket_config_seeded() -> None:
    # OpenAI counts a call's output cap against its tokens and gives none of it back: a refund the server does
    # not make would let the next calls past its limit (the bench's token 429s: 5 of 150 calls, now 0-1).
    seeded, stated = RateGovernor("a/m", tpm=10_000), RateGovernor("b/m")
    limits = limits_from_headers({"x-ratelimit-limit-tokens": "10000", "x-ratelimit-remaining-tokens": "10000"})
    assert limits is not None
    stated.observe(limits)
    for governor in (seeded, stated):
        slot = await governor.acquire(1_000, 4_000, lambda why, seconds: None)
        assert 4_990 <= governor.buckets["tokens"].level <= 5_010  # the prompt and the whole cap, up front
        governor.release(slot, {"input_tokens": 1_000, "output_tokens": 50})
    assert seeded.buckets["tokens"].level >= 8_940  # the 3,950 it did not use came back
    assert stated.buckets["tokens"].level <= 5_020  # as the server will say: only its refill
