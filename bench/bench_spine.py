"""Spine benchmarks: `zero --help` start-up time, the interactive shell's time to its prompt, and
session appends per second.

python bench/bench_spine.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from zero.agent import MessageAdded
from zero.sessions import FileSessionStore, SessionMetadata, new_session_id

ZERO = str(Path(sys.executable).with_name("zero"))


def help_wall_time(runs: int = 10) -> float:
    subprocess.run([ZERO, "--help"], capture_output=True, check=True)  # warm the file cache
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([ZERO, "--help"], capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def shell_to_prompt(runs: int = 10) -> float:
    """From starting `zero` in a terminal (an OpenAI-compatible server configured) to its prompt."""
    import os

    import pexpect

    times = []
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "ZERO_HOME": home, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
        args = ["--base-url", "http://127.0.0.1:9/v1", "--model", "local", "--cwd", home]
        for _ in range(runs + 1):
            started = time.perf_counter()
            child = pexpect.spawn(ZERO, args, env=env, dimensions=(40, 120))
            child.expect("›".encode(), timeout=20)
            times.append(time.perf_counter() - started)
            child.sendcontrol("d")
            child.expect(pexpect.EOF, timeout=20)
            child.close()
    return statistics.median(times[1:])  # the first warms the file cache


def python_start(runs: int = 10) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def appends_per_second(batch: int, seconds: float = 2.0, *, submit: bool = False) -> tuple[float, float]:
    """(batches/s, events/s) appending ``batch`` events at a time to one session: each one waited
    for (``append``), or handed to the writer (``submit``, as agents do) and flushed at the end."""
    with tempfile.TemporaryDirectory() as root:
        store = FileSessionStore(Path(root))
        sid = new_session_id()
        store.create(SessionMetadata(session_id=sid))
        events = [MessageAdded(session_id=sid, role="assistant", content="x" * 200)] * batch
        count = 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            if submit:
                store.submit(sid, events)
            else:
                store.append(sid, events)
            count += 1
        store.flush()
        elapsed = time.perf_counter() - started
        assert store.metadata(sid).event_count == count * batch
    return count / elapsed, count * batch / elapsed


def main() -> None:
    print(f"python -c pass          median of 10: {python_start() * 1000:6.1f} ms")
    print(f"zero --help             median of 10: {help_wall_time() * 1000:6.1f} ms   (target < 150 ms)")
    print(f"zero (shell) to prompt  median of 10: {shell_to_prompt() * 1000:6.1f} ms   (target < 500 ms)")
    for batch in (1, 10, 100):
        batches, events = appends_per_second(batch)
        print(
            f"session append, {batch:3d}/batch: {batches:8.0f} batches/s  {events:9.0f} events/s  "
            "(waited for: flock, one write, fsync, atomic metadata replace)"
        )
    for batch in (1, 10):
        batches, events = appends_per_second(batch, submit=True)
        print(
            f"session submit, {batch:3d}/batch: {batches:8.0f} batches/s  {events:9.0f} events/s  "
            "(handed to the writer, which commits what gathered every 10 ms; one flush at the end)"
        )


if __name__ == "__main__":
    main()
