"""``zero acp`` ends with its editor: within a second of stdin closing or of SIGTERM, whatever its sessions
are doing (a turn running a command, a permission request waiting, a session loaded), with nothing left
running, every lease free and no session left ``running``. A real process: the process is the subject."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import connect_to_agent, text_block
from acp.schema import McpServerStdio
from support.acp import Editor
from support.cli import ZERO, scripted, write_script, zero

from zero.sessions import FileSessionStore

SCRIPT = """
[[turns]]
match = { last = "Run a long command" }
tool_calls = [{ name = "bash", arguments = { command = "sleep 30" } }]
[[turns]]
match = { last = "Echo through the editor's server" }
tool_calls = [{ name = "mcp__demo__echo", arguments = { text = "acp" } }]
[[turns]]
match = { last = "Say hello" }
text = "Hello."
"""
DEMO = str(Path(__file__).parents[1] / "mcpdemo" / "server.py")


class Waiting(Editor):
    """An editor that never answers a permission request (its user is away)."""

    def __init__(self) -> None:
        super().__init__()
        self.asking = anyio.Event()

    async def request_permission(self, session_id: str, tool_call: Any, options: Any, **kwargs: Any) -> Any:
        self.asked.append(tool_call)
        self.asking.set()
        await anyio.sleep_forever()


def descendants(pid: int) -> dict[int, str]:
    """The processes below ``pid`` (its children, theirs, ...), as ``ps`` shows them: pid -> command."""
    table = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True).stdout
    rows = [line.split(None, 2) for line in table.splitlines()]
    children: dict[int, list[tuple[int, str]]] = {}
    for row in rows:
        children.setdefault(int(row[1]), []).append((int(row[0]), row[2] if len(row) > 2 else ""))
    found, todo = {}, [pid]
    while todo:
        for child, args in children.get(todo.pop(), []):
            found[child] = args
            todo.append(child)
    return found


def alive(pids: dict[int, str]) -> dict[int, str]:
    table = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    now = {int(line.split(None, 1)[0]): line.split(None, 1)[-1] for line in table.splitlines()}
    return {pid: args for pid, args in pids.items() if now.get(pid) == args}


@pytest.mark.parametrize(
    ("how", "busy"), [("stdin closed", True), ("SIGTERM", True), ("SIGTERM", False)], ids=["eof", "term", "idle-term"]
)
def test_zero_acp_ends_with_its_editor_in_every_state(workspace: Path, tmp_path: Path, how: str, busy: bool) -> None:
    """Busy: a turn runs a command, another waits for a permission request (its MCP server started for it),
    a third session is loaded and a fourth resumed; idle: only those two (a signal then came while nothing
    ran)."""
    script = write_script(tmp_path / "s.toml", SCRIPT)
    for _ in range(2):  # a session to load, one to resume
        earlier = zero("exec", "Say hello", *scripted(script, workspace))
        assert earlier.returncode == 0, earlier.stderr
    store = FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")
    loaded, resumed = (meta.session_id for meta in store.list()[:2])
    ended = anyio.run(drive, script, workspace, (loaded, resumed), how, busy)
    # it waited for none of its work (a `sleep 30` among it): a bound on a hang, not a speed to meet (0.02-0.2 s
    # on a quiet machine; a loaded one has taken 1.1 s)
    assert ended.elapsed < 5.0, f"{how}: it took {ended.elapsed:.2f} s to exit"
    assert ended.code == (130 if how == "SIGTERM" else 0), ended.errors
    assert "Traceback" not in ended.errors and "internal error" not in ended.errors, ended.errors
    assert alive(ended.below) == {}  # the command, the sandbox around it and the MCP server ended with it
    done = [(loaded, "completed"), (resumed, "completed"), (ended.fresh, "pending")]
    for sid, status in done + [(s, "interrupted") for s in ended.stopped]:
        raw = json.loads((store.path(sid) / "metadata.json").read_text())
        assert raw["status"] == status, (sid, raw["status"])  # recorded by the process itself, not repaired
        assert [e.event.kind for e in store.events(sid)][-1] == ("status" if status == "pending" else "run_end")
        store.acquire(sid)  # its lease is free: another process may take it
        store.release(sid)


@dataclass
class Ended:
    fresh: str  # a session it made that was never prompted
    stopped: list[str]  # the sessions whose turns it stopped
    elapsed: float  # from stdin closing (or the signal) to its exit
    code: int
    errors: str
    below: dict[int, str]  # the processes it had started


async def drive(script: Path, workspace: Path, earlier: tuple[str, str], how: str, busy: bool) -> Ended:
    """Start ``zero acp`` with its sessions in their states, then end it ``how``."""
    proc = await asyncio.create_subprocess_exec(
        ZERO, "acp", "--provider", "scripted", "--script", str(script), "--permission-mode", "auto",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    editor = Waiting()
    conn = connect_to_agent(editor, proc.stdin, proc.stdout, use_unstable_protocol=True)  # type: ignore[arg-type]
    await conn.initialize(protocol_version=1)
    ws = str(workspace)
    await conn.load_session(cwd=ws, session_id=earlier[0])
    await conn.resume_session(cwd=ws, session_id=earlier[1])
    fresh = (await conn.new_session(cwd=ws)).session_id  # never prompted: it stays pending
    stopped: list[str] = []

    async def ask(text: str, servers: list[Any]) -> None:
        session_id = (await conn.new_session(cwd=ws, mcp_servers=servers)).session_id
        stopped.append(session_id)
        with contextlib.suppress(Exception):  # the editor's end may close before the answer comes
            await conn.prompt(session_id=session_id, prompt=[text_block(text)])

    async with anyio.create_task_group() as tg:
        if busy:
            tg.start_soon(ask, "Run a long command", [])
            demo = McpServerStdio(name="demo", command=sys.executable, args=[DEMO, "stdio"], env=[])
            tg.start_soon(ask, "Echo through the editor's server", [demo])
            with anyio.fail_after(20):
                await editor.asking.wait()
                while not any(args == "sleep 30" for args in descendants(proc.pid).values()):  # noqa: ASYNC110
                    await anyio.sleep(0.01)  # until the command runs: a process appears, no event says so
        below = descendants(proc.pid)
        assert not busy or any("server.py stdio" in args for args in below.values()), below
        started = time.monotonic()
        if how == "SIGTERM":
            proc.send_signal(signal.SIGTERM)
        else:
            proc.stdin.close()
        with anyio.fail_after(10):
            code = await proc.wait()
        elapsed = time.monotonic() - started
        tg.cancel_scope.cancel()
    await conn.close()
    return Ended(fresh, stopped, elapsed, code, (await proc.stderr.read()).decode(), below)


def test_zero_acp_reads_and_writes_files_and_dev_null_as_it_does_pipes(tmp_path: Path) -> None:
    # (the SDK's stdio streams crashed on a file, "Pipe transport is only for pipes...", and hung on /dev/null)
    requests = tmp_path / "requests.jsonl"
    asks = [("initialize", {"protocolVersion": 1}), ("session/new", {"cwd": str(tmp_path), "mcpServers": []})]
    requests.write_text("".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": p}) + "\n"
                                for i, (m, p) in enumerate(asks, 1)))  # fmt: skip
    replies, script = tmp_path / "replies.jsonl", write_script(tmp_path / "turns.toml", SCRIPT)
    with requests.open() as stdin, replies.open("w") as stdout:
        ran = subprocess.run(
            [ZERO, "acp", "--provider", "scripted", "--script", str(script)],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=30,
        )
    assert (ran.returncode, ran.stderr) == (0, b"")
    answers = [json.loads(line) for line in replies.read_text().splitlines()]
    assert [a["id"] for a in answers] == [1, 2] and answers[1]["result"]["sessionId"]

    with open(os.devnull) as nothing:  # no editor at all: it ends at once, as at a closed pipe
        ran = subprocess.run([ZERO, "acp"], stdin=nothing, capture_output=True, timeout=30)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, b"", b"")

    ran = subprocess.run(f"exec {ZERO} acp >&-", shell=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    assert (ran.returncode, ran.stderr) == (
        1,
        b"zero: error: cannot write to standard output: the descriptor is closed\n",
    )
