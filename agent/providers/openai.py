"""OpenAI Chat Completions adapter; with a base URL, any OpenAI-compatible server.

The ``openai`` SDK is imported here only (and only for an unstreamed call), and its types and exceptions stay here.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

import anyio
import httpx2

from zero import __version__, errors
from zero.agent.governor import RateLimits, limits_from_headers
from zero.agent.messages import Message, ModelRequest, ToolCall, Usage
from zero.agent.provider import ToolCallAssembler
from zero.agent.providers._errors import body_error, status_error, transport_error
from zero.agent.providers._text_calls import calls_in_text
from zero.agent.stream import (
    Finish,
    LimitsReport,
    Notice,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    TextRetracted,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    UsageReport,
)

__all__ = ["OpenAIProvider", "ToolChoice"]


ToolChoice = Literal["auto", "omit"]
POOLS = 32  # connection pools of streamed calls (see OpenAIProvider.__init__)


class OpenAIProvider:
    """Streams chat completions. Retries are Zero's, so the SDK's own are off.

    Servers disagree on how tools are offered. By default a request with tools says
    ``tool_choice: "auto"`` and streams; when a server answers that with an empty stream
    (llama-cpp-python) the call is made again unstreamed, and when it refuses ``tool_choice``
    (vLLM without a tool parser) again without it. The way that worked is kept for the model
    for the rest of the run, and a ``Notice`` names the setting that makes it permanent.

    Small local models often write a tool call as text instead of making one: with ``text_tool_calls``
    (the default for servers other than OpenAI's), an answer that is wholly such a call to a tool that
    was offered, with valid arguments, is taken as the call (``calls_in_text``): its text is retracted
    and the call follows, and a ``Notice`` says so the first time for the model.
    """

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None = None,
        name: str = "openai",
        connect_timeout: float = 5.0,
        read_timeout: float = 600.0,
        max_connections: int = 256,
        tool_choice: ToolChoice = "auto",
        stream_tools: bool = True,
        text_tool_calls: bool | None = None,
    ):
        self.name = name
        self._timeout = timeout = httpx2.Timeout(read_timeout, connect=connect_timeout)
        self._tls = httpx2.create_ssl_context()  # one for every client here: each load of the CA bundle takes ~15 ms
        self._key = api_key or "not-needed"
        base = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"  # (as the SDK finds it)
        self._base = base if base.endswith("/") else base + "/"
        # The official API renamed `max_tokens`; local servers (Ollama, vLLM, LM Studio) know the old name.
        self._official = base_url is None or "api.openai.com" in base_url
        self._tools: dict[str, tuple[ToolChoice, bool]] = {}  # model -> how tools are offered
        self._default = (tool_choice, stream_tools)
        self._text_calls = not self._official if text_tool_calls is None else text_tool_calls
        self._wrote_calls: set[str] = set()  # models seen writing their tool calls as text
        self._url = self._base.rstrip("/")  # as config.toml's [servers."URL"] names it
        # Streamed calls go straight through an HTTP client, with the headers the SDK would send: its request
        # building (options models, transforms, header merging) costs more CPU a call than the rest of Zero's work
        # on it (bench/bench_swarm.py), and importing it a fifth of a second of start-up; errors map the same way.
        # The SDK is the unstreamed fallback's alone (``_completion``).
        # Several pools, each agent's calls in one: a pool looks at all of its connections for every
        # request, which at a thousand agents in one pool costs more than the rest of the call. Each is
        # made when first used (a run of one agent makes one).
        self._new_pool = functools.partial(
            httpx2.AsyncClient,
            base_url=self._base,
            headers=_headers(self._key),
            timeout=timeout,
            verify=self._tls,
            limits=httpx2.Limits(max_connections=250, max_keepalive_connections=100),
        )
        self._pools: dict[int, httpx2.AsyncClient] = {}
        self._client: Any = None  # the SDK's, made for the first unstreamed call
        # The calls under way, at most one connection each: a fan-out of thousands that connected at once would
        # overflow the server's queue of connections not yet taken (a SYN dropped, retried a second later, the
        # connect timing out). The rest wait here, before their connect timeout starts.
        self._calls = anyio.Semaphore(max_connections)

    async def aclose(self) -> None:
        for pool in self._pools.values():
            await pool.aclose()
        if self._client is not None:
            await self._client.close()

    async def _completion(self, body: dict[str, Any]) -> Any:
        """An unstreamed chat completion, through the SDK (imported for it), its errors made Zero's."""
        import openai

        if self._client is None:
            self._client = openai.AsyncOpenAI(
                api_key=self._key,
                base_url=self._base,
                max_retries=0,
                timeout=self._timeout,
                http_client=openai.DefaultAsyncHttpxClient(timeout=self._timeout, verify=self._tls),
            )
        try:
            async with self._calls:
                return await self._client.chat.completions.create(model=body["model"], messages=[], extra_body=body)
        except openai.APIStatusError as e:
            raise body_error(self.name, e.status_code, e.body, e.message, e.response.headers) from e
        except openai.APIConnectionError as e:  # timeouts among them
            raise transport_error(self.name, self._base, e, started=False, timeouts=self._timeout) from e
        except openai.OpenAIError as e:
            raise errors.ProviderError(f"{self.name} API error: {e}") from e

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        choice, streamed = self._tools.get(request.model, self._default) if request.tools else ("auto", True)
        try:
            async for event in self._call(request, choice, streamed):
                yield event
            return
        except errors.EmptyResponseError:
            if not request.tools or not streamed:
                raise
            fallback, setting = (choice, False), "stream_tools = false"
        except errors.BadRequestError as e:
            if not request.tools or choice != "auto" or "tool_choice" not in str(e).replace(" ", "_"):
                raise
            fallback, setting = ("omit", streamed), 'tool_choice = "omit"'
        async for event in self._call(request, *fallback):  # once the other way; its failure is final
            if request.model not in self._tools:
                self._tools[request.model] = fallback
                yield Notice(
                    code="tool_mode",
                    message=f"the server at {self._url} did not take tools the default way, so they are "
                    f"offered {'unstreamed' if not fallback[1] else 'without tool_choice'} for {request.model} "
                    f'from now on; to skip the failed try, set {setting} under [servers."{self._url}"] in config.toml',
                )
            yield event

    async def _call(self, request: ModelRequest, choice: ToolChoice, streamed: bool) -> AsyncIterator[StreamEvent]:
        # The body in wire format, built once: streamed calls post it as it is; unstreamed ones send it
        # as `extra_body`, which skips the SDK's type-driven transform of request params.
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [_message(m) for m in request.messages],
            "stream": streamed,
        }
        if streamed:
            body["stream_options"] = {"include_usage": True}
        if request.max_output_tokens:
            body["max_completion_tokens" if self._official else "max_tokens"] = request.max_output_tokens
        if request.reasoning_effort:
            body["reasoning_effort"] = request.reasoning_effort
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
            if choice == "auto":
                body["tool_choice"] = "auto"
        started = False
        try:
            if streamed:
                # The raw lines, parsed here: the SDK builds a typed object for every chunk, which
                # costs more than everything else Zero does with it (bench/bench_stream.py).
                index = hash(request.metadata.get("session_id", "")) % POOLS
                pool = self._pools.get(index) or self._pools.setdefault(index, self._new_pool())
                async with self._calls:  # (encoded once its turn comes: a call waiting here holds no bytes of it)
                    post = pool.stream("POST", "chat/completions", content=json.dumps(body).encode())
                    async with post as response:
                        if response.status_code >= 400:
                            raw = await response.aread()
                            try:
                                response.raise_for_status()
                            except httpx2.HTTPStatusError as e:
                                raise _wire_error(self.name, response.status_code, raw, response.headers) from e
                        # (always: it tells the rate governor the server took the call, stating limits or not)
                        yield LimitsReport(limits_from_headers(response.headers) or RateLimits())
                        async for event in self._events(response.aiter_lines(), request):
                            started = True
                            yield event
            else:
                for event in self._unstreamed(await self._completion(body), request):
                    yield event
        except httpx2.TransportError as e:  # timeouts among them
            raise transport_error(self.name, self._base, e, started=started, timeouts=self._timeout) from e
        except (ValueError, RecursionError) as e:  # a line of the stream that is not JSON (or nested past reading)
            raise errors.StreamDroppedError(f"the {self.name} server sent a malformed stream: {e}") from e

    async def _events(self, lines: AsyncIterator[str], request: ModelRequest) -> AsyncIterator[StreamEvent]:
        calls = ToolCallAssembler()
        finish: str | None = None
        chunks = 0
        text: list[str] = []
        async for chunk in _sse(lines):
            chunks += 1
            if error := chunk.get("error"):  # a server that fails mid-stream says so in a chunk
                error = error if isinstance(error, dict) else {"message": str(error)}
                message, kind = str(error.get("message", error)), str(error.get("type") or error.get("code") or "")
                raise status_error(self.name, 200, message, {}, kind)
            if usage := chunk.get("usage"):
                details = usage.get("prompt_tokens_details") or {}
                cached = details.get("cached_tokens") or 0
                prompt, completion = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
                yield UsageReport(Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached))
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(reasoning, str) and reasoning:
                    yield ReasoningDelta(reasoning)
                if content := delta.get("content"):
                    text.append(content)
                    yield TextDelta(content)
                for tc in delta.get("tool_calls") or ():
                    index = tc.get("index", 0)
                    function = tc.get("function") or {}
                    if index not in calls:
                        call_id = tc.get("id") or f"call_{index}"
                        calls.start(index, call_id, function.get("name") or "")
                        yield ToolCallStart(index=index, id=call_id, name=function.get("name") or "")
                    if arguments := function.get("arguments"):
                        calls.add(index, arguments)
                        yield ToolCallDelta(index=index, arguments=arguments)
                if reason := choice.get("finish_reason"):
                    finish = reason
        if not chunks:
            raise errors.EmptyResponseError(
                f"the {self.name} server answered with an empty stream. A prompt longer than the model's "
                "context is a likely cause (llama.cpp and others close the stream then): shorten the task, "
                "or start the server with a larger context"
            )
        if finish is None:
            raise errors.StreamDroppedError(f"the {self.name} stream ended before the model finished")
        done = calls.finish()
        written = self._written_calls(request, text) if not done and finish == "stop" else []
        for event in (*done, *written):
            yield event
        yield Finish("tool_calls" if written else finish)

    def _unstreamed(self, completion: Any, request: ModelRequest) -> Iterator[StreamEvent]:
        """The events of a whole (unstreamed) completion."""
        if not hasattr(completion, "choices"):
            raise errors.ProviderError(f"the server's answer is not a chat completion: {str(completion)[:200]!r}")
        if completion.usage is not None:
            details = completion.usage.prompt_tokens_details
            cached = (details.cached_tokens or 0) if details else 0
            yield UsageReport(
                Usage(
                    prompt_tokens=completion.usage.prompt_tokens,
                    completion_tokens=completion.usage.completion_tokens,
                    cached_tokens=cached,
                )
            )
        if not completion.choices:
            raise errors.EmptyResponseError("the server answered without a choice")
        choice = completion.choices[0]
        message = choice.message
        reasoning = (message.model_extra or {}).get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            yield ReasoningDelta(reasoning)
        if message.content:
            yield TextDelta(message.content)
        calls = ToolCallAssembler()
        for index, tc in enumerate(message.tool_calls or ()):
            call_id = tc.id or f"call_{index}"
            calls.start(index, call_id, tc.function.name)
            yield ToolCallStart(index=index, id=call_id, name=tc.function.name)
            calls.add(index, tc.function.arguments or "")
            yield ToolCallDelta(index=index, arguments=tc.function.arguments or "")
        done = calls.finish()
        finish = choice.finish_reason or "stop"
        written = self._written_calls(request, [message.content or ""]) if not done and finish == "stop" else []
        yield from (*done, *written)
        yield Finish("tool_calls" if written else finish)

    def _written_calls(self, request: ModelRequest, text: list[str]) -> list[StreamEvent]:
        """The events that turn an answer that is wholly tool calls written as text into those calls
        (none if it is an answer, or the server's text_tool_calls is off)."""
        if not (self._text_calls and request.tools and text):
            return []
        found = calls_in_text("".join(text), request.tools)
        if not found:
            return []
        events: list[StreamEvent] = []
        if request.model not in self._wrote_calls:
            self._wrote_calls.add(request.model)
            events.append(
                Notice(
                    code="tool_mode",
                    message=f"{request.model} at {self._url} wrote its tool calls as text, not as calls: an answer "
                    "that is wholly a call to one of its tools, with valid arguments, runs as that call from now on; "
                    f'to take it as text, set text_tool_calls = false under [servers."{self._url}"] in config.toml',
                )
            )
        events.append(TextRetracted())
        for index, (name, arguments) in enumerate(found):
            call_id = f"call_{secrets.token_hex(6)}"  # unique in the conversation, as a server's own ids are
            events += [
                ToolCallStart(index=index, id=call_id, name=name),
                ToolCallDelta(index=index, arguments=json.dumps(arguments)),
                ToolCallDone(index=index, call=ToolCall(id=call_id, name=name, arguments=arguments)),
            ]
        return events


async def _sse(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects of a server-sent event stream's ``data``, up to ``[DONE]``."""
    data: list[str] = []
    async for line in lines:
        if line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
        elif not line and data:  # a blank line ends an event
            payload = "\n".join(data) if len(data) > 1 else data[0]
            data.clear()
            if payload.startswith("[DONE]"):
                async for _ in lines:  # read the body to its end, so the connection goes back to the pool
                    pass
                return
            chunk = json.loads(payload)
            if not isinstance(chunk, dict):
                raise ValueError(f"a chunk that is not a JSON object: {payload[:200]}")
            yield chunk
    if data and not data[0].startswith("[DONE]"):  # a last event without its blank line
        yield json.loads("\n".join(data))


def _wire_error(provider: str, status: int, raw: bytes, headers: Any) -> errors.ProviderError:
    """An error answer read straight off the wire, mapped as the SDK's own errors are."""
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    return body_error(provider, status, body, raw.decode("utf-8", errors="replace")[:500] or f"HTTP {status}", headers)


def _message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        # "content" is always a string, "" without text: llama-cpp-python's function-calling templates
        # answer 500 to `null` and to a message without the key alike.
        return {
            "role": "assistant",
            "content": m.content,
            "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for c in m.tool_calls
            ],
        }
    return {"role": m.role, "content": m.content}


def _headers(api_key: str) -> dict[str, str]:
    """The headers of a streamed call: what the SDK sends, read from the same variables (``OPENAI_ORG_ID``,
    ``OPENAI_PROJECT_ID``, ``OPENAI_CUSTOM_HEADERS``: a ``Name: value`` a line), but its X-Stainless-* headers,
    which tell OpenAI which SDK made a call (version, OS, runtime): these calls are not the SDK's."""
    headers = {"Content-Type": "application/json", "User-Agent": f"zero/{__version__}"}
    for name, variable in (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID")):
        if value := os.environ.get(variable):
            headers[name] = value
    for line in os.environ.get("OPENAI_CUSTOM_HEADERS", "").split("\n"):
        name, colon, value = line.partition(":")
        if colon and name.strip():
            headers[name.strip()] = value.strip()
    return {**headers, "Authorization": f"Bearer {api_key}", "Accept": "text/event-stream"}
