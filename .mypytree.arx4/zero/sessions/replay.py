"""Rebuilding a conversation from a session's events, for resume and fork."""

from __future__ import annotations

from collections.abc import Iterable

from zero.agent import Event, Message, ToolCall, compact_history

__all__ = ["messages_from_events"]


def messages_from_events(events: Iterable[Event]) -> list[Message]:
    """The model-facing history the events record.

    Each assistant message is followed by the results of its tool calls, in call order; a
    call the log has no result for (the run was killed mid-turn) gets one saying so, so the
    history stays valid for any provider.
    """
    messages: list[Message] = []
    open_calls: list[ToolCall] = []
    results: dict[str, Message] = {}

    def close_open() -> None:
        for call in open_calls:
            messages.append(
                results.get(call.id)
                or Message(
                    role="tool",
                    content="interrupted before it finished",
                    tool_call_id=call.id,
                    name=call.name,
                    is_error=True,
                )
            )
        open_calls.clear()
        results.clear()

    for event in events:
        if event.kind == "compaction":  # what came before is the summary now (the system prompt stays)
            close_open()
            messages[:] = compact_history(messages, event.summary)
        elif event.kind == "message":
            close_open()
            messages.append(event.message)
            open_calls.extend(event.tool_calls)
        elif event.kind == "tool_result" and any(c.id == event.tool_call_id for c in open_calls):
            call = next(c for c in open_calls if c.id == event.tool_call_id)
            results[call.id] = Message(
                role="tool", content=event.output, tool_call_id=call.id, name=call.name, is_error=event.status != "ok"
            )
    close_open()
    return messages
