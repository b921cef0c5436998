"""Sandbox benchmark: the cost of a trivial `bash` tool call (`true`), sandboxed (auto) and unconfined (unsafe), as
the agent makes it: through the tool, in one run (its first command makes the run's private temp folder; the
figures are of the calls after it): the median wall time, and the CPU time of the processes a call started.

python bench/bench_sandbox.py [CALLS]
"""

from __future__ import annotations

import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from zero.tools import ToolContext, Workspace, _sandbox
from zero.tools.builtin import Bash


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


async def per_call(mode: str, calls: int) -> tuple[float, float]:
    """The median wall time of a call and its mean CPU time (s)."""
    with tempfile.TemporaryDirectory() as folder:
        ctx = ToolContext(Workspace([Path(folder)]), permission_mode=mode)
        tool = Bash()
        await tool.call({"command": "true"}, ctx)  # the run's first command
        times, cpu = [], _cpu()
        for _ in range(calls):
            started = time.perf_counter()
            out = await tool.call({"command": "true"}, ctx)
            times.append(time.perf_counter() - started)
            assert not out.is_error, out.text
        cpu = (_cpu() - cpu) / calls
        await ctx.end_background()
    return statistics.median(times), cpu


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    modes = ["auto", "unsafe"] if _sandbox.available() else ["unsafe"]
    if not _sandbox.available():
        print(f"no sandbox here: {_sandbox.unavailable_reason()}")
    for mode in modes:
        wall, cpu = anyio.run(per_call, mode, calls)
        kind = "sandboxed (auto)" if mode == "auto" else "unconfined (unsafe)"
        print(f"bash `true`, {kind + ':':21} {wall * 1000:5.1f} ms wall, {cpu * 1000:5.1f} ms CPU")


if __name__ == "__main__":
    main()
