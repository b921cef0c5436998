"""bash, redaction, output budgeting, permissions and tool selection."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from zero.errors import ConfigError
from zero.tools import Redactor, ToolContext, Workspace, budget_output, decide, expand_tools, narrower
from zero.tools.builtin import Bash, UpdatePlan

pytestmark = pytest.mark.anyio


async def test_bash_runs_in_the_workspace_and_reports_the_exit_code(workspace: Path) -> None:
    out = await Bash().call({"command": "pwd; echo oops >&2; exit 3"}, ToolContext(workspace=Workspace([workspace])))
    assert out.text == f"{os.path.realpath(workspace)}\noops\n\n[exit code 3]" and out.is_error


async def test_bash_timeout_kills_the_whole_process_group(workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "survived"
    command = f"(sleep 0.6; touch {marker}) & sleep 30"
    started = time.monotonic()
    out = await Bash().call({"command": command, "timeout_seconds": 0.3}, ToolContext(workspace=Workspace([workspace])))
    assert time.monotonic() - started < 10  # it did not wait for the sleep 30 (a bound on a hang, not a speed)
    assert out.is_error and out.text.endswith("[killed after 0.3 s timeout]")
    await anyio.sleep(0.8)
    assert not marker.exists()  # the background child died with the command


def test_redaction_masks_token_formats_and_secret_env_values() -> None:
    redact = Redactor({"MY_SERVICE_TOKEN": "plain-value-123", "HOME": "/root"})
    text = (
        "key sk-proj-abcdefghijklmnopqrstuvwx and sk-ant-api03-abcdefghijklmnopqrstuvwxyz "
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789 AKIAABCDEFGHIJKLMNOP "
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz.123 token plain-value-123 at /root"
    )
    assert redact(text) == (
        "key [REDACTED] and [REDACTED] [REDACTED] [REDACTED] Authorization: Bearer [REDACTED] token [REDACTED] at /root"
    )


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-abcdefghijklmnopqrstuvwx",
        "ghs_abcdefghijklmnopqrstuvwxyz0123456789",
        "github_pat_abcdefghijklmnopqrstuvwxyz",
        "AKIAABCDEFGHIJKLMNOP",
        "xoxb-1234567890-abcdef",
        "AIza" + "a" * 35,
        "glpat-abcdefghijklmnopqrstu",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    ],
)
def test_each_token_format_is_masked_on_its_own(secret: str) -> None:
    # alone in a text: the quick check that lets secret-free text skip the regex must catch it too
    assert Redactor({})(f"before {secret} after") == "before [REDACTED] after"
    assert Redactor({})("API_Key=abcdefghijklmnop0123") == "API_Key=[REDACTED]"
    assert Redactor({})("bearer abcdefghijklmnopqrstuvwxyz") == "bearer [REDACTED]"


def test_budget_keeps_head_and_tail_and_says_what_was_cut() -> None:
    text = "".join(f"line {i:04d}\n" for i in range(1000))
    out, truncated = budget_output(text, 200)
    assert truncated
    assert out.startswith("line 0000\n") and out.endswith("line 0999\n")
    assert "lines," in out and "characters cut from the middle ...]" in out
    assert budget_output("short", 200) == ("short", False)


def test_permission_modes() -> None:
    assert [decide(m, "write") for m in ("read-only", "ask", "auto", "unsafe")] == ["deny", "prompt", "allow", "allow"]
    assert [decide(m, "shell") for m in ("read-only", "ask", "auto", "unsafe")] == ["deny", "prompt", "allow", "allow"]
    assert decide("auto", "network") == "prompt" and decide("read-only", "read") == "allow"
    assert narrower("unsafe", "read-only") == "read-only" and narrower("ask", "auto") == "ask"


def test_categories_expand_and_typos_get_a_hint() -> None:
    assert expand_tools(["read-only", "plan"], []) == ("read_file", "list_directory", "glob", "grep", "update_plan")
    with pytest.raises(ConfigError, match="unknown tool or category 'read-onyl' \\(did you mean \"read-only\"\\?\\)"):
        expand_tools(["read-onyl"], [])


async def test_update_plan_keeps_the_plan_in_the_context(workspace: Path) -> None:
    ctx = ToolContext(workspace=Workspace([workspace]))
    out = await UpdatePlan().call({"steps": [{"step": "map", "status": "completed"}, {"step": "fix"}]}, ctx)
    assert out.text == "Plan updated (1/2 done)\n[x] map\n[ ] fix"
    assert ctx.plan == [{"step": "map", "status": "completed"}, {"step": "fix", "status": "pending"}]
