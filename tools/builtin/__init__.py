"""The built-in tools."""

from __future__ import annotations

from zero.tools.base import Tool
from zero.tools.builtin.files import EditFile, ListDirectory, ReadFile, WriteFile
from zero.tools.builtin.plan import UpdatePlan
from zero.tools.builtin.search import Glob, Grep
from zero.tools.builtin.shell import Bash

__all__ = [
    "Bash",
    "EditFile",
    "Glob",
    "Grep",
    "ListDirectory",
    "ReadFile",
    "UpdatePlan",
    "WriteFile",
    "builtin_tools",
]


def builtin_tools() -> list[Tool]:
    """One instance of every built-in tool."""
    return [ReadFile(), ListDirectory(), Glob(), Grep(), WriteFile(), EditFile(), Bash(), UpdatePlan()]
