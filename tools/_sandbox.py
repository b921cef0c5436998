"""Where shell commands run: in a sandbox where the system has one, else unconfined.

The sandbox is Linux's own: new user, PID, mount and network namespaces, so the command has no
network and everything it starts ends with it, even when Zero is killed; and Landlock, so it may
write only inside the workspace and the temp folders. Its first process is ``_sandbox_init``,
which also keeps jobs the command left in the background alive until the run ends.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["INIT", "available", "command_line", "unavailable_reason"]

INIT = str(Path(__file__).with_name("_sandbox_init.py"))


@functools.cache
def unavailable_reason() -> str | None:
    """Why shell commands cannot be sandboxed here (None: they can). Asked once: it starts a sandbox."""
    if not sys.platform.startswith("linux"):
        return "sandboxing needs Linux"
    status_r, status_w = os.pipe()
    hold_r, hold_w = os.pipe()
    try:
        argv = command_line("true", confined=True, writable=[], status_fd=status_w, hold_fd=hold_r)
        probe = subprocess.run(
            argv, capture_output=True, timeout=10, pass_fds=(status_w, hold_r), stdin=subprocess.DEVNULL
        )
        os.close(status_w)
        status_w = -1
        status = os.read(status_r, 64)
    except (OSError, subprocess.SubprocessError) as e:
        return f"the sandbox does not start here: {e}"
    finally:
        for fd in (status_r, status_w, hold_r, hold_w):
            if fd >= 0:
                os.close(fd)
    if probe.returncode != 0 or not status.startswith(b"0 "):
        error = probe.stderr.decode(errors="replace").strip().splitlines()
        why = error[-1] if error else f"exit code {probe.returncode}"
        return f"user namespaces or Landlock are not available here ({why})"
    return None


def available() -> bool:
    return unavailable_reason() is None


def temp_folders() -> list[str]:
    return sorted({tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev"})


def command_line(command: str, *, confined: bool, writable: list[str], status_fd: int, hold_fd: int) -> list[str]:
    """The argv that runs ``bash -c command``: inside the sandbox when ``confined``."""
    init = [sys.executable, "-I", "-S", INIT, "--status-fd", str(status_fd), "--hold-fd", str(hold_fd)]
    bash = ["--", "bash", "-c", command]
    if not confined:
        return [*init, *bash]
    paths = [arg for path in [*writable, *temp_folders()] for arg in ("--write", path)]
    return [*init, "--namespace", "--confine", *paths, *bash]
