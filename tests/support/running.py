"""A team run by ``zero swarm run`` in a process of its own, its stream-json read as it comes, for tests that
steer it from outside (``zero swarm stop|send|pause|continue``), in one process or on a Ray cluster."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.cli import ZERO, scripted, write_script

__all__ = ["SCRIPT", "TEAM", "Running"]

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
tool_calls = [{{ name = "bash", arguments = {{ command = "{WAIT_FOR_GO}" }} }}]
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

    def __init__(self, tmp_path: Path, workspace: Path, team: str, script: str, *flags: str):
        team_file = write_script(tmp_path / "team.toml", team)
        self.script = write_script(tmp_path / "s.toml", script)
        self.workspace = workspace
        command = [ZERO, "swarm", "run", str(team_file), *scripted(self.script, workspace), *flags]
        self.proc = subprocess.Popen(
            [*command, "--output-format", "stream-json"],
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
        """The first event that ``wanted`` picks, come already or waited for (a bound of 30 s on a hang)."""
        if (seen := next((e for e in self.events if wanted(e)), None)) is not None:
            return seen
        while True:
            line = self._lines.get(timeout=30)
            assert line is not None, f"the run ended first: {self.events[-3:]}"
            event: dict[str, Any] = json.loads(line)
            self.events.append(event)
            if event["type"] == "subagent_start":
                self.members[event["agentName"]] = event["sessionId"]
            if wanted(event):
                return event

    def tool_call(self, member: str) -> dict[str, Any]:
        return self.until(lambda e: e["type"] == "tool_call" and e["sessionId"] == self.members.get(member))

    def ended(self, member: str) -> dict[str, Any]:
        return self.until(lambda e: e["type"] == "subagent_end" and e["sessionId"] == self.members.get(member))

    def go(self) -> None:
        (self.workspace / "go").touch()

    def end(self) -> tuple[int, list[dict[str, Any]]]:
        while (line := self._lines.get(timeout=30)) is not None:
            self.events.append(json.loads(line))
        code = self.proc.wait(timeout=30)
        return code, self.events

    def close(self) -> None:
        self.go()  # (a killed run's tools end too)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._reader.join(timeout=30)
        for stream in (self.proc.stdout, self.proc.stderr):
            assert stream is not None
            stream.close()
