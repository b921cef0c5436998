"""Running the bash tool as the agent does, and looking at processes and folders from outside the sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from zero.tools import ShellSettings, ToolContext, Workspace, _sandbox
from zero.tools.builtin import Bash

needs_sandbox = pytest.mark.skipif(not _sandbox.available(), reason=f"{_sandbox.unavailable_reason()}")


def _has_cap_sys_admin() -> bool:
    with open("/proc/self/status") as f:
        effective = next(line for line in f if line.startswith("CapEff:"))
    return bool(int(effective.split()[1], 16) >> 21 & 1)


needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not _has_cap_sys_admin(), reason="needs root with CAP_SYS_ADMIN (as tests run in CI)"
)
"""Root, whose unconfined commands get a PID namespace of their own, and who can run Zero ``in_a_container``."""

_CONTAINER = """
import ctypes, os, sys
for cap in (19, 21):  # CAP_SYS_PTRACE, CAP_SYS_ADMIN
    assert ctypes.CDLL(None).prctl(24, cap, 0, 0, 0) == 0  # PR_CAPBSET_DROP: gone for good, past exec too
os.execv(sys.argv[1], sys.argv[1:])
"""


def in_a_container(argv: list[str]) -> list[str]:
    """``argv`` run (by root) as root runs in a default container (Docker's, Podman's): without CAP_SYS_ADMIN, so
    with no namespace but a user namespace, and without CAP_SYS_PTRACE. The process is ``argv``'s (exec)."""
    return [sys.executable, "-c", _CONTAINER, *argv]


def bash(
    workspace: Path, *commands: str, mode: str = "auto", shell: ShellSettings | None = None, **args: object
) -> list[str]:
    """The outputs of ``commands``, run one after the other in one run (which then ends) in ``workspace``."""

    async def run() -> list[str]:
        ctx = ToolContext(workspace=Workspace([workspace]), permission_mode=mode, shell=shell or ShellSettings())
        try:
            return [(await Bash().call({"command": command, **args}, ctx)).text for command in commands]
        finally:
            await ctx.end_background()

    return anyio.run(run)


def running(pattern: str) -> list[str]:
    """The pids of this machine's processes whose command line matches ``pattern``."""
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return found.stdout.split()
