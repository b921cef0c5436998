"""Run events: everything an agent run does, as small frozen dataclasses.

One run emits one ordered stream of these; the stream-json writer, the session
recorder and the terminal views are consumers. Every event names the session of
the agent that emitted it, so the events of several agents can share one stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from zero.agent.messages import Message, ToolCall, Usage

__all__ = [
    "AssistantText",
    "Reasoning",
    "PermissionDecided",
    "PermissionRequested",
    "RetryScheduled",
    "RunEvent",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "RunStatus",
    "StatusChanged",
    "SubagentFinished",
    "SubagentStarted",
    "ToolCallStarted",
    "ToolFinished",
    "TurnCompleted",
    "UsageUpdated",
]

RunStatus = Literal["completed", "failed", "cancelled", "interrupted", "budget_exhausted", "timed_out", "max_turns"]


@dataclass(frozen=True, slots=True)
class RunStarted:
    """A run began. ``messages`` are those it added before its first model call."""

    session_id: str
    provider: str
    model: str
    cwd: str
    messages: tuple[Message, ...]
    kind: Literal["run_started"] = "run_started"


@dataclass(frozen=True, slots=True)
class AssistantText:
    session_id: str
    delta: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class Reasoning:
    session_id: str
    delta: str
    kind: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    session_id: str
    call: ToolCall
    side_effect: str
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class PermissionRequested:
    session_id: str
    call_id: str
    name: str
    side_effect: str
    permission_mode: str
    reason: str
    kind: Literal["permission_request"] = "permission_request"


@dataclass(frozen=True, slots=True)
class PermissionDecided:
    session_id: str
    call_id: str
    name: str
    granted: bool
    reason: str
    kind: Literal["permission_decision"] = "permission_decision"


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A tool call ended: ``status`` is ``ok``, ``error`` or ``denied``; output is redacted."""

    session_id: str
    call_id: str
    name: str
    status: Literal["ok", "error", "denied"]
    output: str
    truncated: bool
    changed_files: tuple[str, ...] = ()
    duration_ms: int = 0
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True)
class UsageUpdated:
    """Usage of one model call, priced; ``total`` is the run's so far."""

    session_id: str
    model: str
    usage: Usage
    total: Usage
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class RetryScheduled:
    session_id: str
    attempt: int
    delay: float
    code: str
    message: str
    kind: Literal["retry"] = "retry"


@dataclass(frozen=True, slots=True)
class TurnCompleted:
    """A model call and its tool calls are done; ``messages`` are the ones it added."""

    session_id: str
    turn: int
    messages: tuple[Message, ...]
    kind: Literal["turn_completed"] = "turn_completed"


@dataclass(frozen=True, slots=True)
class SubagentStarted:
    """A child agent (a specialist or a team member) is about to run in its own session."""

    session_id: str
    parent_session_id: str
    root_session_id: str
    agent_name: str
    specialist: str
    member: str | None = None
    description: str = ""
    kind: Literal["subagent_started"] = "subagent_started"


@dataclass(frozen=True, slots=True)
class SubagentFinished:
    session_id: str
    status: str
    usage: Usage
    duration_ms: int
    kind: Literal["subagent_finished"] = "subagent_finished"


@dataclass(frozen=True, slots=True)
class StatusChanged:
    """A session reached a status without running, e.g. a team member ``skipped`` or ``cancelled``."""

    session_id: str
    status: str
    reason: str = ""
    kind: Literal["status_changed"] = "status_changed"


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended: its status, its (possibly partial) output, usage and error."""

    status: RunStatus
    output: str
    usage: Usage
    turns: int
    duration_ms: int
    error_code: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class RunFinished:
    session_id: str
    result: RunResult
    kind: Literal["run_finished"] = "run_finished"


RunEvent = (
    RunStarted
    | AssistantText
    | Reasoning
    | ToolCallStarted
    | PermissionRequested
    | PermissionDecided
    | ToolFinished
    | UsageUpdated
    | RetryScheduled
    | TurnCompleted
    | RunFinished
    | SubagentStarted
    | SubagentFinished
    | StatusChanged
)
