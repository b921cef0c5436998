"""The Anthropic adapter on the real SDK over real HTTP, against a loopback SSE server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.llm_server import LLMServer, Reply, anthropic_reply, error_reply

from zero import errors
from zero.agent import AgentConfig, AgentRun, Event, Message, ModelRequest, RetryPolicy, ToolCall, ToolSpec
from zero.agent.providers.anthropic import AnthropicProvider
from zero.agent.stream import Finish, StreamEvent
from zero.tools import ToolRegistry, Workspace, builtin_tools

pytestmark = pytest.mark.anyio


async def collect(provider: AnthropicProvider, request: ModelRequest) -> list[StreamEvent]:
    return [e async for e in provider.stream(request)]


async def test_text_tool_use_input_json_deltas_and_usage() -> None:
    request = ModelRequest(
        model="claude-sonnet-4-6",
        messages=(
            Message(role="system", content="be brief"),
            Message(role="user", content="hi"),
            Message(
                role="assistant",
                content="Looking.",
                tool_calls=(ToolCall(id="toolu_0", name="glob", arguments={"pattern": "*.md"}),),
            ),
            Message(role="tool", content="README.md", tool_call_id="toolu_0", name="glob"),
        ),
        tools=(ToolSpec(name="read_file", description="Read a file", parameters={"type": "object", "properties": {}}),),
        max_output_tokens=1000,
    )
    with LLMServer() as server:
        server.enqueue(
            anthropic_reply(
                "Let me check that.",
                [("toolu_1", "read_file", {"path": "README.md"})],
                usage=(500, 40),
                cached=300,
                pieces=3,
            )
        )
        provider = AnthropicProvider(api_key="sk-ant-test", base_url=server.url)
        events = await collect(provider, request)
        await provider.aclose()
        sent = server.requests[0]
    assert "".join(e.text for e in events if e.kind == "text") == "Let me check that."
    assert len([e for e in events if e.kind == "tool_call_delta"]) == 3
    done = [e for e in events if e.kind == "tool_call_done"][0]
    assert done.call == ToolCall(id="toolu_1", name="read_file", arguments={"path": "README.md"})
    usage = [e for e in events if e.kind == "usage"][0].usage
    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens) == (500, 300, 40)
    assert events[-1] == Finish("tool_calls")
    assert sent["_path"] == "/v1/messages"
    assert sent["system"] == "be brief" and sent["max_tokens"] == 1000 and sent["stream"] is True
    assert sent["tools"][0] == {
        "name": "read_file",
        "description": "Read a file",
        "input_schema": {"type": "object", "properties": {}},
    }
    assert sent["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_0",
        "name": "glob",
        "input": {"pattern": "*.md"},
    }
    assert sent["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_0", "content": "README.md", "is_error": False}],
    }
    assert sent["_headers"]["authorization"] == "Bearer sk-ant-test"
    assert "anthropic-version" in sent["_headers"]


@pytest.mark.parametrize(
    ("reply", "error", "retryable"),
    [
        (error_reply(401, "invalid x-api-key", "authentication_error"), errors.AuthError, False),
        (
            error_reply(429, "Number of requests exceeded", "rate_limit_error", {"retry-after": "3"}),
            errors.RateLimitError,
            True,
        ),
        (error_reply(529, "Overloaded", "overloaded_error"), errors.OverloadedError, True),
        (error_reply(500, "Internal server error", "api_error"), errors.ServerError, True),
        (
            error_reply(400, "prompt is too long: 210000 tokens > 200000 maximum", "invalid_request_error"),
            errors.ContextTooLongError,
            False,
        ),
    ],
)
async def test_http_errors_become_zero_errors(reply: Reply, error: type[errors.ProviderError], retryable: bool) -> None:
    request = ModelRequest(model="claude-sonnet-4-6", messages=(Message(role="user", content="hi"),))
    with LLMServer() as server:
        server.enqueue(reply)
        provider = AnthropicProvider(api_key="sk-ant-test", base_url=server.url)
        with pytest.raises(error) as caught:
            await collect(provider, request)
        await provider.aclose()
    assert type(caught.value) is error and caught.value.retryable is retryable
    if reply.status == 429:
        assert caught.value.retry_after == 3.0


async def test_an_error_event_mid_stream_is_translated() -> None:
    request = ModelRequest(model="claude-sonnet-4-6", messages=(Message(role="user", content="hi"),))
    reply = anthropic_reply("partial answer")
    reply.events.insert(
        4, ("error", json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    )
    with LLMServer() as server:
        server.enqueue(reply)
        provider = AnthropicProvider(api_key="sk-ant-test", base_url=server.url)
        with pytest.raises(errors.OverloadedError):
            await collect(provider, request)
        await provider.aclose()


async def test_a_stream_cut_mid_way_is_retryable() -> None:
    request = ModelRequest(model="claude-sonnet-4-6", messages=(Message(role="user", content="hi"),))
    reply = anthropic_reply("one two three four", pieces=4)
    reply.cut_after = 5
    with LLMServer() as server:
        server.enqueue(reply)
        provider = AnthropicProvider(api_key="sk-ant-test", base_url=server.url)
        with pytest.raises(errors.ProviderError) as caught:
            await collect(provider, request)
        await provider.aclose()
    assert caught.value.retryable


async def test_agent_runs_tools_through_the_anthropic_adapter(workspace: Path) -> None:
    events: list[Event] = []

    def sink(event: Event) -> None:
        events.append(event)

    with LLMServer() as server:
        server.enqueue(
            error_reply(529, "Overloaded", "overloaded_error"),
            anthropic_reply("", [("toolu_1", "grep", {"pattern": "TODO"})]),
            anthropic_reply("There is one TODO, in src/app.py."),
        )
        provider = AnthropicProvider(api_key="sk-ant-test", base_url=server.url)
        config = AgentConfig(
            provider=provider,
            model="claude-sonnet-4-6",
            tools=ToolRegistry(builtin_tools()),
            workspace=Workspace([workspace]),
            retry=RetryPolicy(retries=2, base_delay=0.01, max_delay=0.02),
        )
        result = await AgentRun(config, "s1", [Message(role="system", content="sys")], sink).run("Find TODOs")
        await provider.aclose()
        last = server.requests[-1]["messages"]
    assert result.status == "completed" and result.output == "There is one TODO, in src/app.py."
    assert last[-1]["content"][0]["type"] == "tool_result"
    assert "src/app.py:2:" in last[-1]["content"][0]["content"]
    # priced from the table: claude-sonnet-4-6 costs $3 / $15 per million
    assert result.usage.cost_usd == pytest.approx(2 * (10 * 3 + 5 * 15) / 1e6)


def test_a_user_note_after_tool_results_joins_the_same_user_turn() -> None:
    from zero.agent.providers.anthropic import _messages

    shaped = _messages(
        (
            Message(role="user", content="go"),
            Message(role="assistant", content="", tool_calls=(ToolCall(id="t1", name="glob", arguments={}),)),
            Message(role="tool", content="a.py", tool_call_id="t1", name="glob"),
            Message(role="user", content="[Zero] wrap up"),
        )
    )
    assert [m["role"] for m in shaped] == ["user", "assistant", "user"]
    assert shaped[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "a.py", "is_error": False},
        {"type": "text", "text": "[Zero] wrap up"},
    ]
