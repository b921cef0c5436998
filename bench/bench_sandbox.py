"""Sandbox benchmark: the wall time of a trivial `bash` tool call (`true`), sandboxed (auto) and unconfined
(unsafe), as the agent makes it: through the tool, in one run (the run's first command sets up its private
temp folders; the figure is the median of the calls after it).

python bench/bench_sandbox.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from zero.tools import ToolContext, Workspace, _sandbox
from zero.tools.builtin import Bash


async def per_call(mode: str, runs: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        ctx = ToolContext(Workspace([Path(folder)]), permission_mode=mode)
        tool = Bash()
        await tool.call({"command": "true"}, ctx)  # the run's first command
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            out = await tool.call({"command": "true"}, ctx)
            times.append(time.perf_counter() - started)
            assert not out.is_error, out.text
        await ctx.end_background()
    return statistics.median(times)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    if _sandbox.available():
        print(f"bash `true`, sandboxed (auto):   {anyio.run(per_call, 'auto', runs) * 1000:.1f} ms")
    else:
        print(f"no sandbox here: {_sandbox.unavailable_reason()}")
    print(f"bash `true`, unconfined (unsafe): {anyio.run(per_call, 'unsafe', runs) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
