"""The team file (DESIGN.md section 3): a strict model, and every problem found before any model call."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from zero.errors import ConfigError, did_you_mean
from zero.specialists.manifest import NAME_PATTERN
from zero.tools import PermissionMode

__all__ = ["MemberSpec", "TeamBudget", "TeamError", "TeamFile", "TeamProblem", "load_team", "template_refs"]

TEMPLATE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TeamBudget(_Strict):
    """Limits shared by every member and every sub-task they start."""

    tokens: int | None = Field(None, ge=1)
    cost_usd: float | None = Field(None, gt=0)
    turns: int | None = Field(None, ge=1)
    wall_seconds: float | None = Field(None, gt=0)


class MemberBudget(_Strict):
    """A member's grant, carved out of the team's budget."""

    tokens: int | None = Field(None, ge=1)
    cost_usd: float | None = Field(None, gt=0)
    turns: int | None = Field(None, ge=1)


class Defaults(_Strict):
    model: str | None = None
    provider: str | None = None
    permission_mode: PermissionMode | None = None
    max_turns: int | None = Field(None, ge=1)
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None


class Scheduler(_Strict):
    max_concurrency: int = Field(4, ge=1)
    on_failure: Literal["continue", "stop"] = "continue"
    retries: int = Field(1, ge=0, le=10)


class MemberSpec(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    specialist: str
    prompt: str = Field(min_length=1)
    depends_on: list[str] = Field(default_factory=list)
    model: str | None = None
    provider: str | None = None
    permission_mode: PermissionMode | None = None
    max_turns: int | None = Field(None, ge=1)
    budget: MemberBudget | None = None


class TeamFile(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    goal: str = ""
    defaults: Defaults = Field(default_factory=Defaults)
    budget: TeamBudget = Field(default_factory=TeamBudget)
    scheduler: Scheduler = Field(default_factory=Scheduler)
    members: list[MemberSpec] = Field(min_length=1)


@dataclass(frozen=True)
class TeamProblem:
    """One thing wrong with a team file: where (file, line, member, key) and what."""

    path: str
    message: str
    line: int | None = None
    member: str | None = None
    key: str | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        who = f" member {self.member!r}:" if self.member else ""
        return f"{where}:{who} {self.message}"


class TeamError(ConfigError):
    """A team file with problems; ``problems`` lists every one of them."""

    def __init__(self, problems: list[TeamProblem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


_FIELDS: dict[str, list[str]] = {
    "": list(TeamFile.model_fields),
    "defaults": list(Defaults.model_fields),
    "budget": list(TeamBudget.model_fields),
    "scheduler": list(Scheduler.model_fields),
    "members": list(MemberSpec.model_fields),
    "members.budget": list(MemberBudget.model_fields),
}


def member_line(text: str, name: str) -> int | None:
    match = re.search(rf'^\s*name\s*=\s*["\']{re.escape(name)}["\']', text, re.MULTILINE)
    return text.count("\n", 0, match.start()) + 1 if match else None


def key_line(text: str, key: str, after: int = 0) -> int | None:
    lines = text.splitlines()
    for number in range(after, len(lines)):
        if re.match(rf"^\s*{re.escape(key)}\s*=", lines[number]):
            return number + 1
    return None


def load_team(path: Path) -> tuple[TeamFile, str, list[TeamProblem]]:
    """Parse the file. Unknown keys are reported and set aside, so the rest can still be checked;
    any other shape error raises ``TeamError`` listing every problem found."""
    try:
        text = path.read_text("utf-8")
    except OSError as e:
        raise TeamError([TeamProblem(str(path), f"cannot read: {e.strerror}")]) from e
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        found = re.search(r"line (\d+)", str(e))
        raise TeamError([TeamProblem(str(path), f"not valid TOML: {e}", int(found.group(1)) if found else None)]) from e
    try:
        return TeamFile.model_validate(data), text, []
    except ValidationError as e:
        problems = [_problem(path, text, data, err) for err in e.errors()]
        unknown = [err["loc"] for err in e.errors() if err["type"] == "extra_forbidden"]
        if len(unknown) < len(problems):
            raise TeamError(problems) from e
    for loc in unknown:  # drop the unknown keys and look at the rest
        node: Any = data
        for part in loc[:-1]:
            node = node[part]
        node.pop(loc[-1], None)
    try:
        return TeamFile.model_validate(data), text, problems
    except ValidationError as e:
        raise TeamError(problems + [_problem(path, text, data, err) for err in e.errors()]) from e


def _problem(path: Path, text: str, data: dict[str, Any], err: Any) -> TeamProblem:
    loc = list(err["loc"])
    member = None
    after = 0
    if loc and loc[0] == "members" and len(loc) > 1 and isinstance(loc[1], int):
        raw = data.get("members", [])[loc[1]]
        member = raw.get("name") if isinstance(raw, dict) else None
        after = (member_line(text, member) or 1) - 1 if member else 0
    names = [str(p) for p in loc if not isinstance(p, int)]
    key = ".".join(names)
    line = key_line(text, names[-1], after) if names else None
    if err["type"] == "extra_forbidden":
        section = ".".join(names[:-1])
        hint = did_you_mean(names[-1], _FIELDS.get(section, []))
        return TeamProblem(str(path), f"unknown key {key!r}{hint}", line, member, key)
    if err["type"] == "string_pattern_mismatch":
        return TeamProblem(
            str(path),
            f"{key} {err['input']!r} is not a valid name: use lowercase letters, digits "
            "and dashes, starting with a letter",
            line,
            member,
            key,
        )
    return TeamProblem(str(path), f"{key}: {err['msg']}", line, member, key)


def template_refs(prompt: str) -> tuple[list[str], list[str]]:
    """The members a prompt's ``{{ x.output }}`` names, and any placeholders it cannot fill."""
    refs, bad = [], []
    for expr in TEMPLATE.findall(prompt):
        if expr == "goal":
            continue
        match = re.fullmatch(r"([a-z][a-z0-9-]*)\.output", expr)
        if match:
            refs.append(match.group(1))
        else:
            bad.append(expr)
    return refs, bad
