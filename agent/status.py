"""The one status vocabulary of runs, members, children and sessions, and what each means for the exit code.

A session is ``pending`` until a run starts, ``running`` while one runs, then ends in exactly
one terminal status. A resumed session has several runs; its status is that of the latest.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, get_args

from zero.errors import ProviderError, ZeroError

__all__ = [
    "RUN_STATUSES",
    "STATUSES",
    "TERMINAL",
    "RunStatus",
    "Status",
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
]
RunStatus = Literal[
    "completed", "failed", "cancelled", "interrupted", "budget_exhausted", "timed_out", "max_turns", "output_capped"
]
"""How a run that started can end (``skipped`` is for members that never started)."""

STATUSES: tuple[Status, ...] = get_args(Status)
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
TERMINAL: frozenset[Status] = frozenset(STATUSES) - {"pending", "running"}

# The exit codes of README.md ("Using zero exec"; a team's in docs/TEAMS.md): 0 success; 1 failed, or
# cancelled by a parent or a stop policy; 4 incomplete; 130 interrupted by the user (Ctrl-C, SIGTERM).
# A provider error is 3, decided by the error code.
_EXIT: dict[str, int] = {
    "completed": 0,
    "failed": 1,
    "cancelled": 1,
    "skipped": 1,
    "budget_exhausted": 4,
    "timed_out": 4,
    "max_turns": 4,
    "output_capped": 4,
    "interrupted": 130,
}


def _codes(cls: type[ZeroError]) -> set[str]:
    found = {cls.code}
    for sub in cls.__subclasses__():
        found |= _codes(sub)
    return found


_PROVIDER_CODES = frozenset(_codes(ProviderError))


def exit_code(status: str, error_code: str | None = None) -> int:
    """The exit code of a run that ended ``status`` (a failed run whose error came from the model API is 3)."""
    if status == "failed" and error_code in _PROVIDER_CODES:
        return 3
    return _EXIT.get(status, 1)


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


def incomplete_message(status: str, turns: int = 0) -> str:
    """What a user is told about a run that ended without an error message of its own."""
    return {
        "max_turns": f"stopped after {turns} model call{'' if turns == 1 else 's'} (max turns); the answer is partial",
        "interrupted": "interrupted; the session keeps everything up to this point",
        "cancelled": "cancelled; the session keeps everything up to this point",
        "timed_out": "its time limit ran out; the answer is partial",
        "budget_exhausted": "the budget ran out; the answer is partial",
        "output_capped": "the answer was cut at the output cap",
    }.get(status, status)
