"""What the shell and the editor show of a call that asks for approval, and what "allow for this
session" covers: one answer for both front ends."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zero.agent import PermissionRequested

__all__ = ["Edit", "edit_of", "session_rule"]

_COMPOUND = re.compile(r"[;&|<>`$()\n\\]")  # what makes more than one simple command of a shell line


def session_rule(request: PermissionRequested) -> str:
    """What "allow for this session" covers: a simple shell command's first words (``git status``), a
    command that chains, pipes, redirects or substitutes only itself (else allowing ``git status``
    would allow ``git status && curl ... | sh``), and any other call its tool."""
    command = request.arguments.get("command")
    if request.name != "bash" or not isinstance(command, str):
        return request.name
    if _COMPOUND.search(command):
        return f"bash:{command}"
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return f"bash:{' '.join(words[:2])}"


@dataclass(frozen=True)
class Edit:
    """A file write or edit as a change: the path, the text before (None: a new file) and after."""

    path: Path
    before: str | None
    after: str


def edit_of(name: str, arguments: dict[str, Any], root: Path) -> Edit | None:
    """The change ``write_file`` or ``edit_file`` would make, or None for any other call."""
    path = arguments.get("path")
    if name not in ("write_file", "edit_file") or not isinstance(path, str):
        return None
    target = root / path
    try:  # what is there now, if it is in the workspace (the tool refuses any other path anyway)
        inside = target.resolve().is_relative_to(root.resolve())
        before = target.read_text("utf-8") if inside and target.is_file() else None
    except (OSError, UnicodeDecodeError):
        before = None
    if name == "write_file":
        after = str(arguments.get("content", ""))
    else:
        after = (before or "").replace(str(arguments.get("old_text", "")), str(arguments.get("new_text", "")), 1)
    return Edit(target, before, after)
