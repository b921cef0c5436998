"""The shell sandbox: no network and writes only in the workspace and the run's /tmp in auto mode; jobs left in
the background last until the run ends; nothing outlives a killed Zero."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import ZERO, scripted, write_script, zero
from support.sandbox import bash, needs_sandbox, running

from zero.tools import _sandbox

pytestmark = pytest.mark.anyio


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on this machine's loopback that accepts connections."""
    server = socket.create_server(("127.0.0.1", 0))
    yield server.getsockname()[1]
    server.close()


CONNECT = "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('CONNECTED')\""


@needs_sandbox
def test_in_auto_mode_a_command_has_no_network_and_writes_only_in_the_workspace(
    workspace: Path, outside: Path, listener: int
) -> None:
    [out] = bash(workspace, f"echo ok > inside.txt; touch /tmp/zero-sandbox-$$ && echo tmp-ok; touch {outside}/x")
    assert not (outside / "x").exists() and f"touch: cannot touch '{outside}/x': Read-only file system" in out
    assert (workspace / "inside.txt").read_text() == "ok\n" and "tmp-ok" in out
    assert "[it ran in the sandbox" in out  # the model is told why, and how to ask for more
    [net] = bash(workspace, CONNECT.format(port=listener))
    assert "CONNECTED" not in net and ("unreachable" in net or "Permission denied" in net)
    [unconfined] = bash(workspace, CONNECT.format(port=listener), mode="unsafe")
    assert "CONNECTED" in unconfined


def test_running_outside_the_sandbox_needs_approval_in_auto_mode(workspace: Path, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "s.toml",
        """
[[turns]]
match = { turn = 1 }
tool_calls = [{ name = "bash", arguments = { command = "echo escaped", outside_sandbox = true } }]
[[turns]]
match = { turn = 2 }
text = "Could not."
""",
    )
    base = ["exec", "go", *scripted(script, workspace)]
    done = zero(*base, "--output-format", "stream-json")
    events = [json.loads(line) for line in done.stdout.splitlines()]
    request = next(e for e in events if e["type"] == "permission_request")
    assert request["sideEffect"] == "network"
    assert next(e for e in events if e["type"] == "tool_result")["status"] == "denied"
    unsafe = zero(*base, "--permission-mode", "unsafe", "--output-format", "stream-json")
    result = next(e for e in map(json.loads, unsafe.stdout.splitlines()) if e["type"] == "tool_result")
    assert result["status"] == "ok" and result["output"].startswith("escaped")


def test_a_background_job_outlives_its_command_until_the_run_ends(workspace: Path, tmp_path: Path) -> None:
    marker = f"sleep {4000 + os.getpid() % 1000}.5"
    script = write_script(
        tmp_path / "s.toml",
        f"""
[[turns]]
match = {{ turn = 1 }}
tool_calls = [{{ name = "bash", arguments = {{ command = "{marker} & echo started" }} }}]
[[turns]]
match = {{ turn = 2 }}
tool_calls = [{{ name = "bash", arguments = {{ command = "pgrep -f '{marker}' >/dev/null && echo still-running" }} }}]
[[turns]]
match = {{ turn = 3 }}
text = "Done."
""",
    )
    started = time.monotonic()
    done = zero(
        "exec",
        "go",
        *scripted(script, workspace),
        "--output-format",
        "stream-json",
    )
    assert done.returncode == 0 and time.monotonic() - started < 20  # it did not wait for the job
    outputs = [e["output"] for e in map(json.loads, done.stdout.splitlines()) if e["type"] == "tool_result"]
    assert outputs[0].startswith("started") and "runs on in the background" in outputs[0]
    assert outputs[1].startswith("still-running")  # alive during the run...
    assert not running(marker)  # ...and gone when it ended


def test_no_tool_process_outlives_a_killed_zero(workspace: Path, tmp_path: Path) -> None:
    marker = f"sleep {5000 + os.getpid() % 1000}.5"
    script = write_script(
        tmp_path / "s.toml",
        f"""
[[turns]]
match = {{ turn = 1 }}
tool_calls = [{{ name = "bash", arguments = {{ command = "({marker} &) ; {marker}" }} }}]
""",
    )
    for mode in ("auto", "unsafe"):
        proc = subprocess.Popen(
            [ZERO, "exec", "go", *scripted(script, workspace)] + ["--permission-mode", mode],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while len(running(marker)) < 2:  # the foreground sleep and the one it put in the background
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while running(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running(marker) == [], mode


def test_without_a_sandbox_commands_run_unconfined_and_the_run_says_so_once(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sandbox, "unavailable_reason", lambda: "testing without one")
    script = write_script(
        tmp_path / "s.toml",
        """
[[turns]]
match = { turn = 1 }
tool_calls = [
  { name = "bash", arguments = { command = "echo one" } },
  { name = "bash", arguments = { command = "echo two" } },
]
[[turns]]
match = { turn = 2 }
text = "Done."
""",
    )
    done = zero(
        "exec",
        "go",
        *scripted(script, workspace),
        "--output-format",
        "stream-json",
    )
    warnings = [e for e in map(json.loads, done.stdout.splitlines()) if e["type"] == "warning"]
    assert [w["code"] for w in warnings] == ["unconfined_shell"]
    assert "testing without one" in warnings[0]["message"]


def run(script: Path, workspace: Path) -> list[str]:
    return ["exec", "go", *scripted(script, workspace)] + [
        "--output-format",
        "stream-json",
    ]
