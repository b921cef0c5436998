"""The provider seam: a tiny protocol over Zero's own types.

An adapter turns a ``ModelRequest`` into a stream of ``StreamEvent``; SDK types and
SDK exceptions never leave the adapter module (they become ``zero.errors``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from zero.agent.messages import ModelRequest, ToolCall
from zero.agent.stream import StreamEvent, ToolCallDone

__all__ = ["Provider", "ToolCallAssembler"]


@runtime_checkable
class Provider(Protocol):
    """A model API. ``name`` is the provider id (``openai``, ``anthropic``, ...)."""

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream one model call. Raises ``zero.errors.ProviderError`` on failure."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class ToolCallAssembler:
    """Collects streamed tool-call fragments by index and decodes their JSON arguments."""

    def __init__(self) -> None:
        self._calls: dict[int, tuple[str, str, list[str]]] = {}

    def start(self, index: int, call_id: str, name: str) -> None:
        self._calls[index] = (call_id, name, [])

    def add(self, index: int, fragment: str) -> None:
        self._calls[index][2].append(fragment)

    def __contains__(self, index: int) -> bool:
        return index in self._calls

    def finish(self) -> list[ToolCallDone]:
        done = [ToolCallDone(index=index, call=decode_call(*self._calls[index])) for index in sorted(self._calls)]
        self._calls.clear()
        return done


def decode_call(call_id: str, name: str, fragments: list[str]) -> ToolCall:
    raw = "".join(fragments).strip() or "{}"
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError as e:
        return ToolCall(
            id=call_id, name=name, arguments={}, parse_error=f"arguments are not valid JSON ({e.msg}): {raw[:200]}"
        )
    except RecursionError:  # (Python's parser nests a call a level: a thousand brackets deep ends it)
        return ToolCall(id=call_id, name=name, arguments={}, parse_error="arguments are nested too deeply to read")
    if not isinstance(arguments, dict):
        return ToolCall(
            id=call_id, name=name, arguments={}, parse_error=f"arguments must be a JSON object, got: {raw[:200]}"
        )
    return ToolCall(id=call_id, name=name, arguments=arguments)
