"""The team file (docs/TEAMS.md): a strict model, and every problem found before any model call."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from zero.errors import ConfigError
from zero.strictfile import NAME_PATTERN, FileError, KeyLines, Problem, read_data, validate_model
from zero.tools import PermissionMode
from zero.tools.clones import repository_problem

__all__ = [
    "NO_LIMIT",
    "OUTPUT_REF",
    "Isolation",
    "Land",
    "MemberSpec",
    "TeamBudget",
    "TeamError",
    "TeamFile",
    "TeamProblem",
    "load_team",
    "member_subject",
    "placeholders",
    "template_refs",
    "with_limits",
]

Isolation = Literal["worktree", "none"]
"""Where a member works: a git worktree of its own (``worktree``), or the workspace itself (``none``)."""

Resources = dict[str, Annotated[float, Field(gt=0)]]
"""What a member's node must have under ``--executor ray`` (``{ repo_web = 1 }``): Ray's custom resources."""

TEMPLATE = re.compile(r"\{\{([^{}]*)\}\}")
"""A ``{{ ... }}`` placeholder; its expression is the group, stripped (``placeholders``). No spaces matched around
a lazy group: that form backtracked in cubic time on ``{{`` and spaces (4,000 took 91 s, the interpreter held)."""


def placeholders(text: str) -> list[str]:
    """The expressions of ``text``'s placeholders, stripped, in order."""
    return [expr.strip() for expr in TEMPLATE.findall(text)]


TeamProblem = Problem


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class TeamBudget(_Strict):
    """Limits shared by every member and every sub-task they start."""

    tokens: int | None = Field(None, ge=1)
    cost_usd: float | None = Field(None, gt=0)
    turns: int | None = Field(None, ge=1)
    retries: int | None = Field(None, ge=0, description="Retries of model calls, all agents together.")
    wall_seconds: float | None = Field(None, gt=0)


NO_LIMIT = "none"  # a limit given as this lifts the team file's (cli/arguments.py keeps a copy)


def with_limits(budget: TeamBudget, **limits: float | str | None) -> TeamBudget:
    """``budget`` with each limit given set to its number, or lifted by ``"none"``; None leaves one as the
    team file has it. A value a budget cannot hold is a ``ConfigError`` that says which and why."""
    update = {key: None if value == NO_LIMIT else value for key, value in limits.items() if value is not None}
    try:
        return TeamBudget.model_validate({**budget.model_dump(), **update})
    except ValidationError as e:
        first = e.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        why = first["msg"].lower()
        raise ConfigError(f'budget limit {key} = {first["input"]!r}: {why} (or "none": no limit)') from None


class MemberBudget(_Strict):
    """A member's grant, carved out of the team's budget."""

    tokens: int | None = Field(None, ge=1)
    cost_usd: float | None = Field(None, gt=0)
    turns: int | None = Field(None, ge=1)


class Defaults(_Strict):
    model: str | None = None
    provider: str | None = None
    permission_mode: PermissionMode | None = None
    max_turns: int | None = Field(None, ge=1, le=10_000)
    max_output_tokens: int | None = Field(None, ge=1, le=10_000_000)
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    isolation: Isolation | None = None
    output_schema: Any = None  # a JSON Schema (a table), the path of one, or "json": read_schema checks it
    output_retries: int | None = Field(None, ge=0, le=10)
    resources: Resources | None = None  # under --executor ray: what a node must have to run a member
    node_labels: dict[str, str] | None = None  # under --executor ray: the labels its node must carry


class Land(_Strict):
    """How isolated members' branches come back (docs/TEAMS.md, "Isolation and landing")."""

    mode: Literal["end", "eager"] = "end"
    check: str | None = Field(None, min_length=1)
    timeout_seconds: float = Field(600, gt=0, le=1800)
    into: Literal["branch", "current"] = "branch"


class Scheduler(_Strict):
    max_concurrency: int = Field(4, ge=1)
    on_failure: Literal["continue", "stop"] = "continue"
    retries: int = Field(1, ge=0, le=10)
    executor: Literal["local", "ray"] = "local"  # where members run: this process, or a Ray cluster
    node_retries: int = Field(1, ge=0, le=10)  # under ray: how often a member whose node died is resumed elsewhere


class MemberSpec(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    specialist: str
    prompt: str = Field(min_length=1)
    depends_on: list[str] = Field(default_factory=list)
    model: str | None = None
    provider: str | None = None
    permission_mode: PermissionMode | None = None
    max_turns: int | None = Field(None, ge=1, le=10_000)
    max_output_tokens: int | None = Field(None, ge=1, le=10_000_000)
    budget: MemberBudget | None = None
    isolation: Isolation | None = None
    owns: list[str] | None = None  # the files it may write (globs, zero.tools.Owns); None: any in the workspace
    output_schema: Any = None  # a JSON Schema (a table), the path of one, or "json": read_schema checks it
    output_retries: int | None = Field(None, ge=0, le=10)
    resources: Resources | None = None  # replaces [defaults]' (under --executor ray)
    node_labels: dict[str, str] | None = None


class WorkspaceSection(_Strict):
    """Where the isolated members' worktrees come from on the nodes of a Ray cluster (docs/TEAMS.md)."""

    repo: str | None = Field(None, min_length=1)  # a URL or absolute path every node can read

    @field_validator("repo")
    @classmethod
    def _readable(cls, repo: str | None) -> str | None:
        if repo is not None and (why := repository_problem(repo)) is not None:
            raise ValueError(f'{why} (e.g. repo = "https://github.com/you/project.git" or "/srv/git/project.git")')
        return repo


class TeamFile(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    goal: str = ""
    defaults: Defaults = Field(default_factory=Defaults)
    budget: TeamBudget = Field(default_factory=TeamBudget)
    scheduler: Scheduler = Field(default_factory=Scheduler)
    land: Land = Field(default_factory=Land)
    workspace: WorkspaceSection = Field(default_factory=WorkspaceSection)
    members: list[MemberSpec] = Field(min_length=1)


class TeamError(FileError):
    """A team file with problems; ``problems`` lists every one of them."""


def member_subject(loc: tuple[str | int, ...], data: dict[str, Any]) -> tuple[str | None, tuple[str | int, ...]]:
    """A problem inside ``[[members]]`` is about that member: ``member 'b'``, key ``members.prompt``."""
    if len(loc) > 1 and loc[0] == "members" and isinstance(loc[1], int):
        members = data.get("members")
        raw = members[loc[1]] if isinstance(members, list) and loc[1] < len(members) else None
        name = raw.get("name") if isinstance(raw, dict) else None
        shown = ("members", *loc[2:])
        return (f"member {name!r}" if isinstance(name, str) else f"members[{loc[1]}]"), shown
    return None, loc


def load_team(path: Path) -> tuple[TeamFile, KeyLines, list[Problem]]:
    """Parse the file. Unknown keys are reported and set aside, so the rest can still be checked;
    any other shape error raises ``TeamError`` listing every problem found."""
    try:
        data, text = read_data(path)
    except FileError as e:
        raise TeamError(e.problems) from None
    team, problems = validate_model(TeamFile, data, path, text, subject=member_subject, drop_unknown=True)
    if team is None:
        raise TeamError(problems)
    return team, KeyLines(text), problems


OUTPUT_REF = re.compile(r"([a-z][a-z0-9-]*)\.output((?:\.[A-Za-z0-9_-]+)*)")
"""``member.output``, or a field of its typed result: ``member.output.modules``, ``member.output.items.0``."""


def template_refs(prompt: str) -> tuple[list[tuple[str, tuple[str, ...]]], list[str]]:
    """What a prompt's ``{{ x.output }}`` placeholders name (the member, and the path into its result), and any
    placeholders it cannot fill."""
    refs, bad = [], []
    for expr in placeholders(prompt):
        if expr == "goal":
            continue
        match = OUTPUT_REF.fullmatch(expr)
        if match:
            refs.append((match.group(1), tuple(match.group(2).split(".")[1:])))
        else:
            bad.append(expr)
    return refs, bad
