"""Tools: the protocol, the registry, built-in tools, permissions, confinement, redaction; and the git
worktrees writers work in (snapshots, member worktrees, ownership globs)."""

from __future__ import annotations

from zero.tools._sandbox import hide_own_secrets
from zero.tools.base import ArgsModel, BuiltinTool, ShellSettings, SideEffect, Tool, ToolContext, ToolOutput
from zero.tools.budget import budget_output
from zero.tools.builtin import (
    PREVIEW_BYTES,
    EditPlan,
    Pin,
    builtin_tools,
    pinned,
    plan_edit,
    plan_replace,
    replace_file,
    unowned_call,
)
from zero.tools.git import GitError, NotARepository, PlantedGitFolder
from zero.tools.owns import Owns, overlaps
from zero.tools.permissions import PERMISSION_MODES, Decision, PermissionMode, decide, narrower, within
from zero.tools.redact import Redactor, StreamRedactor, hides_syntax, redact, redact_values, secret_name
from zero.tools.registry import CATEGORIES, ToolRegistry, expand_tools
from zero.tools.snapshot import Snapshot, take_snapshot
from zero.tools.workspace import NotFound, OutsideWorkspace, Workspace
from zero.tools.worktrees import DiffStat, Finished, MemberWorktree, Worktrees

__all__ = [
    "CATEGORIES",
    "PERMISSION_MODES",
    "PREVIEW_BYTES",
    "ArgsModel",
    "BuiltinTool",
    "Decision",
    "DiffStat",
    "EditPlan",
    "Finished",
    "GitError",
    "MemberWorktree",
    "NotARepository",
    "NotFound",
    "OutsideWorkspace",
    "Owns",
    "PermissionMode",
    "Pin",
    "PlantedGitFolder",
    "Redactor",
    "ShellSettings",
    "SideEffect",
    "Snapshot",
    "StreamRedactor",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "ToolRegistry",
    "Workspace",
    "Worktrees",
    "budget_output",
    "builtin_tools",
    "decide",
    "expand_tools",
    "hide_own_secrets",
    "hides_syntax",
    "narrower",
    "overlaps",
    "pinned",
    "plan_edit",
    "plan_replace",
    "redact",
    "redact_values",
    "replace_file",
    "secret_name",
    "take_snapshot",
    "unowned_call",
    "within",
]
