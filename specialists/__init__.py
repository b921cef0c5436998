"""Specialists: TOML manifests, discovery, the Task tools and child-session runs."""

from __future__ import annotations

from zero.specialists._context import AgentContext, InvocationBudget, specialists_prompt
from zero.specialists.delegation import Delegator, delegating_agent, specialist_agent
from zero.specialists.envelope import envelope, format_cost
from zero.specialists.manifest import Manifest, ManifestError, ManifestFile
from zero.specialists.registry import Specialist, SpecialistRegistry, builtin_dir, project_dir, user_dir
from zero.specialists.tools import Task, TaskOutput, TaskStop

__all__ = [
    "AgentContext",
    "Delegator",
    "InvocationBudget",
    "Manifest",
    "ManifestError",
    "ManifestFile",
    "Specialist",
    "SpecialistRegistry",
    "Task",
    "TaskOutput",
    "TaskStop",
    "builtin_dir",
    "delegating_agent",
    "envelope",
    "format_cost",
    "project_dir",
    "specialist_agent",
    "specialists_prompt",
    "user_dir",
]
