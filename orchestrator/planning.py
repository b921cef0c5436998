"""A team planned from a goal (``zero swarm plan``): the JSON Schema of the team a planner submits, drawn from
the team file's own models, what the planner is asked and told back, and the team file its result becomes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tomli_w

from zero.orchestrator.team import TeamFile, TeamProblem
from zero.specialists import SpecialistRegistry

__all__ = ["PLANNED", "feedback", "plan_prompt", "team_schema", "team_text"]

PLANNED: dict[str, tuple[str, ...]] = {
    "TeamFile": ("name", "budget", "scheduler", "members"),
    "TeamBudget": ("tokens", "cost_usd", "turns", "wall_seconds"),
    "Scheduler": ("max_concurrency", "on_failure"),
    "MemberSpec": ("name", "specialist", "depends_on", "prompt", "permission_mode", "max_turns", "budget", "owns"),
    "MemberBudget": ("tokens", "cost_usd", "turns"),
}
"""The tables of a team file a plan may set, and their keys in the order the file lists them (the goal is the
user's; models, providers, isolation and landing are left to ``[defaults]`` and the user's edits)."""

_SAID = {
    ("TeamFile", "name"): "the team's name (also the file's, by default)",
    ("TeamFile", "budget"): "limits shared by every member and every sub-task they start",
    ("MemberSpec", "name"): "the member's name, unique in the team",
    ("MemberSpec", "depends_on"): "the members that must complete before this one starts",
    ("MemberSpec", "prompt"): (
        "the member's complete, self-contained task; {{ goal }} is the team's goal and {{ <member>.output }} the "
        "report of a member named in depends_on"
    ),
    ("MemberSpec", "permission_mode"): "narrows what its tools may do without approval (default: the run's)",
    ("MemberSpec", "budget"): "its grant, carved out of the team's budget",
    ("MemberSpec", "owns"): "globs of the only files its file tools may write (default: any in the workspace)",
}


def team_schema(specialists: Sequence[str], *, max_turns: int, max_concurrency: int) -> dict[str, Any]:
    """The JSON Schema of a planned team: the ``PLANNED`` keys of the team file's models with their own
    limits (an optional key is one the result may leave out, never ``null``), a member's specialist one of
    ``specialists``. A model's plan never raises the user's limits: a member's ``max_turns`` is at most
    ``max_turns`` and the team's ``max_concurrency`` at most ``max_concurrency`` (the run's own)."""
    models = TeamFile.model_json_schema(ref_template="{model}")
    tables = models.pop("$defs")
    schema = _plain(models, "TeamFile", tables)
    member = schema["properties"]["members"]["items"]["properties"]
    member["specialist"] = {"enum": list(specialists), "description": "the specialist the member runs as"}
    _at_most(member["max_turns"], max_turns)
    _at_most(schema["properties"]["scheduler"]["properties"]["max_concurrency"], max_concurrency)
    return schema


def _at_most(prop: dict[str, Any], most: int) -> None:
    if most < prop.get("maximum", most + 1):
        prop["maximum"] = most
        prop["description"] = f"at most {most}: the user's limit"


def _plain(node: dict[str, Any], table: str | None, tables: dict[str, Any]) -> dict[str, Any]:
    """``node`` of pydantic's schema as a planner is given it: references inlined, ``X or null`` as ``X``,
    titles and defaults dropped; a table's keys narrowed to ``PLANNED``, with what ``_SAID`` says of each."""
    if "$ref" in node:
        return _plain(tables[node["$ref"]], node["$ref"], tables)
    kept = [choice for choice in node.get("anyOf", ()) if choice != {"type": "null"}]
    if len(kept) == 1:
        return _plain(kept[0], None, tables)
    plain = {key: value for key, value in node.items() if key not in ("title", "default", "description")}
    if "items" in plain:
        plain["items"] = _plain(plain["items"], None, tables)
    if table is not None:
        keys = PLANNED[table]
        plain["properties"] = {key: _plain(node["properties"][key], None, tables) for key in keys}
        for key in keys:
            if (table, key) in _SAID:
                plain["properties"][key]["description"] = _SAID[table, key]
        required = [key for key in node.get("required", ()) if key in keys]
        plain.pop("required", None)
        if required:
            plain["required"] = required
    return plain


def team_text(result: dict[str, Any], goal: str, note: str) -> str:
    """The team file of a planner's ``result`` (valid by ``team_schema``): its keys in ``PLANNED`` order, the
    user's ``goal`` after the name, and ``note`` as a comment above."""
    team = _ordered(result, "TeamFile")
    team = {"name": team.pop("name"), "goal": goal, **team}
    comment = "".join(f"# {line}\n" for line in note.splitlines())
    return comment + tomli_w.dumps(team, multiline_strings=True)


_INNER = {
    ("TeamFile", "budget"): "TeamBudget",
    ("TeamFile", "scheduler"): "Scheduler",
    ("TeamFile", "members"): "MemberSpec",
    ("MemberSpec", "budget"): "MemberBudget",
}


def _ordered(value: Any, table: str) -> Any:
    """``value``, a ``table`` of a planned team (or a list of them), with its keys in ``PLANNED`` order."""
    if isinstance(value, list):
        return [_ordered(item, table) for item in value]
    return {
        key: _ordered(value[key], _INNER[table, key]) if (table, key) in _INNER else value[key]
        for key in PLANNED[table]
        if key in value
    }


def plan_prompt(goal: str, registry: SpecialistRegistry) -> str:
    """What the planner is asked: a team for ``goal`` of the specialists in ``registry``."""
    specialists = "\n".join(
        f"- {s.name}: {s.description} (tools: {', '.join(s.tools) or 'none'})" for s in registry.specialists.values()
    )
    return (
        f"Plan a team of Zero specialists for this goal:\n\n{goal.strip()}\n\n"
        "Read enough of the workspace to ground the plan, then submit it as a team file for `zero swarm run`. "
        "Each member is one of the specialists below, working alone on its prompt: it does not see this "
        "conversation, only its prompt and the reports of the members it depends on. Members run as soon as "
        "every member in their depends_on has completed, several at once, so split the work where parts can "
        "go on in parallel, and keep the team as small as the goal allows. The specialists:\n"
        f"{specialists}"
    )


def feedback(problems: Sequence[TeamProblem]) -> str:
    """What the planner is told of a team that failed the checks of ``zero swarm validate``."""
    listed = "\n".join(f"- {p}" for p in problems)
    count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
    return (
        f"That team is not valid: zero swarm validate found {count}:\n{listed}\n"
        "Fix every one of them and submit the whole team again."
    )
