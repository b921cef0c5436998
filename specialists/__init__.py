"""Specialists: TOML manifests, discovery, the agent session, the Task tools and child-session runs."""

from __future__ import annotations

from zero.specialists._context import AgentContext, InvocationBudget, specialists_prompt
from zero.specialists.agents import Placement, open_agent, open_child, open_specialist, resume_agent
from zero.specialists.delegation import ChildFactory, Delegator
from zero.specialists.envelope import envelope
from zero.specialists.manifest import Manifest, ManifestError, ManifestFile
from zero.specialists.project import ProjectLimits
from zero.specialists.registry import Specialist, SpecialistRegistry, builtin_dir, project_dir, user_dir
from zero.specialists.session import AgentSession, ToolSet
from zero.specialists.tools import Task, TaskOutput, TaskRunner, TaskStop

__all__ = [
    "AgentContext",
    "AgentSession",
    "ChildFactory",
    "Delegator",
    "InvocationBudget",
    "Manifest",
    "ManifestError",
    "ManifestFile",
    "Placement",
    "ProjectLimits",
    "Specialist",
    "SpecialistRegistry",
    "Task",
    "TaskOutput",
    "TaskRunner",
    "TaskStop",
    "ToolSet",
    "builtin_dir",
    "envelope",
    "open_agent",
    "open_child",
    "open_specialist",
    "project_dir",
    "resume_agent",
    "specialists_prompt",
    "user_dir",
]
