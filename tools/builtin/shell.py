"""The bash tool: a command in the workspace, with a timeout and a process-group kill."""

from __future__ import annotations

import os
import signal
import subprocess

import anyio
from pydantic import Field

from zero.tools.base import ArgsModel, BuiltinTool, ToolContext, ToolOutput

__all__ = ["Bash"]

MAX_CAPTURE = 512_000  # bytes kept from each end of a very long output


class BashArgs(ArgsModel):
    command: str = Field(description="The bash command to run in the workspace root.")
    timeout_seconds: float = Field(120, gt=0, le=1800, description="Kill the command after this long.")


class Bash(BuiltinTool[BashArgs]):
    name = "bash"
    description = (
        "Run a bash command in the workspace root and return its combined stdout and stderr "
        "with the exit code. The command and everything it started are killed at the timeout."
    )
    side_effect = "shell"
    args = BashArgs

    async def run(self, args: BashArgs, ctx: ToolContext) -> ToolOutput:
        head = bytearray()
        tail = bytearray()
        dropped = 0
        timed_out = False
        process = await anyio.open_process(
            ["bash", "-c", args.command],
            cwd=ctx.workspace.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so the kill takes the children too
        )
        try:
            with anyio.move_on_after(args.timeout_seconds) as scope:
                assert process.stdout is not None
                async for chunk in process.stdout:
                    room = MAX_CAPTURE - len(head)
                    if room > 0:
                        head.extend(chunk[:room])
                        chunk = chunk[room:]
                    tail.extend(chunk)
                    if len(tail) > MAX_CAPTURE:
                        dropped += len(tail) - MAX_CAPTURE
                        del tail[: len(tail) - MAX_CAPTURE]
                await process.wait()
            timed_out = scope.cancelled_caught
        finally:
            if process.returncode is None:
                _kill_group(process.pid)
                with anyio.CancelScope(shield=True):
                    await process.wait()
        text = head.decode("utf-8", "replace")
        if dropped:
            text += f"\n[... {dropped} bytes cut ...]\n"
        text += tail.decode("utf-8", "replace")
        if timed_out:
            return ToolOutput(f"{text}\n[killed after {args.timeout_seconds:g} s timeout]", is_error=True)
        code = process.returncode
        return ToolOutput(f"{text}\n[exit code {code}]" if text else f"[exit code {code}]", is_error=code != 0)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
