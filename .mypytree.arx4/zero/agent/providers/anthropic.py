"""Anthropic Messages adapter.

The ``anthropic`` SDK is imported here only, and its types and exceptions stay here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import anyio
import httpx2

from zero import errors
from zero.agent.governor import limits_from_headers
from zero.agent.messages import Message, ModelRequest, Usage
from zero.agent.pricing import DEFAULT_OUTPUT_CAP
from zero.agent.provider import ToolCallAssembler
from zero.agent.providers._errors import body_error, transport_error
from zero.agent.stream import (
    Finish,
    LimitsReport,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    UsageReport,
)

__all__ = ["AnthropicProvider"]

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


class AnthropicProvider:
    """Streams messages. Retries are Zero's, so the SDK's own are off."""

    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 600.0,
        max_connections: int = 256,
    ):
        self._timeout = httpx2.Timeout(read_timeout, connect=connect_timeout)
        self._calls = anyio.Semaphore(max_connections)  # as OpenAIProvider's: the rest wait their turn
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=self._timeout
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        kwargs: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_output_tokens or DEFAULT_OUTPUT_CAP,
            "messages": _messages(request.messages),
            "stream": True,
        }
        if system:
            kwargs["system"] = system
        if request.tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools
            ]
        started = False
        try:
            async with self._calls:
                stream = await self._client.messages.create(**kwargs)
                if (limits := limits_from_headers(stream.response.headers)) is not None:
                    yield LimitsReport(limits)
                async for event in self._events(stream):
                    started = True
                    yield event
        except anthropic.APIStatusError as e:
            raise body_error(self.name, e.status_code, e.body, e.message, e.response.headers) from e
        except (anthropic.APIConnectionError, httpx2.TransportError) as e:  # (the SDK lets the latter through
            # while a stream is read), timeouts among them
            raise transport_error(self.name, self._client.base_url, e, started=started, timeouts=self._timeout) from e
        except anthropic.AnthropicError as e:
            raise errors.ProviderError(f"anthropic API error: {e}") from e
        except (ValueError, RecursionError) as e:  # a line of the stream that is not JSON (or nested past reading)
            raise errors.StreamDroppedError(f"the anthropic server sent a malformed stream: {e}") from e

    async def _events(self, stream: Any) -> AsyncIterator[StreamEvent]:
        calls = ToolCallAssembler()
        prompt = cached = completion = 0
        finish: str | None = None
        async for event in stream:
            kind = event.type
            if kind == "message_start":
                u = event.message.usage
                cached = u.cache_read_input_tokens or 0
                prompt = u.input_tokens + cached + (u.cache_creation_input_tokens or 0)
                completion = u.output_tokens or 0
            elif kind == "content_block_start":
                block = event.content_block
                if block.type == "tool_use":
                    calls.start(event.index, block.id, block.name)
                    yield ToolCallStart(index=event.index, id=block.id, name=block.name)
            elif kind == "content_block_delta":
                delta = event.delta
                if delta.type == "text_delta":
                    yield TextDelta(delta.text)
                elif delta.type == "input_json_delta":
                    calls.add(event.index, delta.partial_json)
                    yield ToolCallDelta(index=event.index, arguments=delta.partial_json)
                elif delta.type == "thinking_delta":
                    yield ReasoningDelta(delta.thinking)
            elif kind == "message_delta":
                completion = event.usage.output_tokens
                finish = _FINISH.get(event.delta.stop_reason or "", event.delta.stop_reason or "stop")
            elif kind == "message_stop" and finish is None:
                finish = "stop"
        if finish is None:
            raise errors.StreamDroppedError("the anthropic stream ended before the model finished")
        for done in calls.finish():
            yield done
        yield UsageReport(Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached))
        yield Finish(finish)


def _messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Anthropic's shape: tool results are user messages, and consecutive user turns are merged
    into one (a note after tool results, say), since roles must alternate."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content, "is_error": m.is_error}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m.role == "assistant":
            content: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls]
            out.append({"role": "assistant", "content": content or [{"type": "text", "text": "(no answer)"}]})
        elif out and out[-1]["role"] == "user":
            previous = out[-1]["content"]
            blocks = previous if isinstance(previous, list) else [{"type": "text", "text": previous}]
            out[-1]["content"] = [*blocks, {"type": "text", "text": m.content}]
        else:
            out.append({"role": "user", "content": m.content})
    return out
