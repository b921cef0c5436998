"""Typed outputs in a team: a member's result reaches its dependents as JSON and through nested placeholders; an
invalid one is retried on the ledger, and one that stays invalid ends the member ``invalid_output``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.teams import member, run_team, team_file

from zero.agent import PriceTable, ScriptMatch, ScriptToolCall, ScriptTurn
from zero.orchestrator import TeamError, build_plan
from zero.specialists import SpecialistRegistry

pytestmark = pytest.mark.anyio

MODULES = """[members.output_schema]
type = "object"
required = ["modules"]
properties = { modules = { type = "array", items = { type = "string" } } }
"""

TYPED = (
    """
name = "typed"
[[members]]
name = "mapper"
specialist = "explorer"
prompt = "Map the modules."
"""
    + MODULES
    + """
[[members]]
name = "reviewer"
specialist = "explorer"
depends_on = ["mapper"]
prompt = "All: {{ mapper.output }}\\nModules: {{ mapper.output.modules }}\\nFirst: {{ mapper.output.modules.0 }}"
"""
)


def submit(**arguments: object) -> ScriptToolCall:
    return ScriptToolCall(name="submit_result", arguments=dict(arguments))


def retried(name: str, *calls: ScriptToolCall) -> ScriptTurn:
    """A member's next call after its result was refused (the refusal is the last message)."""
    return ScriptTurn(
        match=ScriptMatch(system=f'You are "{name}"', last="does not match the output schema"), tool_calls=list(calls)
    )


async def test_a_valid_result_reaches_a_dependent_as_json_and_through_nested_placeholders(
    workspace: Path, tmp_path: Path
) -> None:
    turns = [
        member("mapper", "", submit(modules="api"), turn=1),  # invalid: a string, not an array
        retried("mapper", submit(modules=["api", "db"])),
        member("reviewer", "Reviewed api and db."),
    ]
    result, runner, provider, events = await run_team(workspace, tmp_path, TYPED, turns)
    provider.assert_consumed()
    assert result.status == "completed"
    mapper, reviewer = result.members
    assert mapper.status == "completed" and mapper.result == {"modules": ["api", "db"]}
    asked = next(c for c in provider.calls if 'You are "reviewer"' in c.messages[0].content).messages[1].content
    assert asked == 'All: {\n  "modules": [\n    "api",\n    "db"\n  ]\n}\nModules: [\n  "api",\n  "db"\n]\nFirst: api'
    refused = provider.calls[1].messages[-1]
    assert refused.is_error and refused.content == (
        "Error: the result does not match the output schema: modules: 'api' is not of type 'array'. "
        "Fix it and call submit_result again."
    )
    # every call is booked on the ledger, the retry included: 2 of the mapper's, 1 of the reviewer's
    assert (
        len(provider.calls) == 3 and runner.ledger.used.turns == 3 and result.to_json()["budget"]["used"]["turns"] == 3
    )
    members = result.to_json()["members"]
    assert members[0]["structuredOutput"] == {"modules": ["api", "db"]} and "structuredOutput" not in members[1]


async def test_a_result_that_stays_invalid_ends_invalid_output_and_its_dependent_is_skipped(
    workspace: Path, tmp_path: Path
) -> None:
    body = TYPED.replace('prompt = "Map the modules."', 'prompt = "Map the modules."\noutput_retries = 1')
    turns = [
        member("mapper", "", submit(modules="api"), turn=1),
        retried("mapper", submit(modules=[1, 2])),
    ]
    result, runner, provider, _ = await run_team(workspace, tmp_path, body, turns)
    provider.assert_consumed()
    mapper, reviewer = result.members
    assert (result.status, result.exit_code) == ("invalid_output", 4)
    assert mapper.status == "invalid_output" and json.loads(mapper.output) == {"modules": [1, 2]}
    assert mapper.reason == (
        "the result did not match its output schema in 2 attempts (1 retry); the last: the result does not match "
        "the output schema: modules.0: 1 is not of type 'string'; modules.1: 2 is not of type 'string'. "
        "Fix it and call submit_result again."
    )
    assert (reviewer.status, reviewer.reason) == ("skipped", "dependency 'mapper' ended invalid_output")
    assert runner.ledger.used.turns == 2


async def test_a_field_missing_at_run_time_skips_the_dependent_saying_which(workspace: Path, tmp_path: Path) -> None:
    body = TYPED.replace(MODULES, 'output_schema = "json"\n').replace(
        "{{ mapper.output.modules.0 }}", "{{ mapper.output.files }}"
    )
    result, _, provider, _ = await run_team(
        workspace, tmp_path, body, [member("mapper", "", submit(result={"modules": []}))]
    )
    provider.assert_consumed()
    reviewer = result.members[1]
    assert reviewer.status == "skipped"
    assert (
        reviewer.reason
        == "{{ mapper.output.files }}: mapper's result: the result has no key 'files' (its keys: modules)"
    )


def plan_of(workspace: Path, tmp_path: Path, body: str) -> TeamError:
    with pytest.raises(TeamError) as caught:
        build_plan(
            team_file(tmp_path, body),
            SpecialistRegistry.load(workspace),
            provider="scripted",
            model="gpt-4.1-mini",
            permission_mode="auto",
            prices=PriceTable.builtin(),
        )
    return caught.value


def test_a_placeholder_into_a_field_the_schema_cannot_have_is_refused_before_any_call(
    workspace: Path, tmp_path: Path
) -> None:
    error = plan_of(workspace, tmp_path, TYPED.replace("{{ mapper.output.modules.0 }}", "{{ mapper.output.modlues }}"))
    assert [str(p) for p in error.problems] == [
        f"{tmp_path / 'team.toml'}:16: member 'reviewer': prompt uses {{{{ mapper.output.modlues }}}}, but mapper's "
        "result cannot have it: its output_schema declares no property 'modlues' (did you mean \"modules\"?)"
    ]
    closed = TYPED.replace("required = [", "additionalProperties = false\nrequired = [")  # (it was let through)
    error = plan_of(workspace, tmp_path, closed.replace("{{ mapper.output.modules.0 }}", "{{ mapper.output.files }}"))
    assert error.problems[0].message.endswith("its output_schema declares no property 'files'")
    error = plan_of(
        workspace, tmp_path, TYPED.replace("{{ mapper.output.modules.0 }}", "{{ mapper.output.modules.x }}")
    )
    assert error.problems[0].message.endswith(
        "its output_schema makes at modules an array, whose items are named by number, not 'x'"
    )


def test_a_placeholder_into_an_untyped_member_is_refused(workspace: Path, tmp_path: Path) -> None:
    body = TYPED.replace(MODULES, "")
    error = plan_of(workspace, tmp_path, body)
    assert [p.message for p in error.problems] == [
        "prompt uses {{ mapper.output.modules }}, but 'mapper' has no output_schema: its output is text, with no "
        "fields (give it an output_schema, or use {{ mapper.output }})",
        "prompt uses {{ mapper.output.modules.0 }}, but 'mapper' has no output_schema: its output is text, with no "
        "fields (give it an output_schema, or use {{ mapper.output }})",
    ]


def test_a_bad_schema_is_refused_naming_the_file_key_and_line(workspace: Path, tmp_path: Path) -> None:
    error = plan_of(workspace, tmp_path, TYPED.replace('type = "array"', 'type = "list"'))
    problem = error.problems[0]
    assert (problem.key, problem.line, problem.subject) == ("members.output_schema", 7, "member 'mapper'")
    assert problem.message.startswith("output_schema: it is not a valid JSON Schema: 'list' is not valid under any")
    body = TYPED.replace(MODULES, 'output_schema = "schemas/missing.json"\n')
    message = plan_of(workspace, tmp_path, body).problems[0].message
    assert (
        message
        == f"output_schema: cannot read the schema file {tmp_path / 'schemas/missing.json'}: No such file or directory"
    )
    body = '[defaults]\noutput_schema = ["a"]\n' + TYPED.replace('name = "typed"\n', "")
    problem = plan_of(workspace, tmp_path, 'name = "typed"\n' + body).problems[0]
    assert (problem.key, problem.line) == ("defaults.output_schema", 3)


async def test_a_schema_file_is_read_relative_to_the_team_file_and_defaults_apply(
    workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "count.json").write_text('{"type": "integer", "minimum": 0}')
    body = """
name = "counted"
[defaults]
output_schema = "schemas/count.json"
[[members]]
name = "counter"
specialist = "explorer"
prompt = "Count."
[[members]]
name = "doubler"
specialist = "explorer"
depends_on = ["counter"]
output_schema = "json"
prompt = "Double {{ counter.output }}."
"""
    turns = [member("counter", "", submit(result=21)), member("doubler", "", submit(result={"doubled": 42}))]
    result, _, provider, _ = await run_team(workspace, tmp_path, body, turns)
    provider.assert_consumed()
    assert [m.result for m in result.members] == [21, {"doubled": 42}]
    offered = {t.name: t.parameters for t in provider.calls[0].tools}["submit_result"]
    assert offered["properties"]["result"] == {"type": "integer", "minimum": 0}
    assert provider.calls[1].messages[1].content.startswith("Double 21.")
