"""Streaming benchmark: one long answer, in many small chunks, read by Zero and by the bare SDK.

A loopback server (its own process) streams one answer of N text chunks of 12 characters (the size
real servers send) in the OpenAI format. Zero reads it as `zero exec` does (in-process `main`, its
session on disk, the answer printed; in `text` and in `stream-json` output, which writes every
delta), and the bare `openai` SDK reads the same stream and joins the deltas, as its docs show.
Each side runs in a fresh process; we report chunks per second (the median of 3 runs, in turns)
and Zero's rate as a share of the SDK's.

    python bench/bench_stream.py              # N = 100,000
    python bench/bench_stream.py --n 20000
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIECE = "Hello world "  # 12 characters a chunk


def pin(core: int) -> None:
    cores = os.cpu_count() or 1
    if cores >= 2 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core % cores})


def serve(n: int) -> None:
    pin(-1)
    sys.path.insert(0, str(ROOT / "tests"))
    from support.llm_server import LLMServer, Reply, _chunk

    events: list[tuple[str | None, str]] = [(None, _chunk({"role": "assistant", "content": ""}))]
    events += [(None, _chunk({"content": PIECE}))] * n
    events.append((None, _chunk({}, "stop")))
    usage = {"prompt_tokens": 50, "completion_tokens": 3 * n, "total_tokens": 50 + 3 * n}
    events.append((None, _chunk(None, usage=usage)))
    events.append((None, "[DONE]"))
    reply = Reply(events=events, batch=1000)

    with LLMServer(lambda request: reply) as server:
        print(server.url, flush=True)
        sys.stdin.read()


def zero_worker(url: str, output_format: str) -> float:
    import zero.agent
    from zero.cli import exec as _exec  # noqa: F401 - imported before the clock starts, as the SDK side is
    from zero.cli import main

    # A cap above the answer (older versions had no flag, and no cap on OpenAI-compatible servers).
    cap = ["--max-output-tokens", "10000000"] if hasattr(zero.agent, "smallest_cap") else []
    out = io.StringIO()
    started = time.perf_counter()
    code = main(
        ["exec", "Write a long answer.", "--base-url", url, "--model", "gpt-4.1-mini", *cap]
        + ["--output-format", output_format, "--cwd", os.environ["ZERO_HOME"]],
        stdout=out,
        stderr=io.StringIO(),
        stdin=io.StringIO(""),
    )
    wall = time.perf_counter() - started
    assert code == 0, out.getvalue()[-500:]
    return wall


def sdk_worker(url: str) -> float:
    import anyio
    import openai

    async def main() -> str:
        client = openai.AsyncOpenAI(api_key="sk-bench", base_url=url, max_retries=0)
        stream = await client.chat.completions.create(
            model="gpt-4.1-mini",
            messages=[{"role": "user", "content": "Write a long answer."}],
            stream=True,
            stream_options={"include_usage": True},
        )
        parts = []
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
        await client.close()
        return "".join(parts)

    started = time.perf_counter()
    text = anyio.run(main)
    wall = time.perf_counter() - started
    assert text.startswith(PIECE)
    return wall


def measure(kind: str, url: str, scratch: str) -> float:
    home = tempfile.mkdtemp(dir=scratch)
    env = {**os.environ, "ZERO_HOME": home, "PYTHONPATH": str(ROOT / "tests")}
    done = subprocess.run(
        [sys.executable, __file__, "--worker", kind, "--url", url],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return float(json.loads(done.stdout.strip().splitlines()[-1])["wall"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.n)
        return
    if args.worker:
        pin(0)
        wall = sdk_worker(args.url) if args.worker == "sdk" else zero_worker(args.url, args.worker)
        print(json.dumps({"wall": wall}))
        return
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--n", str(args.n)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip() + "/v1"
    kinds = ("sdk", "text", "stream-json")
    walls: dict[str, list[float]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory(prefix="zero-bench-stream-") as scratch:
        for _ in range(args.runs):
            for kind in kinds:
                walls[kind].append(measure(kind, url, scratch))
    server.communicate("")
    rates = {k: args.n / statistics.median(v) for k, v in walls.items()}
    print(f"{args.n:,} chunks of {len(PIECE)} characters, median of {args.runs} runs")
    print(f"  bare openai SDK      {rates['sdk']:>10,.0f} chunks/s")
    for kind in ("text", "stream-json"):
        print(f"  zero exec {kind:<11}{rates[kind]:>10,.0f} chunks/s  ({rates[kind] / rates['sdk']:.2f} x the SDK)")


if __name__ == "__main__":
    main()
