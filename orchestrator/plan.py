"""A team file checked against the specialists and turned into a dependency graph and waves."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from zero.agent import PriceTable, smallest_cap
from zero.agent.output_schema import OutputSchema, dump_result, field_problem, pick, read_schema
from zero.errors import ConfigError, did_you_mean
from zero.orchestrator.team import (
    OUTPUT_REF,
    TEMPLATE,
    Isolation,
    MemberSpec,
    TeamBudget,
    TeamError,
    TeamFile,
    TeamProblem,
    load_team,
    template_refs,
)
from zero.specialists import Specialist, SpecialistRegistry
from zero.specialists.registry import user_config_dir
from zero.strictfile import KeyLines
from zero.tools import CATEGORIES, Owns, PermissionMode, within
from zero.tools.git import GitError
from zero.tools.snapshot import repository_of
from zero.tools.worktrees import unfit_for_a_worktree

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "WRITING_TOOLS",
    "MemberPlan",
    "Overlap",
    "TeamPlan",
    "build_plan",
    "member_prompt",
    "member_role",
    "placeholder",
    "render_prompt",
    "typed_result",
]

WRITING_TOOLS = frozenset(CATEGORIES["edit"] + CATEGORIES["execute"]) - frozenset(CATEGORIES["read-only"])
"""The tools that change files: a member with one of them works in a worktree by default, in a git repository."""
TEAMMATES_NAMED = 20  # in a member's prompt; the rest are counted


@dataclass(frozen=True, kw_only=True)
class MemberPlan:
    spec: MemberSpec
    specialist: Specialist
    provider: str
    model: str
    permission_mode: PermissionMode  # what it runs with: what it asked for, narrowed to the run's ceiling
    max_turns: int
    wave: int
    max_output_tokens: int | None = None  # the team file's cap (member, else [defaults]); the smallest set wins
    narrowed: str | None = None  # why its mode is narrower than what the team file asked for
    isolation: Isolation = "none"  # where it works: its own git worktree, or the workspace itself
    owns: Owns | None = None  # the files it may write (None: any in the workspace)
    waits_for: tuple[str, ...] = ()  # members it never runs beside (their owns overlap), which go first
    output_schema: OutputSchema | None = None  # the result it ends with (member, else [defaults], else manifest)
    resources: Mapping[str, float] = field(default_factory=dict)  # what its node must have (--executor ray)
    node_labels: Mapping[str, str] = field(default_factory=dict)  # the labels its node must carry

    @property
    def isolated(self) -> bool:
        return self.isolation == "worktree"

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True, kw_only=True)
class Overlap:
    """Two members whose ``owns`` can own a file in common (``globs``: each such pair of theirs): they never
    run at the same time, ``first`` before ``then``, as their dependencies say (``by = "depends_on"``), else
    in the file's order."""

    first: str
    then: str
    globs: tuple[tuple[str, str], ...]
    by: Literal["depends_on", "file order"]

    def to_json(self) -> dict[str, object]:
        return {"first": self.first, "then": self.then, "globs": [list(g) for g in self.globs], "by": self.by}


@dataclass(frozen=True, kw_only=True)
class TeamPlan:
    team: TeamFile
    path: Path
    members: dict[str, MemberPlan]  # in file order
    waves: list[list[str]]
    budget: TeamBudget
    max_concurrency: int
    overlaps: tuple[Overlap, ...] = ()

    @property
    def name(self) -> str:
        return self.team.name

    def recorded_spec(self) -> dict[str, Any]:
        """The team file as a run records it: a schema given by a file's path is put in as read (a replay or a
        resume, elsewhere and later, has what the file held, not a path relative to where it was)."""
        spec = self.team.model_dump(mode="json", exclude_defaults=True)
        for table in (spec.get("defaults", {}), *spec.get("members", [])):
            value = table.get("output_schema")
            if isinstance(value, str) and value != "json":
                table["output_schema"] = read_schema(value, self.path.parent)
        return spec


def build_plan(
    path: Path,
    registry: SpecialistRegistry,
    *,
    provider: str,
    model: str,
    permission_mode: PermissionMode,
    prices: PriceTable,
    budget: TeamBudget | None = None,
    max_concurrency: int | None = None,
    goal: str | None = None,
    recorded: TeamFile | None = None,
    workspace: Path | None = None,
) -> TeamPlan:
    """Validate everything that can be checked without a model; raise ``TeamError`` listing every problem.

    ``provider`` and ``model`` are what members inherit (flags, the team's defaults, environment and
    config already applied); a member's or its manifest's own model wins over them. ``permission_mode``
    is the ceiling: a member (or ``[defaults]``) that asks for a wider mode gets this one. ``workspace``:
    where the team runs; in a git repository its writing members default to ``isolation = "worktree"``,
    and a member that asks for a worktree elsewhere is a problem naming the fix.
    """
    if recorded is not None:  # the team a run recorded, resumed (``path`` names where it came from)
        problems: list[TeamProblem] = []
        team, lines = recorded, KeyLines("")
    else:
        team, lines, problems = load_team(path)
    if goal is not None:
        team = team.model_copy(update={"goal": goal})
    where = str(path)

    def problem(index: int, key: str, message: str) -> None:
        member = team.members[index].name
        line = lines.line_of(("members", index, *key.split(".")))
        problems.append(
            TeamProblem(path=where, message=message, line=line, key=f"members.{key}", subject=f"member {member!r}")
        )

    import networkx as nx  # here: it costs ~50 ms of start-up that commands not planning a team need not pay

    graph: nx.DiGraph[str] = nx.DiGraph()
    seen: set[str] = set()
    for i, m in enumerate(team.members):
        if m.name in seen:
            problem(i, "name", "is declared twice; member names must be unique")
        seen.add(m.name)
        graph.add_node(m.name)
    names = [m.name for m in team.members]
    position: dict[str, int] = {}  # each name's first index (names.index is a walk: N of them took seconds)
    for i, name in enumerate(names):
        position.setdefault(name, i)
    for i, m in enumerate(team.members):
        for dep in sorted({d for d in m.depends_on if m.depends_on.count(d) > 1}):
            problem(i, "depends_on", f"depends_on names {dep!r} more than once: name each member it depends on once")
        for dep in m.depends_on:
            if dep not in seen:
                problem(i, "depends_on", f"depends on unknown member {dep!r}{did_you_mean(dep, names)}")
            else:
                graph.add_edge(dep, m.name)
        if m.specialist not in registry.specialists:
            hint = did_you_mean(m.specialist, registry.names())
            problem(
                i, "specialist", f"unknown specialist {m.specialist!r}{hint}; available: {', '.join(registry.names())}"
            )
        refs, bad = template_refs(m.prompt)
        for ref in dict.fromkeys(r for r, _ in refs):
            if ref == m.name:
                problem(i, "prompt", f"prompt uses {{{{ {ref}.output }}}}, its own output, which it has not made yet")
            elif ref not in m.depends_on:
                problem(
                    i,
                    "prompt",
                    f"prompt uses {{{{ {ref}.output }}}} but {ref!r} is not in its depends_on; "
                    f"add it there so {m.name!r} runs after it",
                )
        for expr in bad:
            problem(
                i,
                "prompt",
                f"prompt has an unknown placeholder {{{{ {expr} }}}}; use {{{{ goal }}}} or {{{{ <member>.output }}}}",
            )
        if m.owns is not None and not m.owns:
            problem(i, "owns", 'owns is empty, so it could write no file: list its globs ("src/api/**"), or drop owns')
        for glob in m.owns or []:
            try:
                Owns([glob])
            except ValueError as e:
                problem(i, "owns", str(e))
    for found in nx.simple_cycles(graph):
        first = min(range(len(found)), key=lambda i: position[found[i]])
        cycle = found[first:] + found[:first]  # start at the member declared first
        path_text = " -> ".join([*cycle, cycle[0]])
        problem(position[cycle[0]], "name", f"dependency cycle: {path_text}")
    default_schema = None
    if team.defaults.output_schema is not None:
        try:
            default_schema = read_schema(team.defaults.output_schema, path.parent)
        except ValueError as e:
            line = lines.line_of(("defaults", "output_schema"))
            problems.append(
                TeamProblem(path=where, message=f"output_schema: {e}", line=line, key="defaults.output_schema")
            )
    schemas: dict[str, dict[str, Any] | None] = {}
    for i, m in enumerate(team.members):
        try:
            schemas[m.name] = None if m.output_schema is None else read_schema(m.output_schema, path.parent)
        except ValueError as e:
            problem(i, "output_schema", f"output_schema: {e}")
    limits = budget or team.budget
    members: dict[str, MemberPlan] = {}
    if not problems:
        git_ok = _in_git(workspace) is None
        waves = [sorted(w, key=position.__getitem__) for w in nx.topological_generations(graph)]
        wave_of = {n: i for i, wave in enumerate(waves) for n in wave}
        for m in team.members:
            spec = registry.specialists[m.specialist]
            member_model = m.model or spec.model or model
            # The team file may narrow the run's permission mode, never widen it.
            asked = m.permission_mode or team.defaults.permission_mode
            mode, narrowed = within(permission_mode, asked, f"member {m.name!r}")
            isolation, why_not = _isolation(m, team, spec, workspace, git_ok)
            if why_not is not None:
                problem(position[m.name], "isolation", why_not)
            elif isolation == "worktree" and (unfit := unfit_for_a_worktree(m.name)) is not None:
                problem(position[m.name], "name", f'{unfit}, or set isolation = "none" for it')
            plan = MemberPlan(
                spec=m,
                isolation=isolation,
                specialist=spec,
                provider=m.provider or spec.provider or provider,
                model=member_model,
                permission_mode=mode,
                max_turns=m.max_turns or team.defaults.max_turns or spec.max_turns or 30,
                wave=wave_of[m.name],
                max_output_tokens=smallest_cap(m.max_output_tokens, team.defaults.max_output_tokens),
                narrowed=narrowed,
                owns=Owns(m.owns) if m.owns else None,
                output_schema=_output_schema(m, team, spec, schemas[m.name], default_schema),
                resources=dict(m.resources if m.resources is not None else team.defaults.resources or {}),
                node_labels=dict(m.node_labels if m.node_labels is not None else team.defaults.node_labels or {}),
            )
            members[m.name] = plan
            index = position[m.name]
            if limits.cost_usd is not None and prices.price(member_model) is None:
                problem(
                    index,
                    "name",
                    f"the team has a cost budget but model {member_model!r} has no known price, so its cost "
                    f'cannot be held to it: add [prices."{member_model}"] input = ..., output = ... (US dollars '
                    f"per million tokens; 0 for a local model) to {user_config_dir() / 'config.toml'}, or lift the "
                    "limit with --budget-cost none",
                )
            grant = m.budget
            for key in ("tokens", "cost_usd", "turns"):
                mine = getattr(grant, key) if grant else None
                team_limit = getattr(limits, key)
                if mine is not None and team_limit is not None and mine > team_limit:
                    problem(index, f"budget.{key}", f"budget.{key} = {mine} is more than the team's {team_limit}")
    for i, m in enumerate(team.members):
        for ref, keys in template_refs(m.prompt)[0] if members else ():
            if keys and (why := _no_field(members[ref], keys)) is not None:
                shown = ".".join((ref, "output", *keys))
                problem(i, "prompt", f"prompt uses {{{{ {shown} }}}}, but {why}")
    if problems:
        raise TeamError(problems)
    overlaps = _overlaps(members, graph)
    for name, plan in members.items():
        waits = tuple(o.first for o in overlaps if o.then == name and o.by == "file order")
        members[name] = replace(plan, waits_for=waits)
    return TeamPlan(
        team=team,
        path=path,
        members=members,
        waves=waves,
        budget=limits,
        max_concurrency=max_concurrency or team.scheduler.max_concurrency,
        overlaps=overlaps,
    )


def _output_schema(
    member: MemberSpec,
    team: TeamFile,
    spec: Specialist,
    own: dict[str, Any] | None,
    default: dict[str, Any] | None,
) -> OutputSchema | None:
    """The result ``member`` ends with: its own ``output_schema``, else ``[defaults]``', else its manifest's; its
    ``output_retries`` likewise."""
    schema = own if own is not None else default if default is not None else spec.output_schema
    return OutputSchema.of(schema, member.output_retries, team.defaults.output_retries, spec.output_retries)


def _no_field(member: MemberPlan, keys: tuple[str, ...]) -> str | None:
    """Why a placeholder cannot reach ``keys`` in ``member``'s result, where that can be known before it runs."""
    if member.output_schema is None:
        return (
            f"{member.name!r} has no output_schema: its output is text, with no fields (give it an output_schema, "
            f"or use {{{{ {member.name}.output }}}})"
        )
    why = field_problem(member.output_schema.schema, keys)
    return None if why is None else f"{member.name}'s result cannot have it: {why}"


def _in_git(workspace: Path | None, who: str = "") -> str | None:
    """Why ``workspace`` cannot hold the worktree ``who`` asks for (None: it is in a git working tree)."""
    if workspace is None:
        return "the team's workspace is not known, so it cannot have a git worktree"
    try:
        repository_of(workspace, who=who)
    except (ConfigError, GitError) as e:  # not a repository, or no git installed: the message names the fix
        return str(e)
    return None


def _isolation(
    member: MemberSpec, team: TeamFile, spec: Specialist, workspace: Path | None, git_ok: bool
) -> tuple[Isolation, str | None]:
    """Where ``member`` works, and why it cannot (None: it can). Asked for by the member, else ``[defaults]``,
    else its specialist's manifest; by default a worktree for a member whose tools write, in a git repository
    (``git_ok``: the workspace is in one)."""
    asked = member.isolation or team.defaults.isolation or spec.isolation
    if asked == "none":
        return "none", None
    if asked is None:
        return ("worktree" if git_ok and WRITING_TOOLS & set(spec.tools) else "none"), None
    return "worktree", None if git_ok else _in_git(workspace, f"member {member.name!r}")


def _overlaps(members: dict[str, MemberPlan], graph: nx.DiGraph[str]) -> tuple[Overlap, ...]:
    """Each pair of members whose owns overlap, in the order they run: the order of a topological sort that
    takes members in the file's order where their dependencies leave a choice, so the waits it adds (a member
    after an earlier one whose owns overlap its own) never close a cycle with ``depends_on``."""
    import networkx as nx

    position = {name: i for i, name in enumerate(members)}
    order = list(nx.lexicographical_topological_sort(graph, key=position.__getitem__))
    owning = [name for name in order if members[name].owns is not None]  # (only they can overlap: N^2 pairs else)
    found = []
    for i, first in enumerate(owning):
        for then in owning[i + 1 :]:
            a, b = members[first].owns, members[then].owns
            if a is None or b is None or not (globs := a.overlaps(b)):
                continue
            by: Literal["depends_on", "file order"] = "depends_on" if nx.has_path(graph, first, then) else "file order"
            found.append(Overlap(first=first, then=then, globs=tuple(globs), by=by))
    return tuple(found)


def render_prompt(prompt: str, goal: str, output: Callable[[str, tuple[str, ...]], str]) -> str:
    """Fill ``{{ goal }}`` and ``{{ member.output }}`` / ``{{ member.output.field }}`` (``output(member, keys)``,
    which raises ``LookupError`` for a field the member's result does not have)."""

    def fill(match: re.Match[str]) -> str:
        expr = match.group(1).strip()
        if expr == "goal":
            return goal
        ref = OUTPUT_REF.fullmatch(expr)
        assert ref is not None  # the plan let no other placeholder through
        return output(ref.group(1), tuple(ref.group(2).split(".")[1:]))

    return TEMPLATE.sub(fill, prompt)


def member_role(team: TeamPlan, plan: MemberPlan) -> str:
    """A member's part of its system prompt: who it is, its teammates, how its report (or typed result) is used."""
    report = (
        "Your final message is your report: members that depend on you receive it as their input, so lead "
        "with the result, then the evidence."
        if plan.output_schema is None
        else "You end by submitting your result with submit_result: members that depend on you receive it as JSON."
    )
    return (
        f'You are "{plan.name}", a member of the team "{team.name}", working as the {plan.specialist.name} '
        f"specialist. The other members are: {_teammates(team, plan)}; use send_message and read_inbox "
        f"to coordinate with them when it helps. Do your own task only. {report}"
    )


def _teammates(team: TeamPlan, plan: MemberPlan) -> str:
    """The other members, as a member's prompt names them: those it depends on, then the others in team
    order, up to ``TEAMMATES_NAMED`` (naming each of a thousand teammates would cost every call of every
    member some 5,000 tokens)."""
    deps = plan.spec.depends_on
    rest = (n for n in team.members if n != plan.name and n not in deps)
    named = [*deps, *itertools.islice(rest, max(0, TEAMMATES_NAMED - len(deps)))]
    unnamed = len(team.members) - 1 - len(named)
    return (", ".join(named) or "none") + (f", and {unnamed} more" if unnamed else "")


def member_prompt(team: TeamPlan, plan: MemberPlan, output: Callable[[str, tuple[str, ...]], str]) -> str:
    """The first message a member gets: the team's goal and its own prompt, placeholders filled
    (``output(member, keys)``: what that member reported, as ``render_prompt`` asks)."""
    goal = team.team.goal
    task = render_prompt(plan.spec.prompt, goal, output)
    return f"Team goal:\n{goal.strip()}\n\nYour task:\n{task}" if goal else task


def typed_result(plan: MemberPlan, output: str) -> Any:
    """A member's typed result from the ``output`` it completed with (the result's JSON text), or None: it has
    no ``output_schema``, or the output is not JSON (a run recorded before its team gave it a schema)."""
    if plan.output_schema is None:
        return None
    try:
        return json.loads(output)
    except ValueError:
        return None


def placeholder(name: str, output: str, result: Any, keys: tuple[str, ...]) -> str:
    """What ``{{ name.output }}`` (``keys``: ``{{ name.output.a.b }}``) stands for, from the member's ``output``
    and typed ``result``; a ``LookupError`` naming the placeholder when the result has nothing there."""
    if not keys:
        return output
    try:
        value = pick(result, keys)
    except LookupError as e:
        raise LookupError(f"{{{{ {'.'.join((name, 'output', *keys))} }}}}: {name}'s result: {e}") from None
    return value if isinstance(value, str) else dump_result(value)
