"""The agent against an OpenAI-compatible server as rude as the local ones (llama-cpp-python, vLLM):
the real ``openai`` SDK over real HTTP, each misbehaviour switched on in ``LocalModel``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.llm_server import LLMServer, Reply, error_reply, unanswered
from support.local_server import ROLES_ERROR, Answer, LocalModel, turns

from zero.agent import AgentConfig, AgentRun, Emit, Event, Message, ModelRequest, RetryPolicy, RunResult, Usage
from zero.agent.providers.openai import OpenAIProvider
from zero.tools import ToolRegistry, Workspace, builtin_tools

pytestmark = pytest.mark.anyio

READ = Answer("", [("read_file", {"path": "README.md"})])
DONE = Answer("The answer is 42.")


async def run_against(
    model: LocalModel, workspace: Path, prompt: str = "What is the answer?", **config: Any
) -> tuple[RunResult, list[Event], list[dict[str, Any]]]:
    with LLMServer(model) as server:
        result, events = await run_at(server.url, workspace, prompt, **config)
        return result, events, server.requests


async def run_at(
    url: str, workspace: Path, prompt: str = "What is the answer?", **config: Any
) -> tuple[RunResult, list[Event]]:
    """A run against the server at ``url``."""
    events: list[Event] = []
    run = agent_at(url, workspace, events.append, **config)
    try:
        return await run.run(prompt), events
    finally:
        await run.config.provider.aclose()


def agent_at(url: str, workspace: Path, emit: Emit, *, timeouts: float = 600.0, **config: Any) -> AgentRun:
    """An agent of the server at ``url``, whose connect and read timeouts are ``timeouts``."""
    config.setdefault("tools", ToolRegistry(builtin_tools()))
    config.setdefault("retry", RetryPolicy(retries=3, base_delay=0.001, max_delay=0.002))
    provider = OpenAIProvider(
        api_key=None,
        base_url=url + "/v1",
        name="openai-compatible",
        connect_timeout=timeouts,
        read_timeout=timeouts,
    )
    agent = AgentConfig(provider=provider, model="local-llm", workspace=Workspace([workspace]), **config)
    return AgentRun(agent, "s1", [Message(role="system", content="You are a test agent.")], emit)


def kinds(events: list[Event], kind: str) -> list[Any]:
    return [e for e in events if e.kind == kind]


async def test_a_tool_call_without_text_is_sent_back_with_empty_content(workspace: Path) -> None:
    # llama-cpp-python answers 500 to "content": null and to no "content" at all, on every turn after a
    # tool call; Zero sent the one, then the other
    result, events, requests = await run_against(LocalModel(turns(READ, DONE)), workspace)
    assert result.status == "completed" and result.output == "The answer is 42."
    assistant = next(m for m in requests[1]["messages"] if m["role"] == "assistant")
    assert assistant["content"] == "" and assistant["tool_calls"][0]["function"]["name"] == "read_file"
    assert len(requests) == 2 and not kinds(events, "retry")


async def test_tools_are_offered_with_tool_choice_auto(workspace: Path) -> None:
    # llama-cpp-python ignores tools that come without tool_choice
    result, _, requests = await run_against(LocalModel(turns(READ, DONE)), workspace)
    assert requests[0]["tool_choice"] == "auto" and result.output == "The answer is 42."


async def test_missing_usage_is_estimated_and_marked(workspace: Path) -> None:
    result, events, _ = await run_against(LocalModel(turns(READ, DONE), usage=False), workspace)
    usages = kinds(events, "usage")
    assert len(usages) == 2 and all(u.estimated and u.prompt_tokens > 10 for u in usages)  # never 0
    assert result.usage.estimated and result.usage.total_tokens > 20
    assert result.usage.cost_usd is None  # and an unpriced model's cost is unknown, not $0


async def test_reported_usage_is_not_marked_estimated(workspace: Path) -> None:
    result, events, _ = await run_against(LocalModel(turns(DONE), usage=True), workspace)
    assert not result.usage.estimated and not kinds(events, "usage")[0].estimated


async def test_a_long_answer_is_cut_at_the_output_cap_and_ends_output_capped(workspace: Path) -> None:
    long = Answer("word " * 400)
    result, events, requests = await run_against(LocalModel(turns(long)), workspace, max_output_tokens=20)
    assert requests[0]["max_tokens"] == 20  # the cap reaches the server
    assert result.status == "output_capped" and len(result.output) == 80
    assert "output cap of 20 tokens" in (result.error or "")
    assert [w.code for w in kinds(events, "warning")] == ["output_capped"]


async def test_a_tool_call_cut_at_the_output_cap_is_reported_as_cut_not_run(workspace: Path) -> None:
    write = Answer("", [("write_file", {"path": "big.txt", "content": "x" * 400})])
    result, events, requests = await run_against(LocalModel(turns(write, DONE)), workspace, max_output_tokens=30)
    assert not (workspace / "big.txt").exists()  # never run with half its arguments
    told = next(m for m in requests[1]["messages"] if m["role"] == "tool")["content"]
    assert "cut at the output cap (30 tokens)" in told and "was not run" in told
    assert result.status == "completed"


async def test_a_stream_that_closes_before_its_first_chunk_is_retried_once_and_suggests_context(
    workspace: Path,
) -> None:
    model = LocalModel(turns(DONE), context_chars=10)
    result, events, requests = await run_against(model, workspace, tools=ToolRegistry([]))
    assert len(requests) == 2  # one retry, not three (each one re-reads the whole prompt)
    assert result.status == "failed" and result.error_code == "empty_response"
    assert "context" in (result.error or "")
    # with tools, the empty stream is first taken for the tool mode: unstreamed, the server says why
    result, events, requests = await run_against(LocalModel(turns(DONE), context_chars=10), workspace)
    assert [r["stream"] for r in requests] == [True, False]
    assert result.error_code == "context_too_long" and "exceed context window" in (result.error or "")


class FailsFirst(LocalModel):
    """Answers its first request with an HTTP error, then like a server."""

    status: int = 400

    def __call__(self, request: dict[str, Any]) -> Reply:
        if not getattr(self, "failed", False):
            self.failed = True
            return error_reply(self.status, "the request is wrong", "invalid_request_error")
        return super().__call__(request)


@pytest.mark.parametrize(("status", "requests_made"), [(400, 1), (404, 1), (422, 1), (409, 2), (408, 2)])
async def test_a_client_error_other_than_408_409_429_is_never_retried(
    workspace: Path, status: int, requests_made: int
) -> None:
    model = FailsFirst(turns(DONE))
    model.status = status
    result, _, requests = await run_against(model, workspace)
    assert len(requests) == requests_made
    assert result.status == ("failed" if requests_made == 1 else "completed")


async def test_an_empty_stream_for_tools_falls_back_to_unstreamed_and_keeps_it(workspace: Path) -> None:
    # llama-cpp-python: a streamed request with tool_choice "auto" gets a 200 and an empty stream
    result, events, requests = await run_against(LocalModel(turns(READ, DONE), auto_stream_empty=True), workspace)
    assert result.status == "completed" and result.output == "The answer is 42."
    assert [r["stream"] for r in requests] == [True, False, False]  # tried once, then kept for the model
    warnings = [w for w in kinds(events, "warning") if w.code == "tool_mode"]
    assert len(warnings) == 1 and "stream_tools = false" in warnings[0].message
    assert '[servers."http://127.0.0.1:' in warnings[0].message


async def test_a_server_refusing_tool_choice_is_asked_without_it(workspace: Path) -> None:
    # vLLM without --enable-auto-tool-choice refuses "auto" with a 400
    model = LocalModel(turns(READ, DONE), reject_tool_choice=True, tools_need_choice=False)
    result, events, requests = await run_against(model, workspace)
    assert result.status == "completed"
    assert ["tool_choice" in r for r in requests] == [True, False, False]
    assert 'tool_choice = "omit"' in next(w for w in kinds(events, "warning") if w.code == "tool_mode").message


async def test_a_malformed_stream_line_is_a_dropped_stream_retried(workspace: Path) -> None:
    result, events, requests = await run_against(LocalModel(turns(DONE), malformed=1), workspace)
    assert result.status == "completed" and result.output == "The answer is 42."
    assert [r.code for r in kinds(events, "retry")] == ["stream_dropped"] and len(requests) == 2


async def test_a_stream_that_stays_malformed_fails_the_run_cleanly(workspace: Path) -> None:
    result, events, _ = await run_against(LocalModel(turns(DONE), malformed=99), workspace)
    assert result.status == "failed" and result.error_code == "stream_dropped"
    assert "malformed" in (result.error or "") and events[-1].kind == "run_end"


async def test_a_retry_after_a_drop_shows_the_second_answer_whole(workspace: Path) -> None:
    result, events, _ = await run_against(LocalModel(turns(DONE), drop_first=True), workspace)
    deltas = [e.kind == "text" and e.delta or e.kind for e in events if e.kind in ("text", "warning")]
    restart = deltas.index("warning")
    assert "".join(d for d in deltas[restart + 1 :] if d != "warning") == result.output == "The answer is 42."


def test_the_loopback_model_cuts_like_a_server() -> None:
    from support.local_server import _capped

    assert _capped("abcdefgh", [], 1) == ("abcd", [], "length")
    text, calls, finish = _capped("ab", [("f", {"a": "xxxxxxxx"})], 3)
    assert finish == "length" and calls[0][1] == json.dumps({"a": "xxxxxxxx"})[:10]


async def test_a_500_that_repeats_itself_is_a_server_error_retried_once_with_its_message(workspace: Path) -> None:
    # a template that cannot render the tool result fails every request alike: not an overload
    result, events, requests = await run_against(LocalModel(turns(READ, DONE), template_error=True), workspace)
    assert len(requests) == 1 + 2  # the first turn, then the second and its one retry
    assert [r.code for r in kinds(events, "retry")] == ["server_error"]
    assert result.status == "failed" and result.error_code == "server_error"
    assert result.error == (
        f"openai-compatible API error 500: {ROLES_ERROR}. The server failed on this request (its log says "
        "why); Zero retries it, but not after the same failure twice"
    )


async def test_a_model_still_loading_is_said_to_be_and_waited_for(workspace: Path) -> None:
    result, events, requests = await run_against(LocalModel(turns(DONE), loading=2), workspace)
    assert result.status == "completed" and len(requests) == 3
    assert [r.message for r in kinds(events, "retry")] == 2 * [
        "openai-compatible API error 503: Loading model. The model is still loading: Zero retries; "
        "--retries and --retry-max-delay wait longer"
    ]


async def test_errors_without_text_name_their_type_and_the_setting_that_helps(workspace: Path) -> None:
    with unanswered() as url:
        result, _ = await run_at(url, workspace, timeouts=0.05)
    assert result.error_code == "timeout" and result.error == (
        f"the openai-compatible API at {url}/v1/ timed out: no connection within 0.05 s (ConnectTimeout); "
        "--connect-timeout S waits longer"
    )

    def late(request: dict[str, Any]) -> Reply:
        return Reply(delay=1.0, body={})

    with LLMServer(late) as server:
        result, _ = await run_at(server.url, workspace, timeouts=0.1, retry=RetryPolicy(retries=0))
    assert result.error_code == "timeout" and result.error == (
        f"the openai-compatible API at {server.url}/v1/ timed out: nothing came for 0.1 s (ReadTimeout); "
        "--read-timeout S waits longer"
    )
    with LLMServer(late) as server:
        port = server.url
    result, _ = await run_at(port, workspace, retry=RetryPolicy(retries=0))  # nothing listens there now
    assert result.error_code == "connection_error" and result.error == (
        f"cannot reach the openai-compatible API at {port}/v1/ (All connection attempts failed): is the server "
        "running there, and is --base-url right? For a server that is starting, --retries and "
        "--retry-max-delay wait longer"
    )
    with LLMServer(LocalModel(turns(DONE), drop_first=True)) as server:
        result, _ = await run_at(server.url, workspace, retry=RetryPolicy(retries=0))
    assert result.error_code == "stream_dropped" and result.error == (
        "the openai-compatible stream broke off (peer closed connection without sending complete message body "
        "(incomplete chunked read)); Zero asks again, as often as --retries says"
    )


async def test_a_cancelled_call_hangs_up_and_counts_an_estimate_of_what_the_server_did(workspace: Path) -> None:
    # Ctrl-C in the middle of a long answer: the server must see the connection close (or it generates on),
    # and the call counts what it cost (it counted 0 tokens), estimated as for a server without usage
    model = LocalModel(turns(Answer("word " * 400)), pieces=400, pace=0.01)
    events: list[Event] = []
    with LLMServer(model) as server:
        async with anyio.create_task_group() as tg:

            def emit(event: Event) -> None:
                events.append(event)
                if len(kinds(events, "text")) == 5:
                    tg.cancel_scope.cancel()

            run = agent_at(server.url, workspace, emit)
            tg.start_soon(run.run, "Write a lot.")
        assert await anyio.to_thread.run_sync(server.hung_up.wait, 10.0)
        await run.config.provider.aclose()
    assert run.result is not None and run.result.status == "cancelled"
    prompt = ModelRequest(
        model="local-llm", messages=tuple(run.messages[:2]), tools=run._specs
    ).estimated_prompt_tokens()
    received = run.messages[-1]
    assert received.role == "assistant" and received.content.startswith("word word")
    expected = Usage(prompt_tokens=prompt, completion_tokens=received.tokens, cost_usd=None, calls=1, estimated=True)
    assert [u.usage for u in kinds(events, "usage")] == [expected]
    assert run.result.usage.total_tokens == expected.total_tokens and run.result.usage.estimated
    assert prompt > 1000  # the tools' definitions are most of it


async def test_an_estimated_answer_counts_no_more_than_the_output_cap(workspace: Path) -> None:
    # the server cuts at 16 tokens (64 characters); three characters a token would count 26
    result, _, _ = await run_against(LocalModel(turns(Answer("word " * 400))), workspace, max_output_tokens=16)
    assert result.status == "output_capped" and result.usage.estimated and result.usage.completion_tokens == 16


def answer_after_last_restart(events: list[Event]) -> str:
    """The answer as a stream-json reader puts it together: the text after the last stream_restarted."""
    text: list[str] = []
    for e in events:
        if e.kind == "warning" and e.code == "stream_restarted":
            text.clear()
        elif e.kind == "text":
            text.append(e.delta)
    return "".join(text)


@pytest.mark.parametrize("form", ["json", "fenced", "tagged"])
async def test_a_tool_call_written_as_text_runs_as_that_call(workspace: Path, form: Any) -> None:
    # Qwen2.5-Coder 0.5B/1.5B on llama.cpp: 0 of 11 runs made a real call, each one's text was taken as the answer
    result, events, requests = await run_against(LocalModel(turns(READ, DONE), calls_as_text=form), workspace)
    assert result.status == "completed" and result.output == "The answer is 42."
    ran = kinds(events, "tool_result")
    assert [(r.name, r.status) for r in ran] == [("read_file", "ok")] and "2\tThe answer is 42." in ran[0].output
    assistant = next(m for m in requests[1]["messages"] if m["role"] == "assistant")
    call = assistant["tool_calls"][0]
    assert assistant["content"] == ""
    assert call["function"] == {"name": "read_file", "arguments": '{"path": "README.md"}'}
    assert next(m for m in requests[1]["messages"] if m["role"] == "tool")["tool_call_id"] == call["id"]
    warnings = [w.message for w in kinds(events, "warning") if w.code == "tool_mode"]
    url = requests[0]["_headers"]["host"]
    assert warnings == [
        f"local-llm at http://{url}/v1 wrote its tool calls as text, not as calls: an answer that is wholly a call "
        "to one of its tools, with valid arguments, runs as that call from now on; to take it as text, set "
        f'text_tool_calls = false under [servers."http://{url}/v1"] in config.toml'
    ]
    assert answer_after_last_restart(events) == "The answer is 42."  # the call's text is not part of it
    message = next(e for e in events if e.kind == "message" and e.role == "assistant")
    assert message.content == "" and [c.name for c in message.tool_calls] == ["read_file"]


@pytest.mark.parametrize(
    "text",
    [
        'I will read it: {"name": "read_file", "arguments": {"path": "README.md"}}',  # prose around it
        '{"name": "read_file", "arguments": {"path": "README.md"}}\nThat is the call I would make.',
        '{"name": "open_file", "arguments": {"path": "README.md"}}',  # no such tool
        '{"name": "read_file", "arguments": {"file": "README.md"}}',  # arguments that do not validate
        '{"name": "read_file", "arguments": {"path": 42}}',
        '{"name": "read_file", "arguments": {"path": "README.md"}, "why": "to see"}',
        '```python\n{"name": "read_file", "arguments": {"path": "README.md"}}\n```',
        '<tool_call>{"name": "read_file", "arguments": {"path": "README.md"}}</tool_call> and more',
    ],
)
async def test_a_text_that_only_looks_like_a_call_stays_the_answer(workspace: Path, text: str) -> None:
    result, events, requests = await run_against(LocalModel(turns(Answer(text))), workspace)
    assert result.status == "completed" and result.output == text and len(requests) == 1
    assert not kinds(events, "tool_call") and not kinds(events, "warning")


async def test_text_tool_calls_false_takes_the_text_as_the_answer(workspace: Path) -> None:
    model = LocalModel(turns(READ, DONE), calls_as_text="json")
    with LLMServer(model) as server:
        events: list[Event] = []
        run = agent_at(server.url, workspace, events.append)
        run.config.provider = OpenAIProvider(api_key=None, base_url=server.url + "/v1", text_tool_calls=False)
        result = await run.run("What is the answer?")
        await run.config.provider.aclose()
    assert result.output == '{"name": "read_file", "arguments": {"path": "README.md"}}'
    assert not kinds(events, "tool_call")


async def test_calls_written_as_text_are_said_once_for_the_model_and_work_unstreamed(workspace: Path) -> None:
    # two agents on one provider (a team's members), calls in <tool_call> tags, through llama-cpp-python's
    # unstreamed fallback: one warning for the model's text calls, in the first run
    model = LocalModel(turns(READ, DONE), calls_as_text="tagged", auto_stream_empty=True)
    with LLMServer(model) as server:
        first: list[Event] = []
        run = agent_at(server.url, workspace, first.append)
        assert (await run.run("What is the answer?")).output == "The answer is 42."
        second: list[Event] = []
        other = AgentRun(run.config, "s2", [Message(role="system", content="You are a test agent.")], second.append)
        assert (await other.run("And again?")).output == "The answer is 42."
        await run.config.provider.aclose()
    assert [len(kinds(events, "tool_result")) for events in (first, second)] == [1, 1]
    told = [[w.message for w in kinds(events, "warning") if w.code == "tool_mode"] for events in (first, second)]
    assert [[m.split(" ")[0] for m in messages] for messages in told] == [["the", "local-llm"], []]
    assert "offered unstreamed" in told[0][0] and "wrote its tool calls as text" in told[0][1]


async def test_a_long_call_says_it_is_streaming_while_nothing_else_shows(workspace: Path) -> None:
    # a tool call whose arguments stream for minutes emits no text: the shell said "stalled: no event for 163s"
    content = "x" * 3000
    write = Answer("", [("write_file", {"path": "big.txt", "content": content})])
    model = LocalModel(turns(write, DONE), pieces=60, pace=0.01)  # its arguments take 0.6 s at least
    result, events, _ = await run_against(model, workspace, beat_seconds=0.05)
    assert result.status == "completed" and (workspace / "big.txt").read_text() == content
    before = events[: events.index(kinds(events, "tool_call")[0])]
    beats = [b.received for b in kinds(before, "streaming")]
    assert beats and not kinds(before, "text")
    assert beats == sorted(set(beats)) and beats[-1] <= len(json.dumps({"path": "big.txt", "content": content}))
    _, quiet, _ = await run_against(LocalModel(turns(write, DONE), pieces=60, pace=0.01), workspace)
    assert not kinds(quiet, "streaming")  # at most one every beat_seconds (30 s by default)
