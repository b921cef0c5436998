"""stream-json, schema version 2: the output writer and the input reader.

See docs/STREAM_JSON_PROTOCOL.md. Every output line carries ``schemaVersion`` and
``runId``; events of a child agent also carry its ``sessionId``. Output is redacted.
The writer is a consumer of a run's events: one ``match`` maps each kind of event.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TextIO, assert_never

from anyio.streams.memory import MemoryObjectReceiveStream

from zero.agent import (
    STATUS,
    AssistantText,
    BudgetTripped,
    ChildFinished,
    ChildStarted,
    Compacted,
    ErrorRaised,
    Event,
    LandChanged,
    MessageAdded,
    ModelStreaming,
    Paused,
    PermissionDecided,
    PermissionRequested,
    RateLimitWait,
    Reasoning,
    RetryScheduled,
    RunFinished,
    RunStarted,
    Status,
    StatusChanged,
    TeamFinished,
    TeamMessageSent,
    TeamStarted,
    ToolCallStarted,
    ToolFinished,
    UsageUpdated,
    WarningRaised,
    exit_code,
    incomplete_message,
)
from zero.errors import UsageError, ZeroError
from zero.tools import Redactor, redact_values

__all__ = ["SCHEMA_VERSION", "StreamJsonWriter", "new_run_id", "read_input", "run_end_status"]

SCHEMA_VERSION = 2


def new_run_id() -> str:
    return f"run_{datetime.now(UTC):%Y%m%d}_{secrets.token_hex(4)}"


def run_end_status(status: Status) -> str:
    """The protocol's ``run_end.status`` for a run status."""
    return STATUS[status].outcome


class StreamJsonWriter:
    """Writes protocol lines for the events of the run whose top session is ``root_session_id``;
    the top session's end writes ``final`` (or ``error``) and ``run_end``."""

    def __init__(
        self,
        out: TextIO,
        run_id: str,
        root_session_id: str,
        *,
        redactor: Callable[[str], str] | None = None,
    ):
        self.out = out
        self.run_id = run_id
        self.root_session_id = root_session_id
        self._redact = redactor or Redactor()
        self._error: ErrorRaised | None = None
        self._started: set[str] = set()  # the children whose subagent_start was written
        self._results: dict[str, Any] = {}  # the typed results of children whose subagent_end is still to come
        self.exit_code: int | None = None  # set by the top session's end

    def emit(
        self, type_: str, fields: dict[str, Any], session_id: str | None = None, *, redacted: bool = False
    ) -> None:
        """Write one line. Its fields' values are redacted (never a key or the structure), unless
        ``redacted``: the deltas of an answer, which a ``StreamRedactor`` redacted at their source
        (one delta alone could not show a secret split across deltas anyway)."""
        line: dict[str, Any] = {"schemaVersion": SCHEMA_VERSION, "type": type_, "runId": self.run_id}
        if session_id is not None and session_id != self.root_session_id:
            line["sessionId"] = session_id
        line.update(fields if redacted else redact_values(self._redact, fields))
        self.out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")

    @classmethod
    def setup_failure(cls, out: TextIO, run_id: str, e: ZeroError) -> None:
        """A run that failed before it started still ends with error and run_end."""
        writer = cls(out, run_id, "")
        writer.error(e.code, str(e))
        writer.run_end("failed", e.exit_code)

    def error(self, code: str, message: str, *, recoverable: bool = False, session_id: str | None = None) -> None:
        self.emit("error", {"code": code, "message": message, "recoverable": recoverable}, session_id)

    def run_end(self, status: Status, code: int) -> None:
        self.exit_code = code
        self.emit("run_end", {"status": run_end_status(status), "exitCode": code})

    async def consume(self, events: MemoryObjectReceiveStream[Event]) -> None:
        async with events:
            async for event in events:
                self.write(event)

    def write(self, event: Event) -> None:
        sid = event.session_id
        root = sid == self.root_session_id
        fields: dict[str, Any]
        match event:
            case RunStarted():
                if root:
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
            case TeamStarted():
                if root:
                    fields = {"sessionId": sid, "cwd": event.cwd, "provider": event.provider, "model": event.model}
                    self.emit("run_start", {**fields, "apiModel": event.model})
            case AssistantText():
                self.emit("text", {"delta": event.delta}, sid, redacted=True)
            case Reasoning():
                self.emit("reasoning", {"delta": event.delta}, sid, redacted=True)
            case ToolCallStarted():
                fields = {
                    "id": event.id,
                    "name": event.name,
                    "args": event.arguments,
                    "sideEffect": event.side_effect,
                }
                self.emit("tool_call", fields, sid)
            case PermissionRequested():
                self.emit(
                    "permission_request",
                    {
                        "id": event.id,
                        "name": event.name,
                        "action": "prompt",
                        "permission": "prompt",
                        "permissionMode": event.permission_mode,
                        "sideEffect": event.side_effect,
                        "reason": event.reason,
                    },
                    sid,
                )
            case PermissionDecided():
                self.emit(
                    "permission_decision",
                    {
                        "id": event.id,
                        "name": event.name,
                        "action": "allow" if event.granted else "deny",
                        "permission": "prompt",
                        "permissionGranted": event.granted,
                        "decisionReason": event.reason,
                    },
                    sid,
                )
            case ToolFinished():
                fields = {"id": event.tool_call_id, "status": event.status, "output": event.output}
                self.emit("tool_result", {**fields, "truncated": event.truncated}, sid)
            case UsageUpdated():
                u = event.usage
                fields = {"promptTokens": u.prompt_tokens, "completionTokens": u.completion_tokens}
                if u.estimated:  # the server reported none: Zero's estimate
                    fields["estimated"] = True
                self.emit("usage", {**fields, "totalTokens": u.total_tokens}, sid)
            case RetryScheduled():
                message = f"{event.message}; retrying in {event.delay_seconds:.1f} s (attempt {event.attempt})"
                self.emit("warning", {"code": "retry", "message": message}, sid)
            case RateLimitWait():
                self.emit("rate_limit", {"reason": event.reason, "waitSeconds": event.wait_seconds}, sid)
            case Paused():
                self.emit("pause", {"paused": event.paused}, sid)
            case WarningRaised():
                self.emit("warning", {"code": event.code, "message": event.message}, sid)
            case BudgetTripped():
                self.emit("warning", {"code": "budget_exhausted", "message": event.message}, sid)
            case LandChanged():
                stat = {"files": event.files, "added": event.added, "removed": event.removed}
                fields = {"member": event.member, "state": event.state, "branch": event.branch, "diffStat": stat}
                self.emit("land", {**fields, "conflicts": list(event.conflicts), "detail": event.detail}, sid)
            case ErrorRaised():
                if root:
                    self._error = event  # written with the run's end
            case ChildStarted():
                self._subagent_start(event.child_session_id, sid, event.root_session_id, event.name, event)
            case ChildFinished():
                if event.child_session_id not in self._started:  # a member that never ran (skipped) is framed too
                    name = event.member or event.specialist
                    self._subagent_start(event.child_session_id, sid, "", name, event)
                usage = event.usage.to_json()
                fields = {"sessionId": event.child_session_id, "status": event.status, "usage": usage}
                if event.branch:  # a child in a worktree of its own: the branch its work is on
                    fields.update(branch=event.branch, diffStat=event.diff_stat)
                if (result := self._results.pop(event.child_session_id, None)) is not None:
                    fields["structuredOutput"] = result  # a typed child's result, as it submitted it
                self.emit("subagent_end", {**fields, "costUsd": usage["costUsd"], "durationMs": event.duration_ms})
            case RunFinished():
                if not root and event.structured_output is not None:
                    self._results[sid] = event.structured_output  # for its subagent_end
                if root:
                    if event.status == "completed":
                        typed = {} if event.structured_output is None else {"structuredOutput": event.structured_output}
                        self.emit("final", {"text": event.output, **typed})
                    self._end(event.status, incomplete_message(event.status, event.turns))
            case TeamFinished():
                if root:
                    self._end(event.status, event.reason or event.status, event.error_code)
            case MessageAdded() | StatusChanged() | TeamMessageSent() | Compacted() | ModelStreaming():
                pass  # a compaction is announced by its "compacted" warning; the text streams as it comes
            case _:
                assert_never(event)

    def _subagent_start(
        self, child: str, parent: str, root: str, name: str, event: ChildStarted | ChildFinished
    ) -> None:
        self._started.add(child)
        fields = {
            "sessionId": child,
            "parentSessionId": parent,
            "rootSessionId": root or self.root_session_id,
            "agentName": name,
            "specialist": event.specialist,
        }
        if event.member is not None:
            fields["member"] = event.member
        self.emit("subagent_start", fields)

    def _end(self, status: Status, message: str, error_code: str | None = None) -> None:
        error = self._error
        code = error.code if error else error_code
        if status != "completed":
            self.error(code or status, error.message if error else message, recoverable=STATUS[status].resumes)
        self.run_end(status, exit_code(status, code))


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
        if "type" not in event:
            raise UsageError(f'{where}: a line of stream-json input needs a "type" ("message" or "prompt")')
        if "schemaVersion" not in event:
            raise UsageError(f'{where}: a line of stream-json input needs "schemaVersion": {SCHEMA_VERSION}')
        if event["schemaVersion"] != SCHEMA_VERSION:
            raise UsageError(f"{where}: schemaVersion must be {SCHEMA_VERSION}, got {event['schemaVersion']!r}")
        kind = event["type"]
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
        if not content.strip():  # (as a blank prompt argument is refused: there is nothing to ask)
            raise UsageError(f"{where}: content is {'blank' if content else 'empty'}: give the prompt's text")
        parts.append(content)
    if not parts:
        raise UsageError(f"{source}: no message or prompt events")
    return "\n\n".join(parts)
