"""Orchestration of teams: the team file, dependency graph, scheduler, executors, budget ledger, mailbox,
land queue, views."""

from __future__ import annotations

from zero.orchestrator.control import ControlRefused
from zero.orchestrator.control_socket import ControlUnavailable
from zero.orchestrator.executor import (
    InProcessExecutor,
    MemberExecutor,
    MemberOutcome,
    MemberRun,
    MemberTask,
    open_member,
)
from zero.orchestrator.land import (
    Check,
    CheckFailed,
    CheckResult,
    CommandRunner,
    Conflict,
    ConflictFile,
    Landed,
    LandOutcome,
    LandQueue,
    NothingToLand,
    Skipped,
    command_check,
    run_command,
)
from zero.orchestrator.ledger import BudgetGuard, Ledger, Trip
from zero.orchestrator.mailbox import Mailbox, ReadInbox, SendMessage
from zero.orchestrator.plan import MemberPlan, Overlap, TeamPlan, build_plan, render_prompt
from zero.orchestrator.runner import MemberState, TeamResult, TeamRunner
from zero.orchestrator.team import TeamBudget, TeamError, TeamFile, TeamProblem, load_team

__all__ = [
    "BudgetGuard",
    "Check",
    "CheckFailed",
    "CheckResult",
    "CommandRunner",
    "Conflict",
    "ConflictFile",
    "ControlRefused",
    "ControlUnavailable",
    "InProcessExecutor",
    "LandOutcome",
    "LandQueue",
    "Landed",
    "Ledger",
    "Mailbox",
    "MemberExecutor",
    "MemberOutcome",
    "MemberPlan",
    "MemberRun",
    "MemberState",
    "MemberTask",
    "NothingToLand",
    "Overlap",
    "ReadInbox",
    "SendMessage",
    "Skipped",
    "TeamBudget",
    "TeamError",
    "TeamFile",
    "TeamPlan",
    "TeamProblem",
    "TeamResult",
    "TeamRunner",
    "Trip",
    "build_plan",
    "command_check",
    "load_team",
    "open_member",
    "render_prompt",
    "run_command",
]
