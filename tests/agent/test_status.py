"""The one rule that sums up several runs' statuses (a team's members): the worst by the exit code."""

from __future__ import annotations

import pytest

from zero.agent import Status, exit_code, worst

Outcome = tuple[Status, str | None]
DONE: Outcome = ("completed", None)
CAPPED: Outcome = ("output_capped", None)
SKIPPED: Outcome = ("skipped", None)
BUG: Outcome = ("failed", "internal_error")
OUTAGE: Outcome = ("failed", "overloaded")
STOPPED: Outcome = ("cancelled", None)
BUDGET: Outcome = ("budget_exhausted", None)


@pytest.mark.parametrize(
    ("members", "team", "code"),
    [
        ([DONE, DONE], DONE, 0),
        ([DONE, CAPPED], CAPPED, 4),
        ([CAPPED, SKIPPED], CAPPED, 4),  # exited 1: a skipped member counted as a failure
        ([DONE, SKIPPED, ("max_turns", None)], ("max_turns", None), 4),
        ([CAPPED, BUDGET, CAPPED], BUDGET, 4),  # a spent budget explains the others
        ([CAPPED, BUG, SKIPPED], BUG, 1),
        ([STOPPED, BUG], BUG, 1),  # on_failure = "stop": the failure is why the rest were cancelled
        ([BUG, OUTAGE, CAPPED], OUTAGE, 3),  # a provider error: exit 3, as one agent's
        ([OUTAGE, ("interrupted", None)], ("interrupted", None), 130),
        ([DONE, SKIPPED], SKIPPED, 1),
        ([], DONE, 0),
    ],
)
def test_a_team_ends_as_its_worst_member(members: list[Outcome], team: Outcome, code: int) -> None:
    assert worst(members) == team and exit_code(*team) == code
