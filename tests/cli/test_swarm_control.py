"""`zero swarm stop|send|pause|continue` on a team that another process runs, synchronised on its events."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import stat
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli import ZERO, scripted, write_script, zero

from zero.orchestrator.live import tree_from_store
from zero.orchestrator.view import render_tree
from zero.sessions import FileSessionStore

TEAM = """
name = "trio"
[defaults]
isolation = "none"
[[members]]
name = "slow"
specialist = "worker"
prompt = "Work slowly."
[[members]]
name = "after"
specialist = "worker"
depends_on = ["slow"]
prompt = "Go on from {{ slow.output }}"
[[members]]
name = "other"
specialist = "worker"
prompt = "Work on your own."
"""
"""``slow`` and ``other`` start together; ``after`` takes ``slow``'s output."""

WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.02; done"  # a tool that runs until the test says go

SCRIPT = f"""
[[turns]]
match = {{ system = 'You are "slow"', turn = 1 }}
text = "slow has begun"
tool_calls = [{{ name = "bash", arguments = {{ command = "sleep 60" }} }}]
[[turns]]
match = {{ system = 'You are "other"', turn = 1 }}
text = "other has begun"
tool_calls = [{{ name = "bash", arguments = {{ command = "{WAIT_FOR_GO}" }} }}]
[[turns]]
match = {{ system = 'You are "other"', last = "use blue" }}
text = "blue it is"
[[turns]]
match = {{ system = 'You are "other"' }}
text = "other is done"
[[turns]]
match = {{ system = 'You are "slow"', turn = 2 }}
text = "slow is done"
[[turns]]
match = {{ system = 'You are "after"' }}
text = "after is done"
"""


class Running:
    """``zero swarm run`` in a process of its own, its stream-json read as it comes."""

    def __init__(self, tmp_path: Path, workspace: Path, script: str = SCRIPT):
        team = write_script(tmp_path / "team.toml", TEAM)
        self.script = write_script(tmp_path / "s.toml", script)
        self.workspace = workspace
        self.proc = subprocess.Popen(
            [ZERO, "swarm", "run", str(team), *scripted(self.script, workspace), "--output-format", "stream-json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.events: list[dict[str, Any]] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        start = self.until(lambda e: e["type"] == "run_start")
        self.team_id: str = start["sessionId"]
        self.members: dict[str, str] = {}  # name -> session id

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def until(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first event from now on that ``wanted`` picks (a bound of 30 s on a hang)."""
        while True:
            line = self._lines.get(timeout=30)
            assert line is not None, f"the run ended first: {self.events[-3:]}"
            event = json.loads(line)
            self.events.append(event)
            if event["type"] == "subagent_start":
                self.members[event["agentName"]] = event["sessionId"]
            if wanted(event):
                return event

    def tool_call(self, member: str) -> dict[str, Any]:
        return self.until(lambda e: e["type"] == "tool_call" and e["sessionId"] == self.members.get(member))

    def go(self) -> None:
        (self.workspace / "go").touch()

    def end(self) -> tuple[int, list[dict[str, Any]]]:
        while (line := self._lines.get(timeout=30)) is not None:
            self.events.append(json.loads(line))
        code = self.proc.wait(timeout=30)
        return code, self.events

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._reader.join(timeout=30)
        for stream in (self.proc.stdout, self.proc.stderr):
            assert stream is not None
            stream.close()


@pytest.fixture
def running(tmp_path: Path, workspace: Path) -> Iterator[Running]:
    run = Running(tmp_path, workspace)
    yield run
    run.close()


def sessions() -> FileSessionStore:
    return FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")


def control_folder() -> Path:
    return Path(os.environ["ZERO_HOME"]) / "control"


def members_of(team_id: str) -> dict[str, Any]:
    store = sessions()
    return {m.member_name: m for m in store.list() if m.root_session_id == team_id and m.session_kind == "member"}


def calls_of(events: list[dict[str, Any]], session_id: str) -> int:
    return sum(e["type"] == "usage" and e["sessionId"] == session_id for e in events)


def test_stop_ends_the_named_member_alone_keeping_its_output(running: Running) -> None:
    running.tool_call("slow")
    running.tool_call("other")  # both work: slow sleeps, other waits for go
    done = zero("swarm", "stop", running.team_id, "slow")
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "stopping slow: it ends cancelled, keeping its output so far\n",
        "",
    )
    running.until(lambda e: e["type"] == "subagent_end" and e["sessionId"] == running.members["slow"])
    running.go()  # other goes on only now: it was running all along
    code, events = running.end()
    assert code == 1
    ends = {e["sessionId"]: e["status"] for e in events if e["type"] == "subagent_end"}
    members = members_of(running.team_id)
    assert {name: ends[m.session_id] for name, m in members.items()} == {
        "slow": "cancelled",
        "after": "skipped",  # on_failure = "continue": its dependents are skipped, the others go on
        "other": "completed",
    }
    assert members["slow"].status == "cancelled"
    log = [e.event for e in sessions().events(members["slow"].session_id)]
    said = [e.content for e in log if e.kind == "message" and e.role == "assistant"]
    assert said == ["slow has begun"]  # its output so far, kept
    error = next(e for e in events if e["type"] == "error")
    assert (
        error["message"]
        == "slow cancelled (stopped by zero swarm stop); after skipped (dependency 'slow' ended cancelled)"
    )
    again = zero("swarm", "stop", running.team_id, "other")
    assert (again.returncode, again.stderr) == (
        2,
        f"zero: error: the team {running.team_id} is not running: it ended cancelled\n",
    )
