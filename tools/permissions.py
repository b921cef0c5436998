"""Permission modes: which side effects run, which need approval, which are refused.

========== ====== ====== ====== ======= =======
mode       read   write  shell  network config
========== ====== ====== ====== ======= =======
read-only  allow  deny   deny   deny    deny
ask        allow  prompt prompt prompt  prompt
auto       allow  allow  allow  prompt  prompt
unsafe     allow  allow  allow  allow   allow
========== ====== ====== ====== ======= =======

``config`` is a write of what Zero itself runs later (a specialist's manifest: an agent's prompt and
tools): as a network call, it is asked about even in ``auto``.

File tools are confined to the workspace in every mode. A headless run has no one to
ask, so ``prompt`` is answered "denied" and the model is told so.
"""

from __future__ import annotations

from typing import Literal, get_args

from zero.tools.base import SideEffect

__all__ = ["PERMISSION_MODES", "Decision", "PermissionMode", "decide", "narrower", "within"]

PermissionMode = Literal["read-only", "ask", "auto", "unsafe"]
Decision = Literal["allow", "prompt", "deny"]

PERMISSION_MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)

_TABLE: dict[PermissionMode, dict[SideEffect, Decision]] = {
    "read-only": {"read": "allow", "write": "deny", "shell": "deny", "network": "deny", "config": "deny"},
    "ask": {"read": "allow", "write": "prompt", "shell": "prompt", "network": "prompt", "config": "prompt"},
    "auto": {"read": "allow", "write": "allow", "shell": "allow", "network": "prompt", "config": "prompt"},
    "unsafe": {"read": "allow", "write": "allow", "shell": "allow", "network": "allow", "config": "allow"},
}

REASONS: dict[SideEffect, str] = {
    "read": "Reads files in the workspace.",
    "write": "Creates or overwrites files.",
    "shell": "Runs a shell command.",
    "network": "Reaches the network.",
    "config": "Saves a specialist: an agent's prompt and tools, which later runs use.",
}


def decide(mode: PermissionMode, side_effect: SideEffect) -> Decision:
    return _TABLE[mode][side_effect]


def narrower(a: PermissionMode, b: PermissionMode) -> PermissionMode:
    """The less permissive of two modes: a child never gets more than its caller."""
    return a if PERMISSION_MODES.index(a) <= PERMISSION_MODES.index(b) else b


def within(ceiling: PermissionMode, asked: PermissionMode | None, who: str) -> tuple[PermissionMode, str | None]:
    """The mode ``who`` asked for, if the ceiling allows it; a wider one is narrowed to the ceiling,
    and the second value says so. A team file, a manifest or a project config may narrow, never widen."""
    if asked is None:
        return ceiling, None
    mode = narrower(ceiling, asked)
    if mode != asked:
        return mode, f"{who} asks for permission mode {asked!r}; narrowed to {mode!r}, the ceiling of this run"
    return mode, None
