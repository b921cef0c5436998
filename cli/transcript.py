"""A session as a reader wants it: the transcript ``zero sessions show`` prints and ``export`` writes.

Messages, each tool call with its arguments and its (trimmed) result, permission decisions,
retries, warnings and errors, the usage of every model call, how each run ended and why, and for
each ``Task`` the child's id, specialist, status and cost; with ``children`` the children's own
transcripts, nested where they ran. ``markdown`` gives the same as a Markdown document.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import assert_never

from zero.agent import (
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
    StatusChanged,
    TeamFinished,
    TeamMessageSent,
    TeamStarted,
    ToolCallStarted,
    ToolFinished,
    Usage,
    UsageUpdated,
    WarningRaised,
    format_cost,
    waiting_text,
)
from zero.orchestrator.view import landing_state
from zero.sessions import Rollup, SessionMetadata, SessionStore
from zero.tools.describe import printable
from zero.tools.worktrees import DiffStat

__all__ = ["Transcript"]

MESSAGE_CHARS = 2_000
RESULT_LINES = 12
RESULT_CHARS = 1_200


@dataclass(kw_only=True)
class Transcript:
    store: SessionStore
    children: bool = False
    full: bool = False
    markdown: bool = False
    _rollups: dict[str, Rollup] = field(default_factory=dict, init=False, repr=False)  # by run
    _shown: set[str] = field(default_factory=set, init=False, repr=False)  # children printed so far

    def _with_children(self, meta: SessionMetadata) -> Usage:
        """What the session and every session below it spent (the fold every view totals with)."""
        run = meta.root_session_id or meta.session_id
        if run not in self._rollups:
            self._rollups[run] = Rollup.of_rows([meta.to_json(), *self.store.rows(tree=run)])
        return self._rollups[run].subtree(meta.session_id)

    def lines(self, session_id: str, depth: int = 0) -> Iterator[str]:
        meta = self.store.metadata(session_id)
        events = self.store.events(session_id)  # (before the header: a damaged log prints nothing)
        pad = "" if self.markdown else "    " * depth
        for line in self._header(meta, depth):
            yield pad + line
        if not events:
            yield pad + "(no events yet: the session's log is empty)"
        for stored in events:
            event = stored.event
            for line in self._event(event, stored.sequence):
                yield pad + line
            if self.children and isinstance(event, ChildStarted):
                if event.child_session_id in self._shown:  # (a member resumed by the team's next run: once)
                    yield pad + "    (its transcript is above: it covers every run of it)"
                    continue
                self._shown.add(event.child_session_id)
                yield from self.lines(event.child_session_id, depth + 1)

    # -- pieces ---------------------------------------------------------------------

    def _header(self, meta: SessionMetadata, depth: int) -> list[str]:
        who = meta.member_name or meta.specialist or meta.agent_name or "zero"
        kind = meta.session_kind or "root"
        title = f"session {meta.session_id} · {kind} · {who} · {meta.status}"
        facts = [
            f"title: {printable(meta.title)}" if meta.title else "",
            f"model: {meta.provider}/{meta.model_id}" if meta.model_id else "",
            f"workspace: {printable(meta.cwd)}" if meta.cwd else "",
            f"parent: {meta.parent_session_id}" if meta.parent_session_id else "",
            f"forked from: {meta.forked_from} at event {meta.forked_at_sequence}" if meta.forked_from else "",
            f"created {meta.created_at} · updated {meta.updated_at}",
            f"usage: own {_usage(meta.usage.to_usage())} · with children {_usage(self._with_children(meta))}",
        ]
        if self.markdown:
            return ["", f"{'#' * min(depth + 2, 6)} {title}", "", *(f"- {f}" for f in facts if f), ""]
        return ["", title, *(f"  {f}" for f in facts if f), ""]

    def _event(self, e: Event, sequence: int) -> list[str]:  # noqa: C901 - one branch a kind
        at = f"#{sequence} "
        match e:
            case RunStarted():
                return [f"{at}── run starts · {e.provider}/{e.model}"]
            case MessageAdded():
                return self._message(e, at)
            case ToolCallStarted():
                arguments = printable(self._trim_line(json.dumps(e.arguments, ensure_ascii=False)))
                effect = f" [{e.side_effect}]" if e.side_effect != "read" else ""
                return [f"{at}→ {e.name}{effect} {arguments}"]
            case ToolFinished():
                return self._result(e, at)
            case PermissionRequested():
                return [f"{at}? {e.name} needs approval ({e.side_effect}): {e.reason}"]
            case PermissionDecided():
                return [f"{at}  {'granted' if e.granted else 'denied'}: {e.reason}"]
            case UsageUpdated():
                usage = e.usage
                estimate = " (estimated)" if usage.estimated else ""
                line = f"{usage.prompt_tokens:,} in / {usage.completion_tokens:,} out{estimate} · {format_cost(usage)}"
                return [f"{at}  · model call: {line}"]
            case RetryScheduled():
                return [f"{at}↻ retry {e.attempt} in {e.delay_seconds:.1f} s: {e.code}: {printable(e.message)}"]
            case RateLimitWait():
                return [f"{at}… {waiting_text(e)}"]
            case Paused():
                return [f"{at}{'⏸ paused: waits before its next model call' if e.paused else '▶ continues'}"]
            case WarningRaised():
                return [f"{at}! {e.code}: {printable(e.message)}"]
            case Compacted():
                summary = printable(self._trim(e.summary, MESSAGE_CHARS)).splitlines() or [""]
                return [f"{at}── compacted: {e.replaced} messages became this summary:", *(f"    {s}" for s in summary)]
            case ErrorRaised():
                return [f"{at}✗ {e.code}: {printable(e.message)}"]
            case RunFinished():
                turns = f"{e.turns:,} turn{'' if e.turns == 1 else 's'}"
                ended = f"{at}── run ends {e.status} · {turns} · {e.duration_ms / 1000:.1f} s · {_usage(e.usage)}"
                if e.structured_output is None:
                    return [ended]
                result = printable(self._trim_line(json.dumps(e.structured_output, ensure_ascii=False)))
                return [ended, f"    result (valid by its output schema): {result}"]
            case StatusChanged():
                return [f"{at}── {e.status}" + (f": {printable(e.reason)}" if e.reason else "")]
            case ChildStarted():
                label = f": {printable(e.description)}" if e.description else ""
                return [f"{at}⇢ {e.name} {e.child_session_id} ({e.mode}){label}"]
            case ChildFinished():
                reason = f" ({printable(e.reason)})" if e.reason else ""
                who = e.member or e.specialist
                took = f"{e.duration_ms / 1000:.1f} s"
                return [f"{at}⇠ {who} {e.child_session_id} {e.status}{reason} · {took} · {_usage(e.usage)}"]
            case TeamStarted():
                members = ", ".join(f"{m.name} ({m.specialist})" for m in e.members)
                return [f"{at}── team {e.team} starts: {members}"]
            case TeamMessageSent():
                return [f"{at}✉ {e.sender} → {e.to}: {printable(self._trim(e.body, MESSAGE_CHARS))}"]
            case BudgetTripped():
                return [f"{at}! budget: {e.message}"]
            case LandChanged():
                stat = DiffStat(files=e.files, added=e.added, removed=e.removed)
                return [f"{at}⎇ {e.member} {e.branch} {stat} · {landing_state(e)}"]
            case TeamFinished():
                reason = f": {printable(e.reason)}" if e.reason else ""
                return [f"{at}── team ends {e.status}{reason} · {_usage(e.usage)}"]
            case AssistantText() | Reasoning() | ModelStreaming():  # shown live, never stored
                return []
            case _:
                assert_never(e)

    def _message(self, e: MessageAdded, at: str) -> list[str]:
        role, content = e.role, e.content
        if role == "system":
            return [f"{at}system prompt ({len(content):,} characters)"]
        if not content.strip():
            return []
        text = printable(self._trim(content, MESSAGE_CHARS))
        if self.markdown:
            return ["", f"**{role}**:", "", text, ""]
        first, *rest = text.splitlines() or [""]
        return [f"{at}{role}: {first}", *(f"    {line}" for line in rest)]

    def _result(self, e: ToolFinished, at: str) -> list[str]:
        output = e.output
        lines = output.splitlines()
        shown = lines if self.full else lines[:RESULT_LINES]
        text = "\n".join(shown)
        if not self.full and len(text) > RESULT_CHARS:
            text = text[:RESULT_CHARS]
        more = ""
        if not self.full and (len(shown) < len(lines) or len(text) < len("\n".join(shown))):
            more = f"… ({len(lines)} lines, {len(output):,} characters; --full shows it all)"
        changed = f" · changed {', '.join(e.changed_files)}" if e.changed_files else ""
        head = f"{at}← {e.status}{changed}"
        if self.markdown:  # (fenced by more backticks than any run in it: a ``` of its own ends nothing)
            fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
            return [head, "", fence, printable(text), *([more] if more else []), fence, ""]
        return [head, *(f"    {printable(line)}" for line in text.splitlines()), *([f"    {more}"] if more else [])]

    def _trim(self, text: str, limit: int) -> str:
        if self.full or len(text) <= limit:
            return text
        return text[:limit] + f"… ({len(text):,} characters; --full shows it all)"

    def _trim_line(self, text: str) -> str:
        return text if self.full or len(text) <= 300 else text[:300] + "…"


def _usage(usage: Usage) -> str:
    tokens = f"{'~' if usage.estimated else ''}{usage.total_tokens:,} tokens"
    return f"{tokens}, {format_cost(usage)}"
