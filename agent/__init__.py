"""The provider-neutral runtime: messages, stream events, usage, providers and the agent loop."""

from __future__ import annotations

from zero.agent.events import (
    AssistantText,
    PermissionDecided,
    PermissionRequested,
    Reasoning,
    RetryScheduled,
    RunEvent,
    RunFinished,
    RunResult,
    RunStarted,
    RunStatus,
    StatusChanged,
    SubagentFinished,
    SubagentStarted,
    ToolCallStarted,
    ToolFinished,
    TurnCompleted,
    UsageUpdated,
)
from zero.agent.loop import AgentConfig, AgentRun, Approver, CallGuard, CallPermit, EventSink
from zero.agent.messages import Message, ModelRequest, ToolCall, ToolSpec, Usage
from zero.agent.pricing import Price, PriceTable
from zero.agent.provider import Provider
from zero.agent.providers.scripted import ScriptedProvider, ScriptMatch, ScriptToolCall, ScriptTurn
from zero.agent.retry import RetryPolicy

__all__ = [
    "AgentConfig",
    "AgentRun",
    "Approver",
    "AssistantText",
    "CallGuard",
    "CallPermit",
    "EventSink",
    "Message",
    "ModelRequest",
    "PermissionDecided",
    "PermissionRequested",
    "Price",
    "PriceTable",
    "Provider",
    "Reasoning",
    "RetryPolicy",
    "RetryScheduled",
    "RunEvent",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "RunStatus",
    "ScriptMatch",
    "ScriptToolCall",
    "ScriptTurn",
    "ScriptedProvider",
    "StatusChanged",
    "SubagentFinished",
    "SubagentStarted",
    "ToolCall",
    "ToolCallStarted",
    "ToolFinished",
    "ToolSpec",
    "TurnCompleted",
    "Usage",
    "UsageUpdated",
]
