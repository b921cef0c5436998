"""SIGKILL at fixed points: afterwards every session reads, none is left running, one whose run started
is interrupted and one that never ran is pending, and every side effect of a tool has its call in the log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from support.cli import ZERO, scripted, write_script, zero

from zero.sessions import FileSessionStore

TEAM = """
name = "doomed"
[[members]]
name = "first"
specialist = "worker"
prompt = "Work."
[[members]]
name = "second"
specialist = "worker"
prompt = "Work too."
[[members]]
name = "later"
specialist = "worker"
depends_on = ["first"]
prompt = "After {{ first.output }}"
"""

SCRIPT = """
[[turns]]
match = {{ system = 'You are "first"', turn = 1 }}
delay = {first_delay}
text = "Writing."
tool_calls = [{{ name = "bash", arguments = {{ command = "touch side-effect-1 && sleep 30" }} }}]
[[turns]]
match = {{ system = 'You are "second"', turn = 1 }}
text = "Writing."
tool_calls = [{{ name = "write_file", arguments = {{ path = "side-effect-2.txt", content = "x" }} }}]
[[turns]]
match = {{ system = 'You are "second"', turn = 2 }}
delay = 30
text = "done"
[[turns]]
times = 0
text = "done"
"""


def check_after_kill(home: Path, workspace: Path) -> FileSessionStore:
    store = FileSessionStore(home / "sessions")
    metas = store.list()  # reading repairs what the dead process left
    assert metas, "the run left no sessions"
    for meta in metas:
        events = store.events(meta.session_id)  # every log reads to its end
        started = any(e.event.kind in ("run_start", "team_start") for e in events)
        if meta.session_kind == "member" and not started:  # it waited: interrupted if its team's run had begun
            team = store.metadata(meta.parent_session_id)
            assert meta.status == ("interrupted" if team.status == "interrupted" else "pending"), meta.member_name
            continue
        assert meta.status == ("interrupted" if started else "pending"), (meta.member_name, meta.status)
        assert meta.event_count == len(events)
        assert sum(e.event.calls for e in events if e.event.kind == "usage") == meta.usage.calls  # rebuilt
    calls = [e.event for m in metas for e in store.events(m.session_id) if e.event.kind == "tool_call"]
    shown = json.dumps([c.arguments for c in calls])
    for effect in workspace.glob("side-effect-*"):
        assert effect.name in shown, f"{effect.name} exists but its tool call is not in any log"
    return store


def run_and_kill(tmp_path: Path, workspace: Path, until: Callable[[list[str]], bool], delay: float = 0) -> None:
    """Run a team and SIGKILL it the moment ``until`` (given the event types so far) says so."""
    team = write_script(tmp_path / "team.toml", TEAM)
    script = write_script(tmp_path / "s.toml", SCRIPT.format(first_delay=delay))
    proc = subprocess.Popen(
        [ZERO, "swarm", "run", str(team), *scripted(script, workspace)] + ["--output-format", "stream-json"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(json.loads(line)["type"] for line in proc.stdout or ()))
    reader.start()
    try:
        deadline = time.monotonic() + 20
        while not until(seen):
            assert proc.poll() is None, "the run ended before the kill point"
            assert time.monotonic() < deadline, "the kill point never came"
            time.sleep(0.005)
    finally:
        proc.kill()
        proc.wait()
        reader.join()
        proc.stdout.close()


def test_killed_before_the_first_model_call(workspace: Path, tmp_path: Path) -> None:
    run_and_kill(tmp_path, workspace, lambda seen: "run_start" in seen, delay=30)
    store = check_after_kill(Path(os.environ["ZERO_HOME"]), workspace)
    statuses = {m.member_name or "team": m.status for m in store.list()}
    assert statuses["later"] == ("interrupted" if statuses["team"] == "interrupted" else "pending")  # never ran
    team = next(m for m in store.list() if m.session_kind == "team")
    watched = zero("swarm", "watch", team.session_id)  # a dead run is watched to its end, not forever
    if team.status == "interrupted":
        assert watched.returncode == 130 and "■ doomed" in watched.stdout
    else:  # killed before its first event reached the log: a run that never started, nothing runs it
        assert watched.returncode == 1 and "○ doomed" in watched.stdout


def test_killed_while_a_tool_runs_and_between_turns(workspace: Path, tmp_path: Path) -> None:
    def both_effects(seen: list[str]) -> bool:
        # the bash call is running (its file exists) and the second member waits between its turns
        return (workspace / "side-effect-1").exists() and (workspace / "side-effect-2.txt").exists()

    run_and_kill(tmp_path, workspace, both_effects)
    store = check_after_kill(Path(os.environ["ZERO_HOME"]), workspace)
    statuses = {m.member_name or "team": m.status for m in store.list()}
    assert statuses == {"team": "interrupted", "first": "interrupted", "second": "interrupted", "later": "interrupted"}
    second = next(m for m in store.list() if m.member_name == "second")
    kinds = [e.event.kind for e in store.events(second.session_id)]
    assert "tool_call" in kinds and kinds[-1] == "status"  # the repair says how it ended


DRIVER = """
import os, sys, time
from zero.agent import WarningRaised
from zero.sessions import FileSessionStore, SessionMetadata
import zero.sessions._writer as writer

real = writer.replace_file
def slow_replace(path, spare, data, *, exists):
    if b'"eventCount": 3' in data:  # mid-way through writing this metadata: the spare is written, not yet swapped
        with open(spare, "wb") as f:
            f.write(data[: len(data) // 2])
        open(sys.argv[2], "w").close()
        time.sleep(30)
    real(path, spare, data, exists=exists)
writer.replace_file = slow_replace

store = FileSessionStore(sys.argv[1])
store.create(SessionMetadata(session_id="s1", status="running"))
for i in range(3):
    store.append("s1", [WarningRaised(session_id="s1", code="tick", message=str(i))])
"""


def test_killed_during_a_metadata_write(tmp_path: Path) -> None:
    root, ready = tmp_path / "sessions", tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(root), str(ready)])
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    store = FileSessionStore(root)
    meta = store.metadata("s1")
    assert meta.status == "interrupted" and meta.event_count == 4  # 3 ticks + the repair's status event
    assert [e.event.kind for e in store.events("s1")] == ["warning", "warning", "warning", "status"]
