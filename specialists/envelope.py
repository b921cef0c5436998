"""The result envelope a parent's model reads back from a Task."""

from __future__ import annotations

from collections.abc import Iterable

from zero.agent import Usage, format_cost

__all__ = ["envelope"]

_REASONS = {
    "failed": "the specialist failed",
    "cancelled": "stopped before it finished (TaskStop, or its parent ended); partial output below",
    "interrupted": "interrupted (Ctrl-C/SIGTERM); partial output below",
    "timed_out": "its timeout_seconds ran out; partial output below",
    "budget_exhausted": "its budget ran out; partial output below",
    "max_turns": "it reached its max_turns; partial output below",
}


def envelope(
    *,
    session_id: str,
    status: str,
    specialist: str,
    output: str,
    usage: Usage,
    turns: int,
    duration_ms: int,
    tools_used: Iterable[str] = (),
    files_changed: Iterable[str] = (),
    error: str | None = None,
) -> str:
    """``session_id`` first (so it can be resumed), then status, the facts, and the text."""
    lines = [f"session_id: {session_id}", f"status: {status}", f"specialist: {specialist}"]
    if status != "completed":
        lines.append(f"reason: {error or _REASONS.get(status, status)}")
    lines.append(
        f"turns: {turns} · duration: {duration_ms / 1000:.1f} s · tokens: {usage.total_tokens} "
        f"({usage.prompt_tokens} prompt, {usage.completion_tokens} completion) · cost: {format_cost(usage)}"
    )
    tools = sorted(set(tools_used))
    lines.append(f"tools used: {', '.join(tools) if tools else 'none'}")
    files = sorted(set(files_changed))
    if files:
        lines.append(f"files changed: {', '.join(files)}")
    lines.append("---")
    lines.append(output.strip() or "(no output)")
    return "\n".join(lines)
