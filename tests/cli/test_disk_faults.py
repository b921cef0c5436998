"""Disks that refuse a session's writes: full, a file-size limit, read-only. The run stops ``failed`` and says
so, the log stays a prefix of what happened (whole events only), and the session reads and resumes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

from support.cli import ZERO, scripted, write_script, zero
from support.mounts import fill, read_only_view, tmpfs

from zero.agent import RunStarted
from zero.sessions import SessionMetadata, new_session_id, record_of

BIG = "x" * 30_000 + "\n"  # a tool result of ~24 KB once trimmed, more than the full disk has left

READ_THEN_WRITE = """
[[turns]]
match = { turn = 1 }
tool_calls = [{ name = "read_file", arguments = { path = "big.txt" } }]
[[turns]]
match = { turn = 2 }
tool_calls = [{ name = "write_file", arguments = { path = "after.txt", content = "written after the gap" } }]
[[turns]]
match = { turn = 3 }
text = "done"
"""
BIG_ANSWER = f"""
[[turns]]
text = "{"y" * 30_000}"
"""
GO_ON = """
[[turns]]
match = { last = "go on" }
text = "Carrying on."
"""


def log_of(home: Path, session_id: str) -> list[dict[str, Any]]:
    """Every line of the session's log, each of which must be a whole event."""
    return [json.loads(line) for line in (home / "sessions" / session_id / "events.jsonl").read_text().splitlines()]


def stored_status(home: Path, session_id: str) -> str:
    status: str = json.loads((home / "sessions" / session_id / "metadata.json").read_text())["status"]
    return status


def only_session(home: Path) -> str:
    (found,) = [p.name for p in (home / "sessions").iterdir() if not p.name.startswith(".")]
    return found


def disk_full(home: Path, session_id: str) -> str:
    return (
        f"zero: error: cannot write the session: disk full ({home}/sessions/{session_id}/events.jsonl); it keeps "
        f"everything up to its last whole event: make room, then continue it with zero sessions resume {session_id}\n"
    )


def test_a_full_disk_stops_the_run_failed_before_its_next_side_effect_and_the_session_resumes(
    tmp_path: Path, workspace: Path
) -> None:
    (workspace / "big.txt").write_text(BIG)
    script = write_script(tmp_path / "script.toml", READ_THEN_WRITE)
    home = tmp_path / "home"
    with tmpfs(home, "1m"):
        env = {"ZERO_HOME": str(home)}
        filler = fill(home, leave=32 * 1024)  # room for the session, not for the file's contents in its log
        done = zero("exec", "read big.txt", *scripted(script, workspace), env=env)
        sid = only_session(home)
        assert done.returncode == 1
        said = done.stderr.splitlines(keepends=True)
        assert said[:3] == ["→ read_file big.txt\n", "→ write_file after.txt\n", disk_full(home, sid)]
        assert said[3].startswith(f"[session {sid} · failed · 2 turns · ") and len(said) == 4
        # the write the model asked for after the lost result never ran: its call could not be logged
        assert not (workspace / "after.txt").exists()
        log = log_of(home, sid)
        assert [r["sequence"] for r in log] == list(range(1, len(log) + 1))
        assert log[-1]["type"] == "tool_call" and log[-1]["payload"]["name"] == "read_file"  # nothing after the gap
        assert stored_status(home, sid) == "failed"

        shown = zero("sessions", "show", sid, env=env)  # on the full disk still
        assert shown.returncode == 0 and f"session {sid} · root · zero · failed" in shown.stdout
        assert f"#{len(log)} → read_file" in shown.stdout

        filler.unlink()
        go_on = write_script(tmp_path / "go-on.toml", GO_ON)
        resumed = zero("sessions", "resume", sid, "go on", *scripted(go_on, workspace), env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout == "Carrying on.\n"
        after = log_of(home, sid)
        assert [r["sequence"] for r in after] == list(range(1, len(after) + 1)) and after[: len(log)] == log
        assert after[-1]["type"] == "run_end" and after[-1]["payload"]["status"] == "completed"
        assert stored_status(home, sid) == "completed"


def test_an_answer_the_full_disk_lost_is_a_failed_run_not_a_completed_one(tmp_path: Path, workspace: Path) -> None:
    script = write_script(tmp_path / "script.toml", BIG_ANSWER)
    home = tmp_path / "home"
    with tmpfs(home, "1m"):
        fill(home, leave=32 * 1024)  # the answer is the last thing the run writes, and it does not fit
        json_out = ("--output-format", "json")
        done = zero("exec", "answer", *scripted(script, workspace), *json_out, env={"ZERO_HOME": str(home)})
        sid = only_session(home)
        result = json.loads(done.stdout)
        assert done.returncode == 1 and result["status"] == "failed" and result["exitCode"] == 1
        assert result["sessionId"] == sid and result["turns"] == 1  # the run's own result, not a late error
        assert result["error"] == {"code": "session_write_error", "message": disk_full(home, sid)[13:-1]}
        assert done.stderr == ""  # said once, in the result
        assert stored_status(home, sid) == "failed"


def test_a_file_size_limit_stops_the_run_failed_with_the_limits_own_words(tmp_path: Path, workspace: Path) -> None:
    (workspace / "big.txt").write_text(BIG)
    script = write_script(tmp_path / "script.toml", READ_THEN_WRITE)
    home = tmp_path / "home"
    command = shlex.join([ZERO, "exec", "read big.txt", *scripted(script, workspace)])
    # RLIMIT_FSIZE of 16 KiB: Python ignores SIGXFSZ, so a write past it fails with EFBIG
    done = subprocess.run(
        ["bash", "-c", f"ulimit -f 16 && exec {command}"],
        capture_output=True,
        text=True,
        env={**os.environ, "ZERO_HOME": str(home)},
        timeout=60,
    )
    sid = only_session(home)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[2] == (
        f"zero: error: cannot write the session: file too large ({home}/sessions/{sid}/events.jsonl); it keeps "
        f"everything up to its last whole event: make room, then continue it with zero sessions resume {sid}"
    )
    assert not (workspace / "after.txt").exists()
    log = log_of(home, sid)
    assert [r["sequence"] for r in log] == list(range(1, len(log) + 1)) and log[-1]["type"] == "tool_call"
    assert stored_status(home, sid) == "failed"


def dead_session(home: Path, workspace: Path) -> str:
    """A session whose process died mid-run: ``running`` on disk, its lease free."""
    sid = new_session_id()
    folder = home / "sessions" / sid
    folder.mkdir(parents=True)
    meta = SessionMetadata(session_id=sid, cwd=str(workspace), title="died", status="running", event_count=1)
    (folder / "metadata.json").write_text(meta.model_dump_json(by_alias=True))
    start = RunStarted(session_id=sid, provider="scripted", model="scripted", cwd=str(workspace))
    (folder / "events.jsonl").write_text(json.dumps(record_of(sid, 1, meta.created_at, start)) + "\n")
    return sid


def test_a_read_only_zero_home_refuses_runs_up_front_and_still_lists_and_shows(tmp_path: Path, workspace: Path) -> None:
    source = tmp_path / "home"
    script = write_script(tmp_path / "script.toml", GO_ON)
    assert (
        zero(
            "exec",
            "hello",
            *scripted(write_script(tmp_path / "hi.toml", '[[turns]]\ntext = "hi"\n'), workspace),
            env={"ZERO_HOME": str(source)},
        ).returncode
        == 0
    )
    dead = dead_session(source, workspace)
    team = write_script(
        workspace / "team.toml", 'name = "t"\n[[members]]\nname = "a"\nspecialist = "explorer"\nprompt = "go on"\n'
    )
    with read_only_view(source, tmp_path / "ro") as home:
        env = {"ZERO_HOME": str(home)}
        refused = (
            f"zero: error: ZERO_HOME={home} is not writable: read-only file system; "
            "set ZERO_HOME to a writable folder\n"
        )
        for command in (
            ("exec", "go on", *scripted(script, workspace)),
            ("sessions", "resume", dead, "go on", *scripted(script, workspace)),
            ("swarm", "run", str(team), *scripted(script, workspace), "--no-live"),
            ("sessions", "rm", dead, "--yes"),
        ):
            done = zero(*command, env=env)
            assert (done.returncode, done.stderr) == (2, refused), command

        listed = zero("sessions", "list", "--json", env=env)
        assert listed.returncode == 0
        statuses = {row["title"]: row["status"] for row in json.loads(listed.stdout)}
        assert statuses == {"hello": "completed", "died": "interrupted"}  # derived: the process is gone
        shown = zero("sessions", "show", dead, env=env)
        assert shown.returncode == 0 and f"session {dead} · root · zero · interrupted" in shown.stdout
        assert stored_status(home, dead) == "running"  # nothing was written
