"""The result envelope a parent's model reads back from a Task."""

from __future__ import annotations

from collections.abc import Iterable

from zero.agent import STATUS, Status, Usage, format_cost

__all__ = ["envelope"]


def envelope(
    *,
    session_id: str,
    status: Status,
    specialist: str,
    output: str,
    usage: Usage,
    turns: int,
    duration_ms: int,
    tools_used: Iterable[str] = (),
    files_changed: Iterable[str] = (),
    error: str | None = None,
    worktree: Iterable[str] = (),
    typed: bool = False,
) -> str:
    """``session_id`` first (so it can be resumed), then status, the facts, and the text (``typed``: the child
    ended with a result its output schema checked, which the text is, as JSON)."""
    lines = [f"session_id: {session_id}", f"status: {status}", f"specialist: {specialist}"]
    if status != "completed":
        lines.append(f"reason: {error or STATUS[status].reason}")
    lines.append(
        f"turns: {turns} · duration: {duration_ms / 1000:.1f} s · tokens: {usage.total_tokens} "
        f"({usage.prompt_tokens} prompt, {usage.completion_tokens} completion) · cost: {format_cost(usage)}"
    )
    tools = sorted(set(tools_used))
    lines.append(f"tools used: {', '.join(tools) if tools else 'none'}")
    files = sorted(set(files_changed))
    if files:
        lines.append(f"files changed: {', '.join(files)}")
    lines.extend(worktree)  # what a child in a worktree of its own left: its branch, and how to merge it
    if typed and status == "completed":
        lines.append("output: JSON, valid by the output schema")
    lines.append("---")
    lines.append(output.strip() or "(no output)")
    return "\n".join(lines)
