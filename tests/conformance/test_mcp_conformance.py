"""``zero mcp serve`` driven by a client nobody here wrote: the MCP TypeScript SDK's (``@modelcontextprotocol/sdk``,
installed from the lock file by ``npm ci --prefix tests/conformance``), which checks every answer it gets
against the protocol's schema. Skipped, saying why, where there is no ``node``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.cli import ZERO, scripted, write_script

from zero import __version__
from zero.sessions import FileSessionStore

HERE = Path(__file__).parent
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None, reason="node is not installed: the MCP TypeScript SDK's client cannot drive zero mcp serve"
)

SCRIPT = """
[[turns]]
match = { user = "Look around", turn = 1 }
text = "Looking."
tool_calls = [{ name = "list_directory" }, { name = "glob", arguments = { pattern = "src/*" } }]
[[turns]]
match = { user = "Look around", turn = 2 }
text = "A README and a src folder."
[[turns]]
match = { system = 'You are "solo"' }
text = "solo done"
[[turns]]
match = { user = "Take forever", turn = 1 }
tool_calls = [{ name = "list_directory" }]
[[turns]]
match = { user = "Take forever", turn = 2 }
delay = 30
text = "never"
"""


def drive(workspace: Path, tmp_path: Path) -> dict[str, Any]:
    """What the SDK's client saw of a session with ``zero mcp serve`` (see mcp_client.mjs)."""
    assert NODE is not None
    if not (HERE / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail("the MCP TypeScript SDK is not installed: run npm ci --prefix tests/conformance")
    script = write_script(tmp_path / "s.toml", SCRIPT)
    env = {k: os.environ[k] for k in ("ZERO_HOME", "XDG_CONFIG_HOME")}
    server = {"command": ZERO, "args": ["mcp", "serve", *scripted(script, workspace)], "env": env}
    done = subprocess.run(
        [NODE, str(HERE / "mcp_client.mjs"), json.dumps(server)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    assert "error" not in report, report["error"] + "\nthe server's stderr:\n" + report["stderr"]
    return report


def untokened(notes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Progress notifications of one call (they all carry its token), without the token."""
    assert len({n["progressToken"] for n in notes}) == 1, notes
    return [{k: v for k, v in n.items() if k != "progressToken"} for n in notes]


def test_the_mcp_typescript_sdk_lists_calls_with_progress_and_cancels(workspace: Path, tmp_path: Path) -> None:
    write_script(
        workspace / "team.toml", 'name = "t"\n[[members]]\nname = "solo"\nspecialist = "explorer"\nprompt = "Go."\n'
    )
    report = drive(workspace, tmp_path)
    assert report["serverVersion"] == {"name": "zero", "title": "Zero", "version": __version__}
    assert report["capabilities"] == {"tools": {"listChanged": False}}
    tools = {t["name"]: t for t in report["tools"]}
    assert {"explorer", "worker", "run_team", "session_tree", "session_show"} <= set(tools)
    assert tools["explorer"]["inputSchema"] == {
        "type": "object",
        "properties": {"prompt": {"type": "string"}},
        "required": ["prompt"],
    }

    answer = report["answer"]
    assert answer.get("isError") is not True
    [text] = answer["content"]
    session_id = text["text"].splitlines()[0].removeprefix("session_id: ")
    assert text["text"] == f"session_id: {session_id}\nstatus: completed\n\nA README and a src folder."
    assert untokened(report["progress"]) == [
        {"progress": 0, "message": f"session {session_id}"},
        {"progress": 1, "message": "list_directory"},
        {"progress": 2, "message": "glob src/*"},
    ]
    team = json.loads(report["team"]["content"][0]["text"])
    assert team["status"] == "completed" and team["members"][0]["output"] == "solo done"
    assert untokened(report["teamProgress"]) == [
        {"progress": 0, "total": 1, "message": f"session {team['sessionId']}"},
        {"progress": 1, "total": 1, "message": "solo completed"},
    ]

    # notifications/cancelled: the SDK gave up on the call, and the server stopped its run
    assert report["cancelledCall"] == {"rejected": "McpError: MCP error -32001: the user stopped it"}
    assert report["cancelledStatus"] == "cancelled", f"still {report['cancelledStatus']} after {report['polls']} looks"
    cancelled = FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions").metadata(report["cancelledSession"])
    assert cancelled.title == "Take forever" and cancelled.status == "cancelled"
