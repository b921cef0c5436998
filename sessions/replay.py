"""Rebuilding a conversation from a session's events, for resume and fork."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from zero.agent import Message, ToolCall

__all__ = ["messages_from_events"]


def messages_from_events(events: Iterable[dict[str, Any]]) -> list[Message]:
    """The model-facing history the events record.

    A tool call the log has no result for (the run was killed mid-turn) gets one
    saying so, so the history stays valid for any provider.
    """
    messages: list[Message] = []
    open_calls: dict[str, ToolCall] = {}

    def close_open() -> None:
        for call in open_calls.values():
            messages.append(
                Message("tool", "interrupted before it finished", tool_call_id=call.id, name=call.name, is_error=True)
            )
        open_calls.clear()

    for event in events:
        kind, payload = event["type"], event.get("payload") or {}
        if kind == "message":
            close_open()
            calls = tuple(
                ToolCall(c["id"], c["name"], dict(c.get("arguments") or {})) for c in payload.get("toolCalls", ())
            )
            messages.append(Message(payload["role"], payload.get("content", ""), calls))
            open_calls = {c.id: c for c in calls}
        elif kind == "tool_result" and payload.get("toolCallId") in open_calls:
            call = open_calls.pop(payload["toolCallId"])
            messages.append(
                Message(
                    "tool",
                    payload.get("output", ""),
                    tool_call_id=call.id,
                    name=call.name,
                    is_error=payload.get("status") != "ok",
                )
            )
    close_open()
    return messages
