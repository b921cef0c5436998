"""Output budgeting: keep the head and the tail of a long output, and say what was cut."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_CHARS", "budget_output"]

DEFAULT_MAX_CHARS = 24_000


def budget_output(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> tuple[str, bool]:
    """Return ``(text, truncated)``; a long text keeps its first and last lines whole."""
    if len(text) <= max_chars:
        return text, False
    half = max_chars // 2
    head = text[:half]
    tail = text[-half:]
    # Cut on line boundaries when there are any, so no line is shown half.
    if "\n" in head:
        head = head[: head.rfind("\n") + 1]
    if "\n" in tail:
        tail = tail[tail.find("\n") + 1 :]
    cut = text[len(head) : len(text) - len(tail)]
    note = f"\n[... {cut.count(chr(10))} lines, {len(cut)} characters cut from the middle ...]\n"
    return head + note + tail, True
