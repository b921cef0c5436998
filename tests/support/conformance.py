"""Clients nobody here wrote, driving Zero's servers: the Node packages pinned in ``tests/conformance``
(``package-lock.json``; CI installs them with ``npm ci --prefix tests/conformance``). Where ``node`` is
missing, only the tests that need it are skipped, saying why; without the packages they fail, saying how to
install them."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

CONFORMANCE = Path(__file__).parents[1] / "conformance"


def node_client(script: str, *args: str, timeout: float = 60) -> tuple[dict[str, Any], str]:
    """Run ``node tests/conformance/SCRIPT ARGS``: the JSON report it prints, and its stderr (where the server
    it drives writes too)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the conformance tests drive Zero with the ACP and MCP TypeScript SDKs")
    if not (CONFORMANCE / "node_modules").is_dir():
        pytest.fail(f"the conformance clients' packages are not installed: run npm ci --prefix {CONFORMANCE}")
    done = subprocess.run([node, str(CONFORMANCE / script), *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def exchange(report: dict[str, Any], method: str, test: Any = None) -> list[dict[str, Any]]:
    """The messages a client received while its first request ``method`` (whose params pass ``test``) was
    open, its answer last."""
    seen = [s["message"] for s in report["seen"]]
    start = next(
        i
        for i, s in enumerate(report["seen"])
        if s["dir"] == "out" and s["message"].get("method") == method and (test is None or test(s["message"]["params"]))
    )
    request_id = seen[start]["id"]
    received = []
    for entry in report["seen"][start + 1 :]:
        message = entry["message"]
        if entry["dir"] == "in":
            received.append(message)
            if message.get("id") == request_id and "method" not in message:
                return received
    raise AssertionError(f"{method} was never answered")


def updates(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The session updates among ``messages``, and each permission request as ``{"sessionUpdate": "ask", ...}``."""
    found = []
    for message in messages:
        if message.get("method") == "session/update":
            found.append(message["params"]["update"])
        elif message.get("method") == "session/request_permission":
            found.append({"sessionUpdate": "ask", **message["params"]["toolCall"]})
    return found
