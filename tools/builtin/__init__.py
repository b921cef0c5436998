"""The built-in tools."""

from __future__ import annotations

from zero.tools.base import Tool
from zero.tools.builtin.edits import (
    PREVIEW_BYTES,
    EditFile,
    EditPlan,
    Pin,
    WriteFile,
    pinned,
    plan_edit,
    plan_replace,
    replace_file,
    unowned_call,
)
from zero.tools.builtin.files import ListDirectory, ReadFile
from zero.tools.builtin.plan import UpdatePlan
from zero.tools.builtin.search import Glob, Grep
from zero.tools.builtin.shell import Bash

__all__ = [
    "PREVIEW_BYTES",
    "Bash",
    "EditFile",
    "EditPlan",
    "Glob",
    "Grep",
    "ListDirectory",
    "Pin",
    "ReadFile",
    "UpdatePlan",
    "WriteFile",
    "builtin_tools",
    "pinned",
    "plan_edit",
    "plan_replace",
    "replace_file",
    "unowned_call",
]


def builtin_tools() -> list[Tool]:
    """One instance of every built-in tool."""
    return [ReadFile(), ListDirectory(), Glob(), Grep(), WriteFile(), EditFile(), Bash(), UpdatePlan()]
