"""Spine benchmarks: `zero --help` start-up time, the start-up to the first model request (`zero exec`
beside a bare `openai` SDK script making the same call), the interactive shell's time to its prompt,
and session appends per second.

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


SDK_SCRIPT = """
import asyncio, sys, openai
async def main():
    client = openai.AsyncOpenAI(api_key="sk-bench", base_url=sys.argv[1])
    stream = await client.chat.completions.create(
        model="gpt-4.1-mini", messages=[{"role": "user", "content": "hi"}], stream=True)
    async for chunk in stream:
        pass
asyncio.run(main())
"""


def first_request(runs: int = 10) -> tuple[float, float]:
    """(zero, bare SDK): from starting the process to its first request reaching a loopback server."""
    import os

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from support.llm_server import LLMServer, openai_reply

    arrived: list[float] = []

    def respond(request: dict[str, object]) -> object:
        arrived.append(time.perf_counter())
        return openai_reply("hello")

    def once(args: list[str], env: dict[str, str]) -> float:
        arrived.clear()
        started = time.perf_counter()
        subprocess.run(args, capture_output=True, check=True, env=env)
        return arrived[0] - started

    with LLMServer(respond) as server, tempfile.TemporaryDirectory() as home:  # type: ignore[arg-type]
        url = server.url + "/v1"
        env = {**os.environ, "ZERO_HOME": home, "OPENAI_API_KEY": "sk-bench"}
        zero = [ZERO, "exec", "--base-url", url, "--model", "gpt-4.1-mini", "--cwd", home, "hi"]
        sdk = [sys.executable, "-c", SDK_SCRIPT, url]
        once(zero, env), once(sdk, env)  # warm the file cache
        zs, bs = [], []
        for _ in range(runs):  # in turns, so that both see the same machine
            zs.append(once(zero, env))
            bs.append(once(sdk, env))
    return statistics.median(zs), statistics.median(bs)


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
    zero, sdk = first_request()
    print(f"start-up to 1st request median of 10: zero exec {zero * 1000:6.1f} ms, bare SDK {sdk * 1000:6.1f} ms")
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
