"""Provider-neutral conversation types: messages, tool calls, tool specs, usage."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

__all__ = [
    "CAMEL",
    "Message",
    "ModelRequest",
    "Role",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "estimate_tokens",
    "format_cost",
    "format_tokens",
]

CAMEL = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="ignore")
"""How Zero's dataclasses look on disk and on the wire: camelCase keys, unknown keys ignored."""

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A tool call the model asked for; ``arguments`` is the decoded JSON object."""

    __pydantic_config__ = CAMEL

    id: str
    name: str
    arguments: dict[str, Any]
    parse_error: str | None = None


def estimate_tokens(text: str) -> int:
    """Tokens in ``text``, estimated without a tokenizer and erring high: a token for every three
    ASCII characters (English runs about four, code about three), and one for every other character
    (CJK, emoji and accented text run about one, where four characters a token would count a
    quarter of it). The budget learns each model's real ratio from the usage it reports."""
    if text.isascii():
        return (len(text) + 2) // 3
    plain = len(text.encode("ascii", "ignore"))
    return (plain + 2) // 3 + len(text) - plain


@dataclass(frozen=True, slots=True, kw_only=True)
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
    # Its size in tokens, estimated once, for checking a request against a budget before each call.
    tokens: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        size = estimate_tokens(self.content) + 4  # a few tokens frame each message
        for call in self.tool_calls:
            size += estimate_tokens(call.name) + estimate_tokens(json.dumps(call.arguments, ensure_ascii=False)) + 4
        object.__setattr__(self, "tokens", size)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """What the model sees of a tool: its name, purpose and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]
    # The size of the definition in tokens, estimated once, for checking a request against a budget.
    tokens: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        size = estimate_tokens(self.name) + estimate_tokens(self.description)
        object.__setattr__(self, "tokens", size + estimate_tokens(json.dumps(self.parameters, ensure_ascii=False)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens of one or more model calls, and their cost in US dollars.

    ``cost_usd`` is the part of the cost that is known; ``unpriced`` says some part is not (a
    model without a price), so ``cost_usd`` is a lower bound, and ``None`` when nothing is known.
    An unknown cost is never shown as zero. ``estimated``: some token counts are Zero's own
    estimate, because the server reported none.
    """

    __pydantic_config__ = CAMEL

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = 0.0
    calls: int = 0
    unpriced: bool = False
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def partly_unpriced(self) -> bool:
        return self.unpriced or self.cost_usd is None

    def __add__(self, other: Usage) -> Usage:
        return self._combine(other, 1)

    def __sub__(self, other: Usage) -> Usage:
        """What was added since ``other`` (an earlier reading of the same total)."""
        return self._combine(other, -1)

    def _combine(self, other: Usage, sign: int) -> Usage:
        unpriced = self.partly_unpriced or other.partly_unpriced
        known = (self.cost_usd or 0.0) + sign * (other.cost_usd or 0.0)
        return Usage(
            prompt_tokens=self.prompt_tokens + sign * other.prompt_tokens,
            completion_tokens=self.completion_tokens + sign * other.completion_tokens,
            cached_tokens=self.cached_tokens + sign * other.cached_tokens,
            cost_usd=None if unpriced and not known else known,
            calls=self.calls + sign * other.calls,
            unpriced=unpriced,
            estimated=self.estimated or other.estimated,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "totalTokens": self.total_tokens,
            "cachedTokens": self.cached_tokens,
            "costUsd": None if self.cost_usd is None else round(self.cost_usd, 6),
            "calls": self.calls,
        }
        if self.partly_unpriced:
            out["unpriced"] = True
        if self.estimated:
            out["estimated"] = True
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Usage:
        cost = data.get("costUsd", 0.0)
        return cls(
            prompt_tokens=int(data.get("promptTokens", 0)),
            completion_tokens=int(data.get("completionTokens", 0)),
            cached_tokens=int(data.get("cachedTokens", 0)),
            cost_usd=None if cost is None else float(cost),
            calls=int(data.get("calls", 0)),
            unpriced=bool(data.get("unpriced", False)),
            estimated=bool(data.get("estimated", False)),
        )


def format_tokens(n: int) -> str:
    """A token count as views show it: ``9,876``, ``12.3k``, ``4.5M`` (thousands always separated)."""
    return f"{n / 1_000_000:.1f}M" if n >= 1_000_000 else f"{n / 1000:.1f}k" if n >= 10_000 else f"{n:,}"


def format_cost(usage: Usage) -> str:
    """``$0.0123``, ``≥ $0.0123`` when part of it has no price, or ``unknown`` (a bound of $0 says nothing)."""
    if usage.cost_usd is None or (usage.unpriced and not usage.cost_usd):
        return "unknown"
    return ("≥ " if usage.unpriced else "") + f"${usage.cost_usd:.4f}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """One call to a model: the conversation so far and the tools it may call."""

    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_output_tokens: int | None = None
    reasoning_effort: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)

    def estimated_prompt_tokens(self) -> int:
        """The prompt's size in tokens, estimated: the messages and the tool definitions."""
        return sum(m.tokens for m in self.messages) + sum(t.tokens for t in self.tools)
