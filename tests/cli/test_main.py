"""The command line's own contracts: the copies it keeps for a fast --help, exit codes, version."""

from __future__ import annotations

import importlib

from support.cli import zero

from zero import __version__
from zero.agent import STATUSES, exit_code
from zero.agent.providers import PROVIDER_INFO, PROVIDERS
from zero.tools import PERMISSION_MODES

cli_main = importlib.import_module("zero.cli.main")


def test_the_copies_kept_for_a_fast_help_match_the_library() -> None:
    assert cli_main.PROVIDERS == PROVIDERS == tuple(PROVIDER_INFO)
    assert cli_main.PERMISSION_MODES == PERMISSION_MODES


def test_one_exit_code_per_status() -> None:
    codes = {status: exit_code(status) for status in STATUSES if status not in ("pending", "running")}
    assert codes == {
        "completed": 0,
        "failed": 1,
        "cancelled": 1,  # a parent, TaskStop or on_failure = "stop" stopped it
        "skipped": 1,
        "interrupted": 130,  # the user's Ctrl-C or SIGTERM
        "budget_exhausted": 4,
        "timed_out": 4,
        "max_turns": 4,
        "output_capped": 4,
        "invalid_output": 4,  # a typed result that stayed invalid by its schema
    }
    assert exit_code("failed", "rate_limited") == 3 and exit_code("failed", "tool_error") == 1


def test_version_help_and_usage_errors() -> None:
    assert zero("--version").stdout == f"zero {__version__}\n"
    assert "exec" in zero("--help").stdout and zero("--help").returncode == 0
    headless = zero()  # the shell needs a terminal: without one, zero says what to use
    assert headless.returncode == 2 and 'use zero exec "PROMPT"' in headless.stderr
    bad = zero("exec", "--output-format", "xml")
    assert bad.returncode == 2 and "invalid choice: 'xml'" in bad.stderr
