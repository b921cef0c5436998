"""Typed outputs through the CLI a user types: a team whose member stays invalid exits 4 keeping its raw text,
stream-json and ``sessions show`` show a typed result, a Task asks for one and reads it back as JSON, and a
manifest names a schema file."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import lines, scripted, write_script, zero

TEAM = """
name = "typed"
[[members]]
name = "mapper"
specialist = "explorer"
prompt = "Map the modules."
output_retries = 1
output_schema = "modules.json"
[[members]]
name = "reviewer"
specialist = "explorer"
depends_on = ["mapper"]
prompt = "Review {{ mapper.output.modules }}."
"""

SCHEMA = {"type": "object", "properties": {"modules": {"type": "array", "items": {"type": "string"}}}}

INVALID = """
[[turns]]
match = { system = 'You are "mapper"', turn = 1 }
tool_calls = [{ name = "submit_result", arguments = { modules = "api" } }]
[[turns]]
match = { system = 'You are "mapper"', last = "does not match" }
text = "The modules: api."
"""

VALID = """
[[turns]]
match = { system = 'You are "mapper"', turn = 1 }
tool_calls = [{ name = "submit_result", arguments = { modules = ["api", "db"] } }]
[[turns]]
match = { system = 'You are "reviewer"', user = 'Review [' }
text = "Both look fine."
"""


def team(tmp_path: Path) -> Path:
    (tmp_path / "modules.json").write_text(json.dumps(SCHEMA))
    path = tmp_path / "team.toml"
    path.write_text(TEAM)
    return path


def test_a_member_that_stays_invalid_ends_invalid_output_exit_4_with_its_raw_text(
    workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path / "s.toml", INVALID)
    done = zero("swarm", "run", str(team(tmp_path)), *scripted(script, workspace), "--output-format", "json")
    assert done.returncode == 4, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "invalid_output" and result["budget"]["used"]["turns"] == 2
    mapper, reviewer = result["members"]
    assert (mapper["status"], mapper["output"]) == ("invalid_output", "The modules: api.")
    assert mapper["reason"] == (
        "the result did not match its output schema in 2 attempts (1 retry); the last: it answered in text without "
        "calling submit_result"
    )
    assert (reviewer["status"], reviewer["reason"]) == ("skipped", "dependency 'mapper' ended invalid_output")


def test_stream_json_and_sessions_show_give_a_typed_result(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.toml", VALID)
    done = zero("swarm", "run", str(team(tmp_path)), *scripted(script, workspace), "--output-format", "stream-json")
    assert done.returncode == 0, done.stderr
    ends = [e for e in lines(done.stdout) if e["type"] == "subagent_end"]
    assert ends[0]["structuredOutput"] == {"modules": ["api", "db"]} and "structuredOutput" not in ends[1]
    shown = zero("sessions", "show", ends[0]["sessionId"]).stdout
    assert '    result (valid by its output schema): {"modules": ["api", "db"]}\n' in shown


PARENT = """
[[turns]]
match = { user = "Map it", turn = 1 }
[[turns.tool_calls]]
name = "Task"
[turns.tool_calls.arguments]
name = "explorer"
prompt = "List the modules."
output_schema = { type = "array", items = { type = "string" } }
[[turns]]
match = { system = "explorer", user = "List the modules", turn = 1 }
tool_calls = [{ name = "submit_result", arguments = { result = ["api"] } }]
[[turns]]
match = { user = "Map it", turn = 2 }
text = "Done."
"""


def test_a_task_asks_for_a_typed_result_and_reads_it_back_as_json(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.toml", PARENT)
    done = zero("exec", "Map it", *scripted(script, workspace), "--output-format", "stream-json")
    assert done.returncode == 0, done.stderr
    events = lines(done.stdout)
    envelope = next(e["output"] for e in events if e["type"] == "tool_result" and e["output"].startswith("session_id"))
    head, body = envelope.split("\n---\n")
    assert "status: completed" in head and head.endswith("output: JSON, valid by the output schema")
    assert json.loads(body) == ["api"]
    assert next(e for e in events if e["type"] == "subagent_end")["structuredOutput"] == ["api"]


def test_a_task_with_a_bad_schema_is_told_why(workspace: Path, tmp_path: Path) -> None:
    bad = PARENT.replace('type = "array"', 'type = "list"').replace(
        'match = { user = "Map it", turn = 2 }', 'match = { user = "Map it", last = "not a valid JSON Schema" }'
    )
    script = write_script(tmp_path / "s.toml", bad)
    done = zero("exec", "Map it", *scripted(script, workspace), "--output-format", "stream-json")
    assert done.returncode == 0, done.stderr
    refused = next(e for e in lines(done.stdout) if e["type"] == "tool_result")
    assert refused["status"] == "error" and refused["output"].startswith(
        "Error: output_schema: it is not a valid JSON Schema: 'list' is not valid under any of the given schemas"
    )
    assert refused["output"].endswith('; give a JSON Schema object, or "json" for any JSON value')
    assert not [e for e in lines(done.stdout) if e["type"] == "subagent_start"]  # no child was started


def test_a_manifest_names_a_schema_file_beside_it_and_a_bad_one_is_refused_by_line(
    workspace: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "config" / "zero" / "specialists"
    folder.mkdir(parents=True)
    (folder / "modules.json").write_text(json.dumps(SCHEMA))
    manifest = 'name = "mapper"\ndescription = "Maps modules."\noutput_schema = "modules.json"\nprompt = "Map."\n'
    (folder / "mapper.toml").write_text(manifest)
    shown = zero("specialists", "show", "mapper", "--cwd", str(workspace))
    assert shown.returncode == 0, shown.stderr
    assert f"outputSchema: {json.dumps(SCHEMA)}\n" in shown.stdout
    (folder / "mapper.toml").write_text(manifest.replace('"modules.json"', '{ type = "objekt" }'))
    checked = zero("specialists", "validate", str(folder / "mapper.toml"))
    assert checked.returncode == 2
    assert f"{folder / 'mapper.toml'}:3: output_schema: it is not a valid JSON Schema: 'objekt' is not valid" in (
        checked.stdout + checked.stderr
    )


def test_validate_shows_each_members_typed_result(tmp_path: Path) -> None:
    shown = zero("swarm", "validate", str(team(tmp_path)))
    assert shown.returncode == 0, shown.stderr
    mapper = next(line for line in shown.stdout.splitlines() if line.startswith("  mapper "))
    assert mapper.endswith("max 30 turns · typed result (1 retry)")
    plan = json.loads(zero("swarm", "validate", str(team(tmp_path)), "--json").stdout)
    assert [(m["outputSchema"], m["outputRetries"]) for m in plan["members"]] == [(SCHEMA, 1), (None, None)]
