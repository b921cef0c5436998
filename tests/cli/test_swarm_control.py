"""`zero swarm stop|send|pause|continue` on a team that another process runs, synchronised on its events."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from support.cli import zero
from support.running import SCRIPT, TEAM, Running

from zero.agent import MessageAdded, ToolFinished
from zero.orchestrator.live import tree_from_store
from zero.orchestrator.view import render_tree
from zero.sessions import FileSessionStore


@pytest.fixture
def running(tmp_path: Path, workspace: Path) -> Iterator[Running]:
    run = Running(tmp_path, workspace, TEAM, SCRIPT)
    yield run
    run.close()


def sessions() -> FileSessionStore:
    return FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")


def control_folder() -> Path:
    return Path(os.environ["ZERO_HOME"]) / "control"


def members_of(team_id: str) -> dict[str, Any]:
    store = sessions()
    return {m.member_name: m for m in store.list() if m.root_session_id == team_id and m.session_kind == "member"}


def logged(session_id: str, kind: str) -> None:
    """Return once the session's log on disk holds an event of ``kind`` (a bound of 30 s on a hang)."""
    deadline = time.monotonic() + 30
    while not any(e.event.kind == kind for e in sessions().events(session_id)):
        assert time.monotonic() < deadline, f"no {kind} event in the log of {session_id}"
        time.sleep(0.02)


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
    running.ended("slow")
    for args, refused in (
        (("stop", "slow"), "slow already ended cancelled"),
        (("send", "nobody", "hi"), "the team trio has no member 'nobody'; its members: slow, after, other"),
    ):
        done = zero("swarm", args[0], running.team_id, *args[1:])
        assert (done.returncode, done.stdout, done.stderr) == (2, "", f"zero: error: {refused}\n")
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
    assert error["message"] == "slow cancelled (stopped by the user); after skipped (dependency 'slow' ended cancelled)"
    again = zero("swarm", "stop", running.team_id, "other")
    assert (again.returncode, again.stderr) == (
        2,
        f"zero: error: the team {running.team_id} is not running: it ended cancelled\n",
    )


def test_send_reaches_the_named_member_alone_before_its_next_model_call(running: Running) -> None:
    running.tool_call("slow")
    running.tool_call("other")
    done = zero("swarm", "send", running.team_id, "other", "-", input="use blue")  # (- : from standard input)
    assert (done.returncode, done.stdout) == (0, "message 1 for other: it reads it before its next model call\n")
    running.go()
    code, events = running.end()
    assert code == 0
    members = members_of(running.team_id)
    store = sessions()
    said: list[tuple[str, str]] = []
    for stored in store.events(members["other"].session_id):
        if isinstance(e := stored.event, MessageAdded):
            said.append((e.kind, e.content))
        elif isinstance(e, ToolFinished):
            said.append((e.kind, e.output))
    assert said[-4:] == [  # read after its tool's result, before the call that answers
        ("message", "other has begun"),
        ("tool_result", "[exit code 0]"),
        ("message", "A message from the user who runs this team, sent while you work (zero swarm send):\n\nuse blue"),
        ("message", "blue it is"),
    ]
    for name in ("slow", "after"):
        log = [e.event for e in store.events(members[name].session_id)]
        assert not any(isinstance(m, MessageAdded) and "use blue" in m.content for m in log)
    team = [e.event for e in store.events(running.team_id) if e.event.kind == "team_message"]
    assert [(m.id, m.sender, m.to, m.body) for m in team] == [(1, "user", "other", "use blue")]
    shown = zero("sessions", "show", running.team_id).stdout
    assert "✉ user → other: use blue" in shown


def test_pause_holds_the_named_member_alone_until_continue(running: Running) -> None:
    running.tool_call("slow")
    running.tool_call("other")
    done = zero("swarm", "pause", running.team_id, "other")
    assert (done.returncode, done.stdout) == (
        0,
        "paused other: it waits before its next model call (zero swarm continue goes on)\n",
    )
    running.go()
    other = running.members["other"]
    running.until(lambda e: e["type"] == "pause" and e["sessionId"] == other and e["paused"])
    running.ended("after")  # slow went on and completed, and its dependent after it
    assert calls_of(running.events, other) == 1  # none since the pause: it waits, spending nothing
    logged(other, "pause")  # what zero swarm watch reads: the logs, written a moment after the stream
    tree = tree_from_store(sessions(), running.team_id)
    drawn = io.StringIO()
    Console(file=drawn, width=200).print(render_tree(tree, budget=tree.budget()))
    assert [line for line in drawn.getvalue().splitlines() if " other " in line][0].endswith("· paused")
    done = zero("swarm", "continue", running.team_id)
    assert (done.returncode, done.stdout) == (0, "continuing other\n")
    code, events = running.end()
    assert code == 0
    assert calls_of(events, other) == 2
    pauses = [e["paused"] for e in events if e["type"] == "pause"]
    assert pauses == [True, False]  # the other members never paused
    ends = {e["sessionId"]: e["status"] for e in events if e["type"] == "subagent_end"}
    assert set(ends.values()) == {"completed"}


def test_a_killed_runs_socket_is_found_stale_and_removed(running: Running) -> None:
    running.tool_call("other")
    path = control_folder() / f"{running.team_id}.sock"
    assert stat.S_ISSOCK(path.lstat().st_mode)
    running.proc.send_signal(signal.SIGKILL)
    running.proc.wait()
    done = zero("swarm", "pause", running.team_id)
    resume = f"zero swarm resume {running.team_id} runs it again"
    assert (done.returncode, done.stderr) == (
        2,
        f"zero: error: the team {running.team_id} is not running (its run was killed); {resume}\n",
    )
    assert not path.exists()
    done = zero("swarm", "send", running.team_id, "other", "hello")
    assert (done.returncode, done.stderr) == (
        2,
        f"zero: error: the team {running.team_id} is not running (it was interrupted); {resume}\n",
    )


NOBODY = 65534


def as_nobody(folder: Path, name: str, line: bytes) -> str:
    """What a process of another uid gets when it connects to the socket ``name`` in ``folder`` and asks
    ``line``: the answer, or the error its connect raised. It starts in ``folder`` (entered as root), so
    only the folder's and the socket's own permissions stand in its way."""
    handle = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read)
            os.fchdir(handle)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.settimeout(10)
                try:
                    client.connect(name)
                    with contextlib.suppress(BrokenPipeError):  # (a refusal may come before the request)
                        client.sendall(line)
                    out = client.makefile("rb").readline()
                except OSError as e:
                    out = type(e).__name__.encode()
            os.write(write, out)
        finally:
            os._exit(0)
    os.close(write)
    os.close(handle)
    with os.fdopen(read, "rb") as answer:
        got = answer.read().decode()
    os.waitpid(pid, 0)
    return got


@pytest.mark.skipif(os.getuid() != 0, reason="becoming another uid takes root")
def test_another_uid_is_refused_by_the_folder_and_by_the_socket(running: Running) -> None:
    running.tool_call("other")
    folder = control_folder()
    name = f"{running.team_id}.sock"
    assert stat.S_IMODE(folder.lstat().st_mode) == 0o700
    assert stat.S_IMODE((folder / name).lstat().st_mode) == 0o600
    stop = json.dumps({"action": "stop", "member": "other"}).encode() + b"\n"
    assert as_nobody(folder, name, stop) == "PermissionError"
    os.chmod(folder, 0o755)  # permissions opened to anyone: the run still answers its own user only
    os.chmod(folder / name, 0o666)
    answer = json.loads(as_nobody(folder, name, stop))
    assert answer == {"ok": False, "error": "refused: this team's run belongs to another user"}
    running.go()
    code, events = running.end()
    assert code == 0
    assert {e["status"] for e in events if e["type"] == "subagent_end"} == {"completed"}
