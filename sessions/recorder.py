"""The session recorder: a run-event consumer that commits each turn as one batch."""

from __future__ import annotations

from typing import Any

from zero.agent import Message, RunEvent, Usage
from zero.sessions.models import TERMINAL, SessionMetadata, UsageTotals
from zero.sessions.store import SessionStore

__all__ = ["SessionRecorder", "message_payload"]

Batch = list[tuple[str, dict[str, Any]]]


def message_payload(m: Message) -> dict[str, Any]:
    payload: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        payload["toolCalls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
    return payload


class SessionRecorder:
    """Writes one agent's events to its session.

    Streaming deltas are not stored; the whole assistant message is, with the turn's
    tool calls, results and usage, in ONE batch when the turn completes, so a reader
    (or a resume) never sees half a turn. Events of other sessions are ignored.
    """

    def __init__(self, store: SessionStore, session_id: str):
        self.store = store
        self.session_id = session_id
        self._pending: Batch = []
        self._pending_usage = Usage()
        self._answered: set[str] = set()
        self._last_turn: Batch = []  # the answer's turn, written with run_end in one batch

    async def __call__(self, event: RunEvent) -> None:
        if event.session_id != self.session_id:
            return
        if event.kind == "run_started":
            batch: Batch = [("run_start", {"provider": event.provider, "model": event.model, "cwd": event.cwd})]
            batch += [("message", message_payload(m)) for m in event.messages]
            self._write(batch, status="running")
        elif event.kind == "tool_call":
            c = event.call
            self._pending.append(
                ("tool_call", {"id": c.id, "name": c.name, "arguments": c.arguments, "sideEffect": event.side_effect})
            )
        elif event.kind == "permission_request":
            self._pending.append(
                (
                    "permission_request",
                    {
                        "id": event.call_id,
                        "name": event.name,
                        "sideEffect": event.side_effect,
                        "permissionMode": event.permission_mode,
                        "reason": event.reason,
                    },
                )
            )
        elif event.kind == "permission_decision":
            self._pending.append(
                (
                    "permission_decision",
                    {"id": event.call_id, "name": event.name, "granted": event.granted, "reason": event.reason},
                )
            )
        elif event.kind == "tool_result":
            self._answered.add(event.call_id)
            self._pending.append(
                (
                    "tool_result",
                    {
                        "toolCallId": event.call_id,
                        "name": event.name,
                        "status": event.status,
                        "output": event.output,
                        "truncated": event.truncated,
                        "changedFiles": list(event.changed_files),
                        "durationMs": event.duration_ms,
                    },
                )
            )
        elif event.kind == "usage":
            self._pending_usage = self._pending_usage + event.usage
            self._pending.append(("usage", {"model": event.model, **event.usage.to_json()}))
        elif event.kind == "retry":
            self._pending.append(
                (
                    "retry",
                    {
                        "attempt": event.attempt,
                        "delaySeconds": round(event.delay, 3),
                        "code": event.code,
                        "message": event.message,
                    },
                )
            )
        elif event.kind == "turn_completed":
            batch = []
            for m in event.messages:
                if m.role == "tool":
                    if m.tool_call_id not in self._answered:
                        batch.append(
                            (
                                "tool_result",
                                {
                                    "toolCallId": m.tool_call_id,
                                    "name": m.name,
                                    "status": "error",
                                    "output": m.content,
                                    "truncated": False,
                                    "changedFiles": [],
                                },
                            )
                        )
                else:
                    batch.append(("message", message_payload(m)))
                    batch += self._pending  # the calls and results belong after the assistant message
                    self._pending = []
            self._answered.clear()
            batch += self._take()
            if any(m.role == "assistant" and not m.tool_calls for m in event.messages):
                self._last_turn = batch  # the model answered: run_end follows at once, in the same batch
            else:
                self._write(batch)
        elif event.kind == "run_finished":
            result = event.result
            batch, self._last_turn = self._last_turn + self._take(), []
            if result.error:
                batch.append(("error", {"code": result.error_code, "message": result.error}))
            batch.append(
                (
                    "run_end",
                    {
                        "status": result.status,
                        "turns": result.turns,
                        "durationMs": result.duration_ms,
                        "usage": result.usage.to_json(),
                    },
                )
            )
            self._write(batch, status=result.status)

    def _take(self) -> Batch:
        taken, self._pending = self._pending, []
        return taken

    def _write(self, batch: Batch, status: str | None = None) -> None:
        usage, self._pending_usage = self._pending_usage, Usage()

        def update(meta: SessionMetadata) -> None:
            if usage.calls:
                meta.usage = UsageTotals.of(meta.usage.to_usage() + usage)
            if status is not None:
                meta.status = status

        # Handed to the store's writer without waiting; the metadata follows with the run's last batch.
        self.store.submit(self.session_id, batch, update, final=status in TERMINAL)
