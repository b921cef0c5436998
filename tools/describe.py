"""One-line descriptions of tool calls, for progress lines and live views."""

from __future__ import annotations

from typing import Any

__all__ = ["describe_call"]

_KEYS = ("path", "pattern", "command", "name", "task_id", "to")


def describe_call(name: str, arguments: dict[str, Any], width: int = 60) -> str:
    """``grep "TODO" src/``, ``edit_file app.py``, ``bash pytest -q``: the call at a glance."""
    if name == "grep":
        detail = f'"{arguments.get("pattern", "")}" {arguments.get("path", ".")}'
    elif name == "update_plan":
        steps = arguments.get("steps") or []
        detail = f"{len(steps)} steps" if isinstance(steps, list) else ""
    else:
        detail = next((str(arguments[k]) for k in _KEYS if isinstance(arguments.get(k), str)), "")
    detail = detail.strip().splitlines()[0] if detail.strip() else ""
    text = f"{name} {detail}".strip()
    return text if len(text) <= width else text[: width - 1] + "…"
