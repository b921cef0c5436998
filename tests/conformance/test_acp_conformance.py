"""``zero acp`` driven by the ACP TypeScript SDK's client (``tests/conformance/acp_client.mjs``), which checks
every message it receives against the ACP v1 schema: one node process, one scenario, from initialize to the
agent's exit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.cli import ZERO, write_script
from support.conformance import exchange, node_client, updates

SCRIPT = """
[[turns]]
match = { user = "Read and delegate", turn = 1 }
text = "Reading first."
tool_calls = [{ name = "read_file", arguments = { path = "README.md" } }]
[[turns]]
match = { user = "Read and delegate", turn = 2 }
[[turns.tool_calls]]
name = "Task"
arguments = { name = "worker", description = "write notes", prompt = "Write notes.md." }
[[turns]]
match = { system = "You are the worker", turn = 1 }
tool_calls = [{ name = "write_file", arguments = { path = "notes.md", content = "42" } }]
[[turns]]
match = { system = "You are the worker", turn = 2 }
text = "Wrote notes.md."
[[turns]]
match = { user = "Read and delegate", turn = 3 }
text = "Done: the README says 42 and notes.md is written."
[[turns]]
match = { last = "Run a long command" }
tool_calls = [{ name = "bash", arguments = { command = "sleep 30" } }]
[[turns]]
match = { last = "And now?" }
text = "Still here."
[[turns]]
match = { last = "Fail" }
error = { kind = "auth" }
"""


def prompted(text: str) -> Any:
    return lambda params: params["prompt"][0]["text"] == text


def calls(seen: list[dict[str, Any]], call_id: str) -> list[str]:
    return [f"{u['sessionUpdate']}:{u.get('status', '-')}" for u in seen if u.get("toolCallId") == call_id]


def test_the_acp_typescript_client_drives_zero_acp(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.toml", SCRIPT)
    command = [ZERO, "acp", "--provider", "scripted", "--script", str(script), "--permission-mode", "ask"]
    report, errors = node_client("acp_client.mjs", str(workspace), "--", *command)
    assert report["invalid"] == []  # every message it received fits the schema
    assert "stuck" not in report, report["stuck"]
    assert "Traceback" not in errors and "internal error" not in errors, errors
    steps = report["steps"]
    init = steps["initialize"]["result"]
    assert init["protocolVersion"] == 1 and init["agentInfo"]["name"] == "zero"
    assert {"list", "resume", "close"} <= set(init["agentCapabilities"]["sessionCapabilities"])
    sid = steps["new"]["result"]["sessionId"]
    # a turn with a tool call, and a Task child whose permission request is answered
    turn = updates(exchange(report, "session/prompt", prompted("Read and delegate")))
    assert turn[0] == {"sessionUpdate": "session_info_update", "title": "Read and delegate"}
    read, task = (u["toolCallId"] for u in turn if u["sessionUpdate"] == "tool_call")
    assert calls(turn, read) == ["tool_call:in_progress", "tool_call_update:completed"]
    assert calls(turn, task)[:2] == ["tool_call:in_progress", "tool_call_update:in_progress"]
    progress = [
        u["content"][0]["content"]["text"]
        for u in turn
        if u["sessionUpdate"] == "tool_call_update" and u["toolCallId"] == task and u.get("content")
    ]
    assert progress[0] == "worker started: write notes" and progress[1] == "worker: write_file notes.md"
    assert any(p.startswith("worker completed · ") for p in progress)
    asked = [u for u in turn if u["sessionUpdate"] == "ask"]
    assert [(a["toolCallId"], a["title"], a["status"]) for a in asked] == [
        (task, "write_file notes.md (asked by worker)", "pending")
    ]
    assert (workspace / "notes.md").read_text() == "42"
    assert steps["delegate"]["result"] == {"stopReason": "end_turn"}
    # a command that asks, is allowed, runs, and is cancelled
    turn = updates(exchange(report, "session/prompt", prompted("Run a long command")))
    bash = next(u["toolCallId"] for u in turn if u["sessionUpdate"] == "tool_call")
    assert calls(turn, bash) == [
        "tool_call:pending",
        "ask:pending",
        "tool_call_update:in_progress",
        "tool_call_update:failed",
    ]
    assert steps["cancelled"]["result"] == {"stopReason": "cancelled"}
    # listed (with and without cwd: this client's workspace), closed, loaded (replayed) and resumed
    for listing in ("list", "list without cwd"):
        listed = steps[listing]["result"]["sessions"]
        assert [(s["sessionId"], s["cwd"], s["title"]) for s in listed] == [(sid, str(workspace), "Read and delegate")]
    assert steps["close"]["result"] == {}
    replay = updates(exchange(report, "session/load"))
    said = [u["content"]["text"] for u in replay if u["sessionUpdate"] == "user_message_chunk"]
    assert said == ["Read and delegate", "Run a long command"]
    shown = [(u["title"], u["status"]) for u in replay if u["sessionUpdate"] == "tool_call"]
    assert shown == [
        ("read_file README.md", "completed"),
        ("Task worker", "completed"),
        ("bash sleep 30", "failed"),
    ]
    assert (
        "The answer is 42"
        in next(u for u in replay if u["sessionUpdate"] == "tool_call")["content"][0]["content"]["text"]
    )
    assert "modes" in steps["load"]["result"] and "modes" in steps["resume"]["result"]
    assert steps["after"]["result"] == {"stopReason": "end_turn"}
    # a failed turn is the request's error
    assert steps["failed"]["error"] == {
        "code": -32603,
        "message": "scripted auth error",
        "data": {"sessionId": sid, "status": "failed", "code": "auth_error"},
    }
    exit = report["exit"]
    assert exit["code"] == 0 and exit["ms"] < 1000, exit
