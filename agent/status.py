"""The one status vocabulary of runs, members, children and sessions, and what each means for the exit code.

A session is ``pending`` until a run starts, ``running`` while one runs, then ends in exactly
one terminal status. A resumed session has several runs; its status is that of the latest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, assert_never, get_args

from zero.errors import ProviderError, ZeroError

__all__ = [
    "RUN_STATUSES",
    "STATUS",
    "STATUSES",
    "TERMINAL",
    "RunStatus",
    "Status",
    "StatusInfo",
    "exit_code",
    "incomplete_message",
    "worst",
]

Status = Literal[
    "pending",
    "running",
    "completed",
    "failed",
    "cancelled",
    "interrupted",
    "skipped",
    "budget_exhausted",
    "timed_out",
    "max_turns",
    "output_capped",
    "invalid_output",
]
RunStatus = Literal[
    "completed",
    "failed",
    "cancelled",
    "interrupted",
    "budget_exhausted",
    "timed_out",
    "max_turns",
    "output_capped",
    "invalid_output",
]
"""How a run that started can end (``skipped`` is for members that never started)."""

STATUSES: tuple[Status, ...] = get_args(Status)
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
TERMINAL: frozenset[Status] = frozenset(STATUSES) - {"pending", "running"}


@dataclass(frozen=True, kw_only=True)
class StatusInfo:
    """What one status means wherever it is shown or acted on."""

    exit_code: int
    """Of a run that ended so (README.md, "Using zero exec"; a team's in docs/TEAMS.md): 0 success; 1 failed,
    or cancelled by a parent or a stop policy; 4 incomplete; 130 interrupted by the user (Ctrl-C, SIGTERM).
    A failed run whose error came from the model API is 3, decided by the error code."""
    outcome: Literal["success", "interrupted", "incomplete", "error"]
    """stream-json's ``run_end.status``."""
    resumes: bool
    """The run stopped short of an answer, and ``sessions resume`` goes on from there (stream-json's
    ``recoverable``)."""
    message: str
    """What a user is told about a run that ended so without an error message of its own (``{calls}``:
    the model calls it made)."""
    reason: str
    """What a parent's model reads in a Task's envelope about a child that ended so."""
    glyph: str
    style: str
    """The glyph's and the status's look (a rich style) in the live view and the summaries."""


def _info(status: Status) -> StatusInfo:  # noqa: C901 - one branch a status: mypy proves every status has one
    match status:
        case "pending":
            return StatusInfo(
                exit_code=1, outcome="error", resumes=False, message=status, reason=status, glyph="○", style="dim"
            )
        case "running":
            return StatusInfo(
                exit_code=1, outcome="error", resumes=False, message=status, reason=status, glyph="●", style="cyan"
            )
        case "completed":
            return StatusInfo(
                exit_code=0, outcome="success", resumes=False, message=status, reason=status, glyph="✓", style="green"
            )
        case "failed":
            return StatusInfo(
                exit_code=1,
                outcome="error",
                resumes=False,
                message=status,
                reason="the specialist failed",
                glyph="✗",
                style="red",
            )
        case "cancelled":
            return StatusInfo(
                exit_code=1,
                outcome="interrupted",
                resumes=False,
                message="cancelled; the session keeps everything up to this point",
                reason="stopped before it finished (TaskStop, or its parent ended); partial output below",
                glyph="■",
                style="yellow",
            )
        case "interrupted":
            return StatusInfo(
                exit_code=130,
                outcome="interrupted",
                resumes=True,
                message="interrupted; the session keeps everything up to this point",
                reason="interrupted (Ctrl-C/SIGTERM); partial output below",
                glyph="■",
                style="magenta",
            )
        case "skipped":
            return StatusInfo(
                exit_code=1, outcome="error", resumes=False, message=status, reason=status, glyph="↷", style="yellow"
            )
        case "budget_exhausted":
            return StatusInfo(
                exit_code=4,
                outcome="incomplete",
                resumes=True,
                message="the budget ran out; the answer is partial",
                reason="its budget ran out; partial output below",
                glyph="$",
                style="red",
            )
        case "timed_out":
            return StatusInfo(
                exit_code=4,
                outcome="incomplete",
                resumes=True,
                message="its time limit ran out; the answer is partial",
                reason="its timeout_seconds ran out; partial output below",
                glyph="⏱",
                style="red",
            )
        case "max_turns":
            return StatusInfo(
                exit_code=4,
                outcome="incomplete",
                resumes=True,
                message="stopped after {calls} (max turns); the answer is partial",
                reason="it reached its max_turns; partial output below",
                glyph="↻",
                style="red",
            )
        case "output_capped":
            return StatusInfo(
                exit_code=4,
                outcome="incomplete",
                resumes=True,
                message="the answer was cut at the output cap",
                reason=status,
                glyph="✂",
                style="red",
            )
        case "invalid_output":
            return StatusInfo(
                exit_code=4,
                outcome="incomplete",
                resumes=False,
                message="its result did not match its output schema after {calls}; the raw answer is kept",
                reason="its result did not match the output schema, retries included; its raw answer below",
                glyph="≠",
                style="red",
            )
        case _:
            assert_never(status)


STATUS: dict[Status, StatusInfo] = {status: _info(status) for status in STATUSES}
"""The one table of what each status means."""


def _codes(cls: type[ZeroError]) -> set[str]:
    found = {cls.code}
    for sub in cls.__subclasses__():
        found |= _codes(sub)
    return found


_PROVIDER_CODES = frozenset(_codes(ProviderError))


def exit_code(status: Status, error_code: str | None = None) -> int:
    """The exit code of a run that ended ``status`` (a failed run whose error came from the model API is 3)."""
    if status == "failed" and error_code in _PROVIDER_CODES:
        return 3
    return STATUS[status].exit_code


# How bad each exit code is, for the one rule that sums up several runs (a team's members): interrupted
# (130) > provider error (3) > failed or cancelled (1) > incomplete (4) > completed (0). A provider
# error is worse than a failure: it likely stopped others too, and trying later may be all it takes.
_SEVERITY = {0: 0, 4: 1, 1: 2, 3: 3, 130: 4}
# Between statuses of one exit code, the one that explains the others: a failure (on_failure = "stop"
# cancels the rest), a spent budget (it stops every member).
_CAUSES = ("failed", "budget_exhausted")


def worst(outcomes: Iterable[tuple[Status, str | None]]) -> tuple[Status, str | None]:
    """Of several runs' (status, error code), the one with the worst exit code: what a team ends as
    (``("completed", None)`` for none). A ``skipped`` run counts only above ``completed``: the status of
    the dependency it was skipped for is the cause, and that counts."""
    ranked = [
        (0.5 if status == "skipped" else _SEVERITY[exit_code(status, code)], status in _CAUSES, -i, status, code)
        for i, (status, code) in enumerate(outcomes)
    ]
    if not ranked:
        return "completed", None
    *_, status, code = max(ranked)
    return status, code


def incomplete_message(status: Status, turns: int = 0) -> str:
    """What a user is told about a run that ended without an error message of its own."""
    return STATUS[status].message.format(calls=f"{turns} model call{'' if turns == 1 else 's'}")
