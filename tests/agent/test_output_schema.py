"""Typed outputs in the agent loop: the run ends with a submit_result call whose arguments match the schema."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from support.local_server import Answer, LocalModel, turns

from zero.agent import (
    AgentConfig,
    AgentRun,
    Event,
    Message,
    RetryPolicy,
    ScriptedProvider,
    ScriptMatch,
    ScriptToolCall,
    ScriptTurn,
    output_schema,
)
from zero.agent.output_schema import CALL_SUBMIT, OutputSchema, read_schema, schema_problem
from zero.tools import ToolRegistry, Workspace, builtin_tools

from .test_local_server import run_against
from .test_loop import turn

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).parents[2]

MODULES = {
    "type": "object",
    "properties": {"modules": {"type": "array", "items": {"type": "string"}}},
    "required": ["modules"],
}


def typed_run(
    workspace: Path, turns: list[ScriptTurn], schema: dict[str, Any], retries: int | None = None
) -> tuple[AgentRun, list[Event], ScriptedProvider]:
    provider = ScriptedProvider(turns)
    events: list[Event] = []
    config = AgentConfig(
        provider=provider,
        model="gpt-4.1-mini",
        tools=ToolRegistry(builtin_tools()),
        workspace=Workspace([workspace]),
        retry=RetryPolicy(retries=0),
        output_schema=OutputSchema.of(schema, retries),  # None: the default retries
    )
    run = AgentRun(config, "s1", [Message(role="system", content="You are a test agent.")], events.append)
    return run, events, provider


async def test_a_valid_result_ends_the_run_as_json(workspace: Path) -> None:
    run, events, provider = typed_run(
        workspace,
        [
            turn(1, "", ("read_file", {"path": "README.md"})),
            turn(2, "", ("submit_result", {"modules": ["api", "db"]})),
        ],
        MODULES,
    )
    result = await run.run("Map the modules.")
    assert result.status == "completed" and result.turns == 2
    assert result.structured_output == {"modules": ["api", "db"]} and json.loads(result.output) == {
        "modules": ["api", "db"]
    }
    offered = {t.name: t.parameters for t in provider.calls[0].tools}
    assert offered["submit_result"] == MODULES  # an object schema is the tool's parameters as it is
    assert provider.calls[0].messages[-1].content.endswith("An answer in text is not accepted.")
    end = [e for e in events if e.kind == "run_end"][-1]
    assert end.structured_output == {"modules": ["api", "db"]}


async def test_an_invalid_result_goes_back_with_its_error_and_the_next_one_is_taken(workspace: Path) -> None:
    run, events, provider = typed_run(
        workspace,
        [
            turn(1, "", ("submit_result", {"modules": "api"})),
            turn(2, "", ("submit_result", {"modules": ["api"]})),
        ],
        MODULES,
    )
    result = await run.run("Map the modules.")
    assert result.status == "completed" and result.structured_output == {"modules": ["api"]} and result.turns == 2
    refused = provider.calls[1].messages[-1]
    assert refused.role == "tool" and refused.is_error
    assert refused.content == (
        "Error: the result does not match the output schema: modules: 'api' is not of type 'array'. "
        "Fix it and call submit_result again."
    )


async def test_an_answer_without_submit_result_is_an_invalid_attempt_and_the_model_is_told(workspace: Path) -> None:
    run, _, provider = typed_run(
        workspace,
        [
            turn(1, "The modules are api and db."),
            ScriptTurn(
                match=ScriptMatch(last="Your answer was not accepted"),
                tool_calls=[ScriptToolCall(name="submit_result", arguments={"result": ["api", "db"]})],
            ),
        ],
        {"type": "array", "items": {"type": "string"}},
    )
    result = await run.run("Map the modules.")
    assert result.status == "completed" and result.structured_output == ["api", "db"]
    assert provider.calls[1].messages[-1].content == CALL_SUBMIT
    wrapped = {t.name: t.parameters for t in provider.calls[0].tools}["submit_result"]
    assert wrapped["required"] == ["result"] and wrapped["properties"]["result"]["type"] == "array"


async def test_a_result_that_stays_invalid_ends_invalid_output_with_its_raw_text(workspace: Path) -> None:
    run, events, provider = typed_run(
        workspace,
        [
            turn(1, "", ("submit_result", {"modules": "api"})),
            turn(2, "", ("submit_result", {"modules": [1]})),
            turn(3, "Just api, really."),  # (the third call of the run: no note came between)
        ],
        MODULES,
        retries=2,
    )
    result = await run.run("Map the modules.")
    provider.assert_consumed()
    assert result.status == "invalid_output" and result.turns == 3 and result.output == "Just api, really."
    assert result.structured_output is None and result.error_code == "invalid_output"
    assert result.error == (
        "the result did not match its output schema in 3 attempts (2 retries); the last: it answered in text "
        "without calling submit_result"
    )
    assert [e.status for e in events if e.kind == "run_end"] == ["invalid_output"]


async def test_the_retries_are_counted_exactly(workspace: Path) -> None:
    bad = [turn(n, "", ("submit_result", {"modules": n})) for n in (1, 2)]
    run, _, provider = typed_run(workspace, [*bad, turn(3, "", ("submit_result", {"modules": []}))], MODULES, 1)
    result = await run.run("Map the modules.")
    assert result.status == "invalid_output" and result.turns == 2 and len(provider.calls) == 2
    assert json.loads(result.output) == {"modules": 2}  # the raw arguments of the last call
    assert result.error == (
        "the result did not match its output schema in 2 attempts (1 retry); the last: the result does not match "
        "the output schema: modules: 2 is not of type 'array'. Fix it and call submit_result again."
    )


async def test_by_default_two_retries_follow_the_first_attempt(workspace: Path) -> None:
    bad = [turn(n, "", ("submit_result", {"modules": n})) for n in (1, 2, 3)]
    run, _, provider = typed_run(workspace, [*bad, turn(4, "", ("submit_result", {"modules": []}))], MODULES)
    result = await run.run("Map the modules.")
    assert result.status == "invalid_output" and len(provider.calls) == 3
    assert result.error is not None and result.error.startswith("the result did not match its output schema in 3 ")


async def test_any_json_takes_any_value(workspace: Path) -> None:
    run, _, _ = typed_run(workspace, [turn(1, "", ("submit_result", {"result": None}))], read_schema("json", workspace))
    result = await run.run("Anything.")
    assert result.status == "completed" and result.output == "null"


def test_a_schema_is_checked_itself(tmp_path: Path) -> None:
    assert schema_problem({"type": "objekt"}) is not None
    assert schema_problem({"type": "objekt"}).startswith("it is not a valid JSON Schema: 'objekt' is not valid")  # type: ignore[union-attr]
    assert schema_problem(["a"]) == "a JSON Schema is a table (an object), not list"
    (tmp_path / "s.json").write_text(json.dumps(MODULES))
    assert read_schema("s.json", tmp_path) == MODULES
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(ValueError, match=r"bad.json is not valid JSON: Expecting property name"):
        read_schema("bad.json", tmp_path)
    with pytest.raises(ValueError, match=r"cannot read the schema file .*missing.json: No such file or directory"):
        read_schema("missing.json", tmp_path)
    # beneath the folder of the file that names it: a repository's file cannot make a file elsewhere a schema
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(MODULES))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "link.json").symlink_to(outside)
    for named in ("../outside.json", "link.json", str(outside)):
        with pytest.raises(ValueError, match=rf"the schema file {re.escape(named)} is outside {tmp_path / 'in'}, "):
            read_schema(named, tmp_path / "in")


async def test_a_pattern_that_backtracks_without_end_is_cut_off_and_the_event_loop_runs_meanwhile(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ^(a+)+$ against 26 a's and a "!" takes Python's re about 5 s, holding the interpreter throughout (no
    # other task, no Ctrl-C); checked in a child process, the wait is cut at CHECK_SECONDS and the loop ticks.
    monkeypatch.setattr(output_schema, "CHECK_SECONDS", 0.5)
    schema = {"type": "object", "properties": {"v": {"type": "string", "pattern": "^(a+)+$"}}, "required": ["v"]}
    run, _, provider = typed_run(
        workspace,
        [turn(1, "", ("submit_result", {"v": "a" * 26 + "!"})), turn(2, "", ("submit_result", {"v": "aaa"}))],
        schema,
    )
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.05)
            ticks += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        with anyio.fail_after(4):
            result = await run.run("Answer.")
        tg.cancel_scope.cancel()
    assert result.status == "completed" and result.structured_output == {"v": "aaa"}  # a plain match is taken
    assert provider.calls[1].messages[-1].content == (
        "Error: checking the result against the output schema took longer than 0.5 s, so it is refused (a pattern "
        "in the schema that backtracks without end on this result?); submit a simpler result"
    )
    assert ticks >= 5  # the loop ran while the child backtracked


async def test_a_pattern_mismatch_is_reported_from_the_child_process(workspace: Path) -> None:
    schema = {"type": "object", "patternProperties": {"^x_": {"type": "integer"}}}
    run, _, provider = typed_run(
        workspace,
        [turn(1, "", ("submit_result", {"x_a": "one"})), turn(2, "", ("submit_result", {"x_a": 1}))],
        schema,
    )
    result = await run.run("Answer.")
    assert result.status == "completed" and result.structured_output == {"x_a": 1}
    assert provider.calls[1].messages[-1].content == (
        "Error: the result does not match the output schema: x_a: 'one' is not of type 'integer'. "
        "Fix it and call submit_result again."
    )


async def test_a_ref_cycle_is_a_clear_error_not_a_recursion_error(workspace: Path) -> None:
    assert schema_problem({"$ref": "#"}) == (
        'it refers to itself without end (a $ref cycle such as {"$ref": "#"}): no value can be checked'
    )
    with pytest.raises(ValueError, match=r"^it refers to itself without end"):
        read_schema({"$ref": "#"}, workspace)
    # A cycle only an object reaches passes the load and is refused, with what is wrong, when a result meets it.
    deep = {"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}}
    assert schema_problem(deep) is None
    run, _, provider = typed_run(workspace, [turn(n, "", ("submit_result", {"a": 1})) for n in (1, 2, 3)], deep)
    result = await run.run("Answer.")
    assert result.status == "invalid_output" and result.error is not None
    assert result.error.endswith(
        "the result does not match the output schema: the output schema refers to itself without end (a $ref "
        "cycle), so no result can be checked against it. Fix it and call submit_result again."
    )


@pytest.mark.parametrize("written", [None, "json"])
async def test_a_rude_local_server_without_json_mode_gets_the_schema_as_a_tool(
    workspace: Path, written: Literal["json"] | None
) -> None:
    # The real openai SDK over HTTP to a server that offers tools only with tool_choice and has no JSON mode
    # (llama-cpp-python); ``written``: the model writes its calls as text, as small models do.
    model = LocalModel(
        turns(
            Answer("", [("submit_result", {"modules": "api"})]), Answer("", [("submit_result", {"modules": ["api"]})])
        ),
        calls_as_text=written,
    )
    result, events, requests = await run_against(
        model, workspace, "Map the modules.", output_schema=OutputSchema(schema=MODULES)
    )
    assert result.status == "completed" and result.structured_output == {"modules": ["api"]}, result.error
    assert len(requests) == 2 and all(r["tool_choice"] == "auto" and "response_format" not in r for r in requests)
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in requests[0]["tools"]}
    assert offered["submit_result"] == MODULES
    refused = requests[1]["messages"][-1]
    if written is None:  # the refusal goes back as the call's result
        assert refused["role"] == "tool" and "modules: 'api' is not of type 'array'" in refused["content"]
    else:  # a call written as text with arguments its schema refuses is no call: the model is told to make one
        assert (refused["role"], refused["content"]) == ("user", CALL_SUBMIT)


def test_jsonschema_is_imported_only_when_a_schema_is_checked() -> None:
    # ~70 ms of start-up: loading the agent, the specialists and the teams (a team without schemas) pays none
    code = (
        "import sys\nfrom zero.cli import main\n"
        "main(['swarm', 'validate', 'manifests/teams/repo-review.toml'])\n"
        "print('jsonschema' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.splitlines()[-1] == "False", done.stdout
