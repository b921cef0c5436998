"""Running ``zero`` as a user would: in-process through ``main(argv)`` with its own streams, or as the
installed console script in a subprocess where the process itself is the subject (signals, terminals,
start-up)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zero.cli import main

ZERO = str(Path(sys.executable).with_name("zero"))

TASK_IN_A_WORKTREE = """
[[turns]]
match = { last = "Add a module aside", turn = 1 }
tool_calls = [{ name = "Task", arguments = { name = "worker", prompt = "Add d.py.", isolation = "worktree" } }]
[[turns]]
match = { system = "You are the worker", turn = 1 }
tool_calls = [{ name = "write_file", arguments = { path = "d.py", content = "d = 1\\nd += 1\\n" } }]
[[turns]]
match = { system = "You are the worker", turn = 2 }
text = "d.py written."
[[turns]]
match = { last = "d.py written", turn = 2 }
text = "It is on a branch."
"""
"""A parent that gives a worker a Task in a worktree of its own (``isolation = "worktree"``): d.py, 2 lines."""


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


class _Input(io.StringIO):
    def isatty(self) -> bool:
        return False


@contextmanager
def _environ(env: dict[str, str] | None) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def zero(*args: str, env: dict[str, str] | None = None, input: str | None = None, cwd: Path | None = None) -> Done:
    """``zero ARGS`` in this process: its exit code and what it wrote."""
    out, err = io.StringIO(), io.StringIO()
    before = Path.cwd()
    with _environ(env):
        if cwd is not None:
            os.chdir(cwd)
        try:
            code = main(list(args), stdout=out, stderr=err, stdin=_Input(input or ""))
        finally:
            os.chdir(before)
    return Done(code, out.getvalue(), err.getvalue())


def scripted(script: Path, workspace: Path) -> list[str]:
    """The flags of a run on a script of model turns, in ``workspace``."""
    return ["--provider", "scripted", "--script", str(script), "--cwd", str(workspace)]


def zero_process(
    *args: str,
    env: dict[str, str] | None = None,
    input: str | None = None,
    timeout: float = 60,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``zero ARGS`` as its own process."""
    return subprocess.run(
        [ZERO, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        input=input if input is not None else "",
        timeout=timeout,
        cwd=cwd,
    )


def lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def write_script(path: Path, body: str) -> Path:
    path.write_text(body)
    return path
