"""What the shell and the editor show of a call that asks for approval, and what "allow for this
session" covers: one answer for both front ends.

An approval covers exactly what the user saw. The rule is computed from the call as it will run (never
from its redacted form), and it is narrow: a shell command covers itself, except a command of a known
read-only family (``git status``, ``ls``, ``grep`` ...), which covers the same family; a command that
chains, pipes, redirects, substitutes, globs, sets variables or wraps another program (``sh -c``, ``env``,
``find -exec``, ``python -m``) covers only itself; a sandboxed approval never covers a run outside the
sandbox; a file write covers that file. A request whose shown form hides shell syntax behind a mask is
never covered by a session allow.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zero.agent import ApprovalRequest

__all__ = ["HIDDEN_WARNING", "Edit", "SessionRule", "edit_of", "session_rule"]

HIDDEN_WARNING = (
    "a secret in this call holds shell syntax, so what is shown is not all of what would run; "
    "it can be allowed once, never for the session"
)
# What makes more than one simple command of a shell line, or lets the shell rewrite its words.
_COMPOUND = re.compile(r"[;&|<>`$()\n\\]")
_GLOB = re.compile(r"[*?\[\]{}~]")
# Read-only command families: allowing one for the session allows the family (its first words). Options
# that make one of them write or run a program are refused from the family.
_READ_ONLY: dict[tuple[str, ...], tuple[str, ...]] = {
    **{(word,): () for word in ("cat", "head", "tail", "wc", "ls", "pwd", "stat", "du", "df", "grep", "echo")},
    ("rg",): ("--pre",),
    **{("git", sub): ("--output", "--ext-diff", "--textconv") for sub in ("status", "log", "diff", "show", "blame")},
}


@dataclass(frozen=True)
class SessionRule:
    """What "allow for this session" covers: ``key`` matches later calls (from their arguments as they
    run); ``label`` says it to the user (from what was shown)."""

    key: str
    label: str


def session_rule(request: ApprovalRequest, root: Path) -> SessionRule | None:
    """The rule "allow for this session" would add for ``request``; None when it may add none."""
    if request.hidden:
        return None
    shown, real = request.shown, request.arguments
    if shown.name == "bash":
        command, label = real.get("command"), shown.arguments.get("command")
        if not isinstance(command, str) or not isinstance(label, str):
            return None
        where = "outside the sandbox" if real.get("outside_sandbox") is True else "in the sandbox"
        family = _family(command) if where == "in the sandbox" else None
        if family is not None:
            return SessionRule(f"bash {where}: {family} ...", f"`{family}` commands {where}")
        one_line = "\n" not in label.strip() and len(label) <= 60
        return SessionRule(
            f"bash {where}: {_exact(command)}", f"`{label.strip()}` {where}" if one_line else f"this command {where}"
        )
    if shown.name in ("write_file", "edit_file"):
        path = real.get("path")
        if not isinstance(path, str):
            return None
        where = _inside(path, root)
        return SessionRule(f"edit: {where}", f"edits of {where}")
    return SessionRule(f"tool: {shown.name}", shown.name)


def _family(command: str) -> str | None:
    """The read-only family ``command`` belongs to (``git status``), if it is a simple command of one."""
    if _COMPOUND.search(command) or _GLOB.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for size in (2, 1):
        family = tuple(words[:size])
        if len(family) == size and family in _READ_ONLY:
            refused = _READ_ONLY[family]
            if refused and any(word.startswith(refused) for word in words[size:]):
                return None
            return " ".join(family)
    return None


def _exact(command: str) -> str:
    """``command`` as one rule: its words re-quoted (so spacing does not matter but quoting does), or, for a
    line the shell would split or rewrite, the line itself."""
    if _COMPOUND.search(command):
        return command.strip()
    try:
        return shlex.join(shlex.split(command))
    except ValueError:
        return command.strip()


def _inside(path: str, root: Path) -> str:
    """``path`` as the workspace names it: relative to the root, tidied (``a/../b`` is ``b``)."""
    tidy = os.path.normpath(path if os.path.isabs(path) else os.path.join(root, path))
    return os.path.relpath(tidy, root) if Path(tidy).is_relative_to(root) else tidy


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
