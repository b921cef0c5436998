"""Specialists: TOML manifests, discovery, the run's context, the agent builders, the Task tools and child-session
runs."""

from __future__ import annotations

from zero.specialists.agents import SpecialistOptions, open_child, open_specialist
from zero.specialists.context import (
    DELEGATE_TOOLS,
    AgentContext,
    InvocationBudget,
    child_system_prompt,
    specialists_prompt,
)
from zero.specialists.delegation import ChildFactory, Delegator
from zero.specialists.envelope import envelope
from zero.specialists.manifest import Manifest, ManifestError, ManifestFile
from zero.specialists.project import ProjectLimits
from zero.specialists.registry import Specialist, SpecialistRegistry, builtin_dir, project_dir, user_dir
from zero.specialists.tools import Task, TaskOutput, TaskRunner, TaskStop
from zero.specialists.top_level import open_agent, resume_agent

__all__ = [
    "DELEGATE_TOOLS",
    "AgentContext",
    "ChildFactory",
    "Delegator",
    "InvocationBudget",
    "Manifest",
    "ManifestError",
    "ManifestFile",
    "ProjectLimits",
    "Specialist",
    "SpecialistOptions",
    "SpecialistRegistry",
    "Task",
    "TaskOutput",
    "TaskRunner",
    "TaskStop",
    "builtin_dir",
    "child_system_prompt",
    "envelope",
    "open_agent",
    "open_child",
    "open_specialist",
    "project_dir",
    "resume_agent",
    "specialists_prompt",
    "user_dir",
]
