"""Provider-neutral conversation types: messages, tool calls, tool specs, usage."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["CAMEL", "Message", "ModelRequest", "Role", "ToolCall", "ToolSpec", "Usage"]

CAMEL = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="ignore")
"""How Zero's dataclasses look on disk and on the wire: camelCase keys, unknown keys ignored."""

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model asked for; ``arguments`` is the decoded JSON object."""

    __pydantic_config__ = CAMEL

    id: str
    name: str
    arguments: dict[str, Any]
    parse_error: str | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the conversation.

    ``tool_calls`` is set on assistant messages that call tools; ``tool_call_id``
    and ``name`` on the tool message answering one of them.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model sees of a tool: its name, purpose and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]
    # The size of the definition in characters, for estimating a request's tokens before each call.
    size: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", len(self.description) + len(json.dumps(self.parameters)))


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one or more model calls, and their cost in US dollars.

    ``cost_usd`` is ``None`` when the price of a model is unknown: an unknown cost
    is never shown as zero, and adding it to a known cost keeps it unknown.
    """

    __pydantic_config__ = CAMEL

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = 0.0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_tokens + other.cached_tokens,
            cost,
            self.calls + other.calls,
        )

    def __sub__(self, other: Usage) -> Usage:
        """What was added since ``other`` (an earlier reading of the same total)."""
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd - other.cost_usd
        return Usage(
            self.prompt_tokens - other.prompt_tokens,
            self.completion_tokens - other.completion_tokens,
            self.cached_tokens - other.cached_tokens,
            cost,
            self.calls - other.calls,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "totalTokens": self.total_tokens,
            "cachedTokens": self.cached_tokens,
            "costUsd": None if self.cost_usd is None else round(self.cost_usd, 6),
            "calls": self.calls,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Usage:
        return cls(
            int(data.get("promptTokens", 0)),
            int(data.get("completionTokens", 0)),
            int(data.get("cachedTokens", 0)),
            None if data.get("costUsd", 0.0) is None else float(data.get("costUsd", 0.0)),
            int(data.get("calls", 0)),
        )


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One call to a model: the conversation so far and the tools it may call."""

    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_output_tokens: int | None = None
    reasoning_effort: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
