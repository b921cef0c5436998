"""stream-json, schema version 2: the output writer and the input reader.

See docs/STREAM_JSON_PROTOCOL.md. Every output line carries ``schemaVersion`` and
``runId``; events of a child agent also carry its ``sessionId``. Output is redacted.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TextIO

from zero.agent import RunEvent
from zero.errors import UsageError, ZeroError
from zero.tools import redact

__all__ = ["SCHEMA_VERSION", "StreamJsonWriter", "new_run_id", "read_input", "run_end_status"]

SCHEMA_VERSION = 2


def new_run_id() -> str:
    return f"run_{datetime.now(UTC):%Y%m%d}_{secrets.token_hex(4)}"


def run_end_status(status: str) -> str:
    """The protocol's ``run_end.status`` for a run status."""
    if status == "completed":
        return "success"
    if status in ("interrupted", "cancelled"):
        return "interrupted"
    if status in ("max_turns", "budget_exhausted", "timed_out"):
        return "incomplete"
    return "error"


class StreamJsonWriter:
    """A run-event consumer writing protocol lines to ``out``, flushed one by one."""

    def __init__(
        self,
        out: TextIO,
        run_id: str,
        root_session_id: str,
        *,
        redactor: Callable[[str], str] = redact,
    ):
        self.out = out
        self.run_id = run_id
        self.root_session_id = root_session_id
        self._redact = redactor

    def emit(self, type_: str, fields: dict[str, Any], session_id: str | None = None) -> None:
        line: dict[str, Any] = {"schemaVersion": SCHEMA_VERSION, "type": type_, "runId": self.run_id}
        if session_id is not None and session_id != self.root_session_id:
            line["sessionId"] = session_id
        line.update(fields)
        self.out.write(self._redact(json.dumps(line, ensure_ascii=False, separators=(",", ":"))) + "\n")
        self.out.flush()

    @classmethod
    def setup_failure(cls, out: TextIO, run_id: str, e: ZeroError) -> None:
        """A run that failed before it started still ends with error and run_end."""
        writer = cls(out, run_id, "")
        writer.error(e.code, str(e))
        writer.run_end("failed", e.exit_code)

    def error(self, code: str, message: str, *, recoverable: bool = False, session_id: str | None = None) -> None:
        self.emit("error", {"code": code, "message": message, "recoverable": recoverable}, session_id)

    def run_end(self, status: str, exit_code: int) -> None:
        self.emit("run_end", {"status": run_end_status(status), "exitCode": exit_code})

    async def __call__(self, event: RunEvent) -> None:
        sid = event.session_id
        if event.kind == "run_started":
            if sid == self.root_session_id:
                self.emit(
                    "run_start",
                    {
                        "sessionId": sid,
                        "cwd": event.cwd,
                        "provider": event.provider,
                        "model": event.model,
                        "apiModel": event.model,
                    },
                )
        elif event.kind == "text":
            self.emit("text", {"delta": event.delta}, sid)
        elif event.kind == "reasoning":
            self.emit("reasoning", {"delta": event.delta}, sid)
        elif event.kind == "tool_call":
            self.emit(
                "tool_call",
                {
                    "id": event.call.id,
                    "name": event.call.name,
                    "args": event.call.arguments,
                    "sideEffect": event.side_effect,
                },
                sid,
            )
        elif event.kind == "permission_request":
            self.emit(
                "permission_request",
                {
                    "id": event.call_id,
                    "name": event.name,
                    "action": "prompt",
                    "permission": "prompt",
                    "permissionMode": event.permission_mode,
                    "sideEffect": event.side_effect,
                    "reason": event.reason,
                },
                sid,
            )
        elif event.kind == "permission_decision":
            self.emit(
                "permission_decision",
                {
                    "id": event.call_id,
                    "name": event.name,
                    "action": "allow" if event.granted else "deny",
                    "permission": "prompt",
                    "permissionGranted": event.granted,
                    "decisionReason": event.reason,
                },
                sid,
            )
        elif event.kind == "tool_result":
            self.emit(
                "tool_result",
                {"id": event.call_id, "status": event.status, "output": event.output, "truncated": event.truncated},
                sid,
            )
        elif event.kind == "usage":
            u = event.usage
            self.emit(
                "usage",
                {
                    "promptTokens": u.prompt_tokens,
                    "completionTokens": u.completion_tokens,
                    "totalTokens": u.total_tokens,
                },
                sid,
            )
        elif event.kind == "retry":
            self.emit(
                "warning",
                {
                    "code": "retry",
                    "message": f"{event.message}; retrying in {event.delay:.1f} s (attempt {event.attempt})",
                },
                sid,
            )
        elif event.kind == "subagent_started":
            fields = {
                "sessionId": sid,
                "parentSessionId": event.parent_session_id,
                "rootSessionId": event.root_session_id,
                "agentName": event.agent_name,
                "specialist": event.specialist,
            }
            if event.member is not None:
                fields["member"] = event.member
            self.emit("subagent_start", fields)
        elif event.kind == "subagent_finished":
            self.emit(
                "subagent_end",
                {
                    "sessionId": sid,
                    "status": event.status,
                    "usage": event.usage.to_json(),
                    "costUsd": event.usage.to_json()["costUsd"],
                    "durationMs": event.duration_ms,
                },
            )
        elif event.kind == "run_finished" and sid == self.root_session_id and event.result.status == "completed":
            self.emit("final", {"text": event.result.output})


_INPUT_FIELDS = {
    "message": {"schemaVersion", "type", "role", "content"},
    "prompt": {"schemaVersion", "type", "content"},
}


def read_input(lines: Iterable[str], source: str = "stdin") -> str:
    """Combine stream-json input events into one prompt, separated by blank lines.

    Unknown fields, types and versions are rejected, naming the line, so clients
    catch protocol drift early.
    """
    parts: list[str] = []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        where = f"{source} line {number}"
        try:
            event = json.loads(raw)
        except json.JSONDecodeError as e:
            raise UsageError(f"{where}: not valid JSON ({e.msg})") from e
        if not isinstance(event, dict):
            raise UsageError(f"{where}: each line must be a JSON object")
        if event.get("schemaVersion") != SCHEMA_VERSION:
            raise UsageError(f"{where}: schemaVersion must be {SCHEMA_VERSION}, got {event.get('schemaVersion')!r}")
        kind = event.get("type")
        if kind not in _INPUT_FIELDS:
            raise UsageError(f"{where}: unknown event type {kind!r}; expected 'message' or 'prompt'")
        unknown = sorted(set(event) - _INPUT_FIELDS[kind])
        if unknown:
            raise UsageError(f"{where}: unknown field {unknown[0]!r} in a {kind} event")
        if kind == "message" and event.get("role") != "user":
            raise UsageError(f"{where}: a message event must have role 'user', got {event.get('role')!r}")
        content = event.get("content")
        if not isinstance(content, str):
            raise UsageError(f"{where}: content must be a string")
        parts.append(content)
    if not parts:
        raise UsageError(f"{source}: no message or prompt events")
    return "\n\n".join(parts)
