"""MCP result benchmark: the peak memory of a run whose MCP tool answers with a very large result.

`zero exec` on the scripted provider calls the demo server's `big` tool (tests/mcpdemo/server.py, over
stdio), which answers SIZE bytes of text, then its `echo` tool, then answers. Zero reads a result only up
to its cap and says how much it left out, so its peak RSS stays near its resting size however large the
answer; the run still goes on (the second call is answered). Printed per size: Zero's peak RSS, the wall
time, and the start of each tool result the model got.

    python bench/bench_mcp_result.py                  # 1 MB and 50 MB
    python bench/bench_mcp_result.py --mb 1 --mb 200
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "tests" / "mcpdemo" / "server.py"

SCRIPT = """
[[turns]]
match = {{ turn = 1 }}
tool_calls = [{{ name = "mcp__demo__big", arguments = {{ size = {size} }} }}]
[[turns]]
match = {{ turn = 2 }}
tool_calls = [{{ name = "mcp__demo__echo", arguments = {{ text = "after" }} }}]
[[turns]]
match = {{ turn = 3 }}
text = "done"
"""

# Zero run in-process by a small driver that reports its own peak RSS when it ends (the server's is apart).
DRIVER = """
import resource, sys, time
from zero.cli import entry
started = time.monotonic()
try:
    entry()
finally:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sys.stderr.write(f"PEAK {peak} WALL {time.monotonic() - started:.2f}\\n")
"""


def run(size: int) -> tuple[int, float, list[str], int]:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        (base / "ws").mkdir()
        config = base / "config" / "zero"
        config.mkdir(parents=True)
        server = f'command = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(DEMO))}, "stdio"]\ntrust = true\n'
        (config / "config.toml").write_text("[mcp.servers.demo]\n" + server)
        (base / "s.toml").write_text(SCRIPT.format(size=size))
        argv = [sys.executable, "-c", DRIVER, "exec", "go", "--provider", "scripted", "--script", str(base / "s.toml")]
        argv += ["--cwd", str(base / "ws"), "--output-format", "stream-json"]
        env = {**os.environ, "ZERO_HOME": str(base / "home"), "XDG_CONFIG_HOME": str(base / "config")}
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)
    said = next(line for line in done.stderr.splitlines() if line.startswith("PEAK "))
    _, peak, _, wall = said.split()
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    results = [str(e.get("output", ""))[:70] for e in events if e.get("type") == "tool_result"]
    return int(peak), float(wall), results, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, action="append", help="result sizes in MB (default: 1 and 50)")
    args = parser.parse_args()
    for mb in args.mb or [1, 50]:
        peak, wall, results, code = run(mb * 1_000_000)
        print(f"{mb:>4} MB result: exit {code}, Zero's peak RSS {peak / 1024:.1f} MB, {wall:.2f} s")
        for result in results:
            print(f"       {result!r}")


if __name__ == "__main__":
    main()
