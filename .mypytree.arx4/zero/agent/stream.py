"""What a provider streams back for one model call: a tagged union of small events."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from zero.agent.governor import RateLimits
from zero.agent.messages import ToolCall, Usage


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str
    kind: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStart:
    index: int
    id: str
    name: str
    kind: Literal["tool_call_start"] = "tool_call_start"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta:
    index: int
    arguments: str
    kind: Literal["tool_call_delta"] = "tool_call_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDone:
    index: int
    call: ToolCall
    kind: Literal["tool_call_done"] = "tool_call_done"


@dataclass(frozen=True, slots=True)
class UsageReport:
    """Token counts of this call (``cost_usd`` is filled in by the loop from the price table)."""

    usage: Usage
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class Finish:
    """The model finished this call; ``reason`` is ``stop``, ``tool_calls`` or ``length``."""

    reason: str
    kind: Literal["finish"] = "finish"


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice:
    """Something the user should know about how the call was made (e.g. a server needed tools
    offered another way); the loop shows it as a ``warning`` once a run."""

    code: str
    message: str
    kind: Literal["notice"] = "notice"


@dataclass(frozen=True, slots=True)
class LimitsReport:
    """The rate limits the answer's headers state, for the provider's rate governor."""

    limits: RateLimits
    kind: Literal["limits"] = "limits"


@dataclass(frozen=True, slots=True)
class TextRetracted:
    """The text this call streamed so far is not part of the answer: it was a tool call the model wrote
    as text, which follows as a call."""

    kind: Literal["text_retracted"] = "text_retracted"


StreamEvent = (
    TextDelta
    | ReasoningDelta
    | ToolCallStart
    | ToolCallDelta
    | ToolCallDone
    | UsageReport
    | Finish
    | Notice
    | LimitsReport
    | TextRetracted
)
