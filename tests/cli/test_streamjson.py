"""stream-json conformance: every event type and field of the protocol document (schema v2)."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from support.cli import TASK_IN_A_WORKTREE, lines, scripted, write_script, zero
from support.git import hermetic_git, make_repo

from zero.agent import RUN_STATUSES, PermissionDecided
from zero.cli.streamjson import StreamJsonWriter, read_input
from zero.errors import UsageError, ZeroError
from zero.sessions import FileSessionStore, short_id

# The fields docs/STREAM_JSON_PROTOCOL.md gives each output event (besides schemaVersion, type, runId).
FIELDS: dict[str, set[str]] = {
    "run_start": {"sessionId", "cwd", "provider", "model", "apiModel"},
    "reasoning": {"delta"},
    "text": {"delta"},
    "tool_call": {"id", "name", "args", "sideEffect"},
    "permission_request": {"id", "name", "action", "permission", "permissionMode", "sideEffect", "reason"},
    "permission_decision": {"id", "name", "action", "permission", "permissionGranted", "decisionReason"},
    "tool_result": {"id", "status", "output", "truncated"},
    "usage": {"promptTokens", "completionTokens", "totalTokens"},
    "final": {"text"},
    "error": {"code", "message", "recoverable"},
    "run_end": {"status", "exitCode"},
    "warning": {"code", "message"},
    "rate_limit": {"reason", "waitSeconds"},
}

SCRIPT = """
[[turns]]
match = { turn = 1 }
reasoning = "I should look first."
text = "Looking."
tool_calls = [
  { name = "read_file", arguments = { path = "README.md" } },
  { name = "write_file", arguments = { path = "notes.txt", content = "x" } },
]
[[turns]]
match = { turn = 2 }
error = { kind = "overloaded", retry_after = 0.01 }
[[turns]]
match = { turn = 2 }
error = { kind = "timeout" }
[[turns]]
match = { turn = 2 }
text = "The answer is 42."
"""


def check(event: dict[str, Any], run_id: str) -> None:
    expected = FIELDS[event["type"]]
    assert event["schemaVersion"] == 2 and event["runId"] == run_id
    assert set(event) - {"schemaVersion", "type", "runId"} == expected, event


def test_a_run_emits_every_headless_event_type_with_exact_fields(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.toml", SCRIPT)
    done = zero(
        "exec",
        "What is the answer?",
        *scripted(script, workspace),
        "--permission-mode",
        "ask",
        "--output-format",
        "stream-json",
    )
    assert done.returncode == 0, done.stderr
    events = lines(done.stdout)
    run_id = events[0]["runId"]
    for event in events:
        check(event, run_id)
    kinds = [e["type"] for e in events]
    assert kinds == [
        "run_start",
        "reasoning",
        "reasoning",
        "text",
        "usage",
        "tool_call",
        "tool_result",
        "tool_call",
        "permission_request",
        "tool_result",
        "rate_limit",  # the server said it is overloaded: the call waits its turn
        "warning",  # a timeout: the call is retried
        "text",
        "text",
        "usage",
        "final",
        "run_end",
    ]
    by_type = {e["type"]: e for e in events}
    assert by_type["run_start"]["provider"] == "scripted" and by_type["run_start"]["cwd"] == str(workspace.resolve())
    assert by_type["tool_call"]["args"] == {"path": "notes.txt", "content": "x"}
    assert by_type["permission_request"] | {"runId": ""} == {
        "schemaVersion": 2,
        "type": "permission_request",
        "runId": "",
        "id": "call_1_2",
        "name": "write_file",
        "action": "prompt",
        "permission": "prompt",
        "permissionMode": "ask",
        "sideEffect": "write",
        "reason": "Creates or overwrites files.",
    }
    assert [e["status"] for e in events if e["type"] == "tool_result"] == ["ok", "denied"]
    assert by_type["final"]["text"] == "The answer is 42."
    assert by_type["run_end"]["status"] == "success" and by_type["run_end"]["exitCode"] == 0
    usage = by_type["usage"]
    assert usage["totalTokens"] == usage["promptTokens"] + usage["completionTokens"]


def test_errors_are_followed_by_run_end(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.toml", '[[turns]]\nerror = { kind = "auth", message = "bad key" }\n')
    done = zero(
        "exec",
        "hi",
        *scripted(script, workspace),
        "--output-format",
        "stream-json",
    )
    events = lines(done.stdout)
    for event in events:
        check(event, events[0]["runId"])
    assert [e["type"] for e in events] == ["run_start", "error", "run_end"]
    assert events[1]["code"] == "auth_error" and events[1]["message"] == "bad key" and not events[1]["recoverable"]
    assert events[2]["status"] == "error" and events[2]["exitCode"] == 3 and done.returncode == 3


def test_a_setup_error_still_ends_with_run_end(workspace: Path) -> None:
    done = zero("exec", "hi", "--cwd", str(workspace), "--output-format", "stream-json")
    events = lines(done.stdout)
    assert [e["type"] for e in events] == ["error", "run_end"]
    check(events[0], events[0]["runId"])
    assert events[0]["code"] == "config_error" and events[1]["exitCode"] == 2 and done.returncode == 2


def test_permission_decision_has_the_documented_fields() -> None:
    out = io.StringIO()
    writer = StreamJsonWriter(out, "run_1", "root")
    writer.write(
        PermissionDecided(session_id="root", id="call_2", name="write_file", granted=True, reason="approved in TUI")
    )
    [event] = lines(out.getvalue())
    check(event, "run_1")
    assert event["action"] == "allow" and event["permissionGranted"] is True


def test_child_events_carry_their_session_id() -> None:
    out = io.StringIO()
    writer = StreamJsonWriter(out, "run_1", "root")
    writer.emit("text", {"delta": "a"}, "root")
    writer.emit("text", {"delta": "b"}, "child_1")
    first, second = lines(out.getvalue())
    assert "sessionId" not in first and second["sessionId"] == "child_1"


def test_input_events_are_combined_and_unknown_fields_rejected(workspace: Path, tmp_path: Path) -> None:
    text = (
        '{"schemaVersion": 2, "type": "message", "role": "user", "content": "Inspect this repo."}\n\n'
        '{"schemaVersion": 2, "type": "prompt", "content": "Return only blockers."}\n'
    )
    assert read_input(text.splitlines()) == "Inspect this repo.\n\nReturn only blockers."
    for bad, message in [
        ('{"schemaVersion": 2, "type": "prompt", "content": "x", "extra": 1}', "unknown field 'extra'"),
        ('{"schemaVersion": 1, "type": "prompt", "content": "x"}', "schemaVersion must be 2"),
        ('{"schemaVersion": 2, "type": "shout", "content": "x"}', "unknown event type 'shout'"),
        ('{"schemaVersion": 2, "type": "message", "role": "assistant", "content": "x"}', "must have role 'user'"),
        ("not json", "not valid JSON"),
        ('{"schemaVersion": 2, "type": "prompt", "content": ""}', "content is empty"),  # (an internal error)
        ('{"schemaVersion": 2, "type": "message", "role": "user", "content": " \\n "}', "content is blank"),
    ]:
        with pytest.raises(UsageError, match=message):
            read_input([bad])
    for bad, message in [
        (
            '{"schemaVersion": 2, "content": "x"}',
            'stdin line 2: a line of stream-json input needs a "type" ("message" or "prompt")',
        ),
        ('{"type": "prompt", "content": "x"}', 'stdin line 2: a line of stream-json input needs "schemaVersion": 2'),
    ]:
        with pytest.raises(UsageError) as refused:
            read_input(["", bad])
        assert str(refused.value) == message
    script = write_script(tmp_path / "s.toml", '[[turns]]\nmatch = { user = "blockers" }\ntext = "none"\n')
    done = zero(
        "exec",
        "--input-format",
        "stream-json",
        *scripted(script, workspace),
        input=text,
    )
    assert done.returncode == 0 and done.stdout == "none\n"
    done = zero(
        "exec",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        *scripted(script, workspace),
        input='{"schemaVersion": 2, "type": "prompt", "content": "x", "images": []}',
    )
    assert done.returncode == 2
    assert [e["type"] for e in lines(done.stdout)] == ["error", "run_end"]
    assert "stdin line 1: unknown field 'images'" in lines(done.stdout)[0]["message"]


BACKGROUND = """
[[turns]]
match = { system = "You are Zero", turn = 1 }
tool_calls = [{ name = "Task", arguments = { name = "explorer", prompt = "Map it slowly.", run_in_background = true } }]
[[turns]]
match = { system = "You are Zero", turn = 2 }
text = "I will not wait for it."
[[turns]]
match = { system = "You are the explorer" }
delay = 30
text = "never"
"""


def test_a_background_child_is_stopped_and_recorded_before_the_run_ends(workspace: Path, tmp_path: Path) -> None:
    """Its parent answered without waiting: the child is stopped (``cancelled``, as the run's background shell
    jobs are), and its end comes before ``run_end``, which is the last line, here and in the parent's log."""
    script = write_script(tmp_path / "s.toml", BACKGROUND)
    done = zero("exec", "Map it.", *scripted(script, workspace), "--output-format", "stream-json")
    assert done.returncode == 0, done.stderr
    events = lines(done.stdout)
    kinds = [e["type"] for e in events]
    assert kinds[-3:] == ["subagent_end", "final", "run_end"]
    assert (
        events[-3]["status"] == "cancelled"
        and events[-3]["sessionId"] == events[kinds.index("subagent_start")]["sessionId"]
    )
    root = events[0]["sessionId"]
    log = [e.event for e in FileSessionStore.default().events(root)]
    assert [e.kind for e in log if e.kind in ("child_start", "child_end", "run_end")] == [
        "child_start",
        "child_end",
        "run_end",
    ]


SKIPPING_TEAM = """
name = "t"
[[members]]
name = "a"
specialist = "explorer"
prompt = "Fail."
[[members]]
name = "b"
specialist = "explorer"
prompt = "Go on from {{ a.output }}."
depends_on = ["a"]
"""


def test_a_skipped_member_is_framed_by_subagent_start_and_end(workspace: Path, tmp_path: Path) -> None:
    team = write_script(workspace / "team.toml", SKIPPING_TEAM)
    script = write_script(tmp_path / "s.toml", '[[turns]]\nmatch = { user = "Fail." }\nerror = { kind = "auth" }\n')
    done = zero("swarm", "run", str(team), *scripted(script, workspace), "--output-format", "stream-json")
    assert done.returncode == 3, done.stderr  # the team ends as its worst member: a provider error
    events = lines(done.stdout)
    framing = [(e["type"], e.get("member") or e["status"]) for e in events if e["type"].startswith("subagent_")]
    assert framing == [
        ("subagent_start", "a"),
        ("subagent_end", "failed"),
        ("subagent_start", "b"),
        ("subagent_end", "skipped"),
    ]
    skipped = next(e for e in events if e["type"] == "subagent_start" and e["member"] == "b")
    team_id = events[0]["sessionId"]
    assert skipped == {
        "schemaVersion": 2,
        "type": "subagent_start",
        "runId": events[0]["runId"],
        "sessionId": skipped["sessionId"],
        "parentSessionId": team_id,
        "rootSessionId": team_id,
        "agentName": "b",
        "specialist": "explorer",
        "member": "b",
    }
    assert events[events.index(skipped) + 1]["sessionId"] == skipped["sessionId"]
    assert events[-2]["code"] == "auth_error"  # the member's, documented as every code an error line can carry


def _codes(cls: type[ZeroError]) -> set[str]:
    return {cls.code}.union(*(_codes(sub) for sub in cls.__subclasses__()))


def test_every_error_code_an_error_line_can_carry_is_documented() -> None:
    """An ``error`` line's code is a ``ZeroError``'s (a setup failure, a failed run) or, when a run stopped
    without one, its status (a team that ``failed``, an agent ``cancelled``): the document lists them all."""
    import zero.cli.main  # noqa: F401  (every error class of the commands, defined)
    import zero.orchestrator  # noqa: F401

    doc = (Path(__file__).parents[2] / "docs" / "STREAM_JSON_PROTOCOL.md").read_text()
    table = doc[doc.index("### Error codes") :].split("\n\n")[2]
    documented = {code for row in table.splitlines()[2:] for code in re.findall(r"`([a-z_]+)`", row.split("|")[1])}
    # (a team ends as its worst member, ``skipped`` when its dependency completed but did not land)
    possible = _codes(ZeroError) | (set(RUN_STATUSES) - {"completed"}) | {"skipped"}
    assert possible - documented == set()
    assert documented - possible == set()


def test_a_run_stopped_by_max_turns_ends_incomplete_and_recoverable(workspace: Path, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "s.toml",
        '[[turns]]\ntool_calls = [{ name = "read_file", arguments = { path = "README.md" } }]\n',
    )
    done = zero("exec", "hi", *scripted(script, workspace), "--max-turns", "1", "--output-format", "stream-json")
    events = lines(done.stdout)
    error, end = events[-2], events[-1]
    assert error["type"] == "error" and error["code"] == "max_turns" and error["recoverable"] is True
    assert error["message"] == "stopped after 1 model call (max turns); the answer is partial"
    assert end == {**end, "type": "run_end", "status": "incomplete", "exitCode": 4} and done.returncode == 4


def test_a_task_child_in_a_worktree_ends_with_its_branch_and_diff_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hermetic_git(tmp_path, monkeypatch)
    repo = make_repo(tmp_path / "repo")
    script = write_script(tmp_path / "s.toml", TASK_IN_A_WORKTREE)
    done = zero("exec", "Add a module aside", *scripted(script, repo), "--output-format", "stream-json")
    assert done.returncode == 0, done.stderr
    [end] = [e for e in lines(done.stdout) if e["type"] == "subagent_end"]
    child = end["sessionId"]
    assert (end["branch"], end["diffStat"]) == (f"zero/{short_id(child)}/worker", "+2 −0 in 1 file")
