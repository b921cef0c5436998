"""The schema of a planned team is the team file's own (its keys, limits and names), with the run's specialists
as the only ones a member may take; a result valid by it becomes a team file that loads as it was planned."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from zero.orchestrator.planning import PLANNED, team_schema, team_text
from zero.orchestrator.team import MemberBudget, MemberSpec, Scheduler, TeamBudget, TeamFile, load_team
from zero.strictfile import NAME_PATTERN

MODELS: dict[str, type[BaseModel]] = {"TeamFile": TeamFile, "TeamBudget": TeamBudget, "Scheduler": Scheduler}
MODELS |= {"MemberSpec": MemberSpec, "MemberBudget": MemberBudget}

FULL: dict[str, Any] = {
    "name": "fix-login",
    "budget": {"tokens": 500_000, "cost_usd": 2.5, "turns": 80, "wall_seconds": 900},
    "scheduler": {"on_failure": "stop", "max_concurrency": 2},
    "members": [
        {"prompt": "Find where logins fail.", "specialist": "explorer", "name": "finder", "max_turns": 20},
        {
            "name": "fixer",
            "specialist": "worker",
            "depends_on": ["finder"],
            "prompt": 'Fix it:\n{{ finder.output }}\nKeep """quotes""".',
            "permission_mode": "auto",
            "budget": {"turns": 30, "tokens": 200_000},
            "owns": ["src/auth/**"],
        },
    ],
}


def errors(value: Any) -> list[str]:
    schema = team_schema(["explorer", "worker"], max_turns=50, max_concurrency=4)
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(value)]


def test_every_planned_key_is_a_key_of_the_team_file() -> None:
    for table, keys in PLANNED.items():
        assert set(keys) <= set(MODELS[table].model_fields), table


def test_the_schema_holds_the_team_files_own_limits() -> None:
    schema = team_schema(["explorer", "worker"], max_turns=20_000, max_concurrency=4)
    jsonschema.Draft202012Validator.check_schema(schema)
    member = schema["properties"]["members"]["items"]
    assert member["properties"]["name"]["pattern"] == NAME_PATTERN
    assert member["properties"]["max_turns"] == {"maximum": 10_000, "minimum": 1, "type": "integer"}  # (not 20,000)
    limited = team_schema(["worker"], max_turns=5, max_concurrency=4)["properties"]["members"]["items"]
    assert limited["properties"]["max_turns"]["description"] == "at most 5: the user's limit"
    assert member["properties"]["specialist"]["enum"] == ["explorer", "worker"]
    assert member["required"] == ["name", "specialist", "prompt"] and member["additionalProperties"] is False
    assert list(schema["properties"]) == ["name", "budget", "scheduler", "members"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "Fix Login"}, f"'Fix Login' does not match '{NAME_PATTERN}'"),
        ({"name": "../../.bashrc"}, "'../../.bashrc' does not match"),  # (the name is the default file's)
        ({"budget": {"tokens": None}}, "None is not of type 'integer'"),
        ({"budget": {"tokens": 0}}, "0 is less than the minimum of 1"),
        ({"scheduler": {"executor": "ray"}}, "Additional properties are not allowed ('executor' was unexpected)"),
        ({"goal": "mine"}, "Additional properties are not allowed ('goal' was unexpected)"),
        ({"members": []}, "[] should be non-empty"),
        ({"members": [{"name": "a", "specialist": "wizard", "prompt": "x"}]}, "'wizard' is not one of"),
        ({"members": [{"name": "a", "specialist": "worker", "prompt": ""}]}, "'' should be non-empty"),
        # a model's plan never raises the user's limits (their max_turns 50, max_concurrency 4 here)
        (
            {"members": [{"name": "a", "specialist": "worker", "prompt": "x", "max_turns": 10_000}]},
            "10000 is greater than the maximum of 50",
        ),  # fmt: skip
        ({"scheduler": {"max_concurrency": 1_000_000}}, "1000000 is greater than the maximum of 4"),
    ],
)
def test_the_schema_refuses_what_the_team_file_refuses(change: dict[str, Any], message: str) -> None:
    found = errors({**FULL, **change})
    assert len(found) == 1 and found[0].startswith(message), found


def test_a_planned_team_becomes_a_team_file_as_planned(tmp_path: Path) -> None:
    assert errors(FULL) == []
    text = team_text(FULL, "Logins fail on Mondays.", "Planned for you.\nEdit it.")
    assert text.startswith('# Planned for you.\n# Edit it.\nname = "fix-login"\ngoal = "Logins fail on Mondays."\n')
    path = tmp_path / "team.toml"
    path.write_text(text)
    team, _, problems = load_team(path)
    assert problems == [] and team.goal == "Logins fail on Mondays."
    assert team.model_dump(exclude_defaults=True) == {**FULL, "goal": "Logins fail on Mondays."}
    assert list(tomllib.loads(text)["members"][0]) == ["name", "specialist", "prompt", "max_turns"]  # PLANNED order
