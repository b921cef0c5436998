"""OpenAI Chat Completions adapter; with a base URL, any OpenAI-compatible server.

The ``openai`` SDK is imported here only, and its types and exceptions stay here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai

from zero import errors
from zero.agent.messages import Message, ModelRequest, Usage
from zero.agent.provider import ToolCallAssembler
from zero.agent.providers._errors import status_error
from zero.agent.stream import (
    Finish,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    UsageReport,
)

__all__ = ["OpenAIProvider"]


class OpenAIProvider:
    """Streams chat completions. Retries are Zero's, so the SDK's own are off."""

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None = None,
        name: str = "openai",
        timeout: float = 600.0,
    ):
        self.name = name
        self._client = openai.AsyncOpenAI(
            api_key=api_key or "not-needed", base_url=base_url, max_retries=0, timeout=timeout
        )
        # The official API renamed `max_tokens`; local servers (Ollama, vLLM, LM Studio) know the old name.
        self._official = base_url is None or "api.openai.com" in base_url

    async def aclose(self) -> None:
        await self._client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        # Messages and tools are already in wire format: sent as `extra_body` they skip the SDK's
        # type-driven transform of request params, which costs more CPU than the rest of a call.
        body: dict[str, Any] = {"messages": [_message(m) for m in request.messages]}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": [],
            "stream": True,
            "stream_options": {"include_usage": True},
            "extra_body": body,
        }
        if request.max_output_tokens:
            kwargs["max_completion_tokens" if self._official else "max_tokens"] = request.max_output_tokens
        if request.reasoning_effort:
            kwargs["reasoning_effort"] = request.reasoning_effort
        started = False
        try:
            stream = await self._client.chat.completions.create(**kwargs)
            async for event in self._events(stream):
                started = True
                yield event
        except openai.APIStatusError as e:
            raise _translate_status(self.name, e) from e
        except openai.APITimeoutError as e:
            raise errors.ProviderTimeoutError(f"{self.name} API timed out: {e}") from e
        except openai.APIConnectionError as e:
            cause = f" ({e.__cause__})" if e.__cause__ else ""
            if started:
                raise errors.StreamDroppedError(f"the {self.name} stream broke off{cause}") from e
            raise errors.ProviderConnectionError(
                f"cannot reach the {self.name} API at {self._client.base_url}{cause}"
            ) from e
        except openai.OpenAIError as e:
            raise errors.ProviderError(f"{self.name} API error: {e}") from e

    async def _events(self, stream: Any) -> AsyncIterator[StreamEvent]:
        calls = ToolCallAssembler()
        finish: str | None = None
        async for chunk in stream:
            if chunk.usage is not None:
                details = chunk.usage.prompt_tokens_details
                cached = (details.cached_tokens or 0) if details else 0
                yield UsageReport(Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens, cached))
            for choice in chunk.choices:
                delta = choice.delta
                extra = delta.model_extra or {}
                reasoning = extra.get("reasoning_content") or extra.get("reasoning")
                if isinstance(reasoning, str) and reasoning:
                    yield ReasoningDelta(reasoning)
                if delta.content:
                    yield TextDelta(delta.content)
                for tc in delta.tool_calls or ():
                    if tc.index not in calls:
                        name = tc.function.name if tc.function and tc.function.name else ""
                        calls.start(tc.index, tc.id or f"call_{tc.index}", name)
                        yield ToolCallStart(tc.index, tc.id or f"call_{tc.index}", name)
                    if tc.function and tc.function.arguments:
                        calls.add(tc.index, tc.function.arguments)
                        yield ToolCallDelta(tc.index, tc.function.arguments)
                if choice.finish_reason:
                    finish = choice.finish_reason
        if finish is None:
            raise errors.StreamDroppedError(f"the {self.name} stream ended before the model finished")
        for done in calls.finish():
            yield done
        yield Finish(finish)


def _translate_status(provider: str, e: openai.APIStatusError) -> errors.ProviderError:
    body = e.body if isinstance(e.body, dict) else {}
    inner = body.get("error", body) if isinstance(body.get("error", body), dict) else {}
    message = str(inner.get("message") or e.message)
    kind = str(inner.get("code") or inner.get("type") or "")
    return status_error(provider, e.status_code, message, e.response.headers, kind)


def _message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        return {
            "role": "assistant",
            "content": m.content or None,
            "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for c in m.tool_calls
            ],
        }
    return {"role": m.role, "content": m.content}
