"""One-line descriptions of tool calls, for progress lines and live views."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["describe_call", "printable"]

# C0 and C1 control characters but newline and tab: an escape sequence from a model or a file must
# not reach the terminal (it could move the cursor, hide text, or change the window title).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: control characters are shown as ``\\x1b`` and the like."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text) if _CONTROL.search(text) else text


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
    lines = detail.strip().splitlines()
    detail = (lines[0] + (f" … (+{len(lines) - 1} lines)" if len(lines) > 1 else "")) if lines else ""
    text = printable(f"{name} {detail}".strip())
    return text if len(text) <= width else text[: width - 1] + "…"
