"""The OpenAI adapter on the real SDK over real HTTP, against a loopback SSE server."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from support.llm_server import LLMServer, Reply, error_reply, openai_reply

from zero import errors
from zero.agent import AgentConfig, AgentRun, Event, Message, ModelRequest, RetryPolicy, ToolSpec
from zero.agent.loop import RESTARTED
from zero.agent.providers.openai import OpenAIProvider
from zero.agent.stream import StreamEvent
from zero.tools import ToolRegistry, Workspace, builtin_tools

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(
    model="gpt-4.1-mini",
    messages=(Message(role="system", content="be brief"), Message(role="user", content="hi")),
    tools=(ToolSpec(name="read_file", description="Read a file", parameters={"type": "object", "properties": {}}),),
)


async def collect(provider: OpenAIProvider, request: ModelRequest = REQUEST) -> list[StreamEvent]:
    return [e async for e in provider.stream(request)]


async def test_a_streamed_call_sends_the_keys_and_organisation_not_the_sdks_own_headers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-bench")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-bench")
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "X-Gateway: team-a\nX-Trace: 1")
    with LLMServer() as server:
        server.enqueue(openai_reply("Hi."))
        provider = OpenAIProvider(api_key="sk-test", base_url=server.url + "/v1")
        await collect(provider)
        await provider.aclose()
        headers = server.requests[0]["_headers"]
    assert headers["authorization"] == "Bearer sk-test" and headers["accept"] == "text/event-stream"
    assert headers["openai-organization"] == "org-bench" and headers["openai-project"] == "proj-bench"
    assert headers["x-gateway"] == "team-a" and headers["x-trace"] == "1"
    assert headers["user-agent"].startswith("zero/") and headers["content-type"] == "application/json"
    assert not [k for k in headers if k.startswith("x-stainless")]  # the SDK's telemetry: not the SDK's call


STREAMED_CALL = """
import sys, anyio
from zero.agent import Message, ModelRequest
from zero.agent.providers.openai import OpenAIProvider

async def main():
    provider = OpenAIProvider(api_key="sk-test", base_url=sys.argv[1])
    request = ModelRequest(model="m", messages=(Message(role="user", content="hi"),))
    text = "".join([e.text async for e in provider.stream(request) if e.kind == "text"])
    await provider.aclose()
    print(text, "openai" in sys.modules)

anyio.run(main)
"""


def test_a_streamed_call_never_imports_the_sdk() -> None:
    """Importing ``openai`` takes a fifth of a second of start-up; only an unstreamed call needs it."""
    with LLMServer() as server:
        server.enqueue(openai_reply("Hi."))
        done = subprocess.run(
            [sys.executable, "-c", STREAMED_CALL, server.url + "/v1"], capture_output=True, text=True, check=True
        )
    assert done.stdout.split() == ["Hi.", "False"]


async def test_text_tool_arguments_and_usage_arrive_as_zero_events() -> None:
    with LLMServer() as server:
        server.enqueue(
            openai_reply(
                "Hello there, friend.",
                [("call_a", "read_file", {"path": "README.md", "start_line": 2})],
                usage=(120, 30),
                cached=100,
                pieces=4,
            )
        )
        provider = OpenAIProvider(api_key="sk-test", base_url=server.url + "/v1")
        events = await collect(provider)
        await provider.aclose()
        sent = server.requests[0]
    text = "".join(e.text for e in events if e.kind == "text")
    deltas = [e for e in events if e.kind == "tool_call_delta"]
    done = [e for e in events if e.kind == "tool_call_done"]
    usage = [e for e in events if e.kind == "usage"]
    assert text == "Hello there, friend."
    assert len(deltas) == 4  # the arguments came in several chunks
    assert done[0].call.id == "call_a"
    assert done[0].call.arguments == {"path": "README.md", "start_line": 2}
    assert usage[0].usage.prompt_tokens == 120 and usage[0].usage.cached_tokens == 100
    assert events[-1].kind == "finish" and events[-1].reason == "tool_calls"
    assert sent["_path"] == "/v1/chat/completions"
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["messages"][0] == {"role": "system", "content": "be brief"}
    assert sent["tools"][0]["function"]["name"] == "read_file"
    assert sent["_headers"]["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(
    ("reply", "error", "retryable"),
    [
        (error_reply(401, "Incorrect API key provided", "invalid_request_error"), errors.AuthError, False),
        (
            error_reply(429, "Rate limit reached", "rate_limit_exceeded", {"retry-after": "7"}),
            errors.RateLimitError,
            True,
        ),
        (error_reply(500, "The server had an error", "server_error"), errors.ServerError, True),
        (error_reply(503, "The engine is currently overloaded", "server_error"), errors.OverloadedError, True),
        (
            error_reply(400, "This model's maximum context length is 128000 tokens", "invalid_request_error"),
            errors.ContextTooLongError,
            False,
        ),
        (error_reply(404, "The model does not exist", "invalid_request_error"), errors.BadRequestError, False),
    ],
)
async def test_http_errors_become_zero_errors(reply: Reply, error: type[errors.ProviderError], retryable: bool) -> None:
    with LLMServer() as server:
        server.enqueue(reply)
        provider = OpenAIProvider(api_key="sk-test", base_url=server.url)
        with pytest.raises(error) as caught:
            await collect(provider)
        await provider.aclose()
    assert type(caught.value) is error
    assert caught.value.retryable is retryable
    assert caught.value.status == reply.status
    assert isinstance(caught.value.__cause__, Exception)  # translated once, with `from`
    if reply.status == 429:
        assert caught.value.retry_after == 7.0


async def test_a_stream_cut_mid_way_is_a_dropped_stream() -> None:
    reply = openai_reply("one two three four five six", pieces=6)
    reply.cut_after = 4
    with LLMServer() as server:
        server.enqueue(reply)
        provider = OpenAIProvider(api_key="sk-test", base_url=server.url)
        with pytest.raises(errors.StreamDroppedError) as caught:
            await collect(provider)
        await provider.aclose()
    assert caught.value.retryable


async def test_a_connection_refused_is_a_connection_error() -> None:
    provider = OpenAIProvider(api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(errors.ProviderConnectionError, match="cannot reach the openai API"):
        await collect(provider)
    await provider.aclose()


@asynccontextmanager
async def _run(server_url: str, workspace: Path, events: list[Event]) -> AsyncIterator[AgentRun]:
    def sink(event: Event) -> None:
        events.append(event)

    config = AgentConfig(
        provider=OpenAIProvider(api_key="sk-test", base_url=server_url),
        model="gpt-4.1-mini",
        tools=ToolRegistry(builtin_tools()),
        workspace=Workspace([workspace]),
        retry=RetryPolicy(retries=2, base_delay=0.01, max_delay=0.05),
    )
    try:
        yield AgentRun(config, "s1", [Message(role="system", content="sys")], sink)
    finally:
        await config.provider.aclose()


async def test_retry_after_429_and_500_then_success(workspace: Path) -> None:
    events: list[Event] = []
    with LLMServer() as server:
        server.enqueue(
            error_reply(429, "slow down", "rate_limit_exceeded", {"retry-after-ms": "20"}),
            error_reply(500, "oops", "server_error"),
            openai_reply("Done."),
        )
        async with _run(server.url, workspace, events) as run:
            result = await run.run("hi")
        assert len(server.requests) == 3
    retries = [e for e in events if e.kind == "retry"]
    assert [r.code for r in retries] == ["rate_limited", "server_error"]
    assert retries[0].delay_seconds == pytest.approx(0.02)  # Retry-After honoured
    assert result.status == "completed" and result.output == "Done."


async def test_a_retried_stream_says_the_answer_starts_over_and_shows_the_new_one_whole(workspace: Path) -> None:
    """A sampling model does not repeat itself: the retry's answer is a different text, shown whole after
    a restart marker, never spliced onto what the broken stream had shown."""
    events: list[Event] = []
    cut = openai_reply("Alpha beta gamma delta", pieces=4)
    cut.cut_after = 3  # role chunk + two text chunks, then the connection drops
    with LLMServer() as server:
        server.enqueue(cut, openai_reply("Something else entirely, said again.", pieces=4))
        async with _run(server.url, workspace, events) as run:
            result = await run.run("hi")
    kinds = [e.kind for e in events]
    restart = max(i for i, e in enumerate(events) if e.kind == "warning" and e.code == RESTARTED)
    before = "".join(e.delta for e in events[:restart] if e.kind == "text")
    after = "".join(e.delta for e in events[restart:] if e.kind == "text")
    assert before and "Alpha beta gamma".startswith(before.strip())  # what the first stream had shown
    assert after == result.output == "Something else entirely, said again."
    assert kinds.count("retry") == 1 and kinds.index("retry") < restart


async def test_agent_reads_a_file_over_the_real_sdk(workspace: Path) -> None:
    events: list[Event] = []
    with LLMServer() as server:
        server.enqueue(
            openai_reply("Reading.", [("call_1", "read_file", {"path": "README.md"})]),
            openai_reply("The answer is 42."),
        )
        async with _run(server.url, workspace, events) as run:
            result = await run.run("What is the answer?")
        second = server.requests[1]["messages"]
    assert result.status == "completed" and result.output == "The answer is 42."
    assert second[2]["tool_calls"][0]["function"]["name"] == "read_file"
    assert second[3]["role"] == "tool" and "The answer is 42." in second[3]["content"]
    assert second[3]["tool_call_id"] == "call_1"


async def test_a_stream_without_a_finish_reason_is_dropped() -> None:
    reply = openai_reply("cut short")
    reply.events = [e for e in reply.events if '"finish_reason": "stop"' not in e[1]]
    with LLMServer() as server:
        server.enqueue(reply)
        provider = OpenAIProvider(api_key="sk-test", base_url=server.url)
        with pytest.raises(errors.StreamDroppedError, match="ended before the model finished"):
            await collect(provider)
        await provider.aclose()


def test_arguments_nested_past_reading_are_a_parse_error_the_model_reads() -> None:
    from zero.agent.provider import decode_call

    deep = decode_call("call_1", "write_file", ['{"a": ' * 3000, "1", "}" * 3000])  # once "internal error"
    assert deep.arguments == {} and deep.parse_error == "arguments are nested too deeply to read"
