"""Running ``zero`` as a user would: the installed console script, in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ZERO = str(Path(sys.executable).with_name("zero"))


def zero(
    *args: str, env: dict[str, str] | None = None, input: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ZERO, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        input=input if input is not None else "",
        timeout=timeout,
    )


def lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def write_script(path: Path, body: str) -> Path:
    path.write_text(body)
    return path
