"""What a project's specialist may ask for: a repository's manifest may narrow, never raise.

A manifest in ``<workspace>/.zero/specialists/`` comes with a repository. Its turns, output cap,
timeout and budget are capped by what the user set (the built-in or user manifest of the same
name, the run's limits); its tools by what that manifest grants (a name only the project has:
``read-only`` and ``plan``); and a model or provider the user never configured is not used. Each
narrowing is a note naming the file and key. ``zero specialists trust NAME`` accepts the file's
tools, model and provider as they are, for as long as its text (and its project bases') is unchanged;
the spend limits stay capped even then: the user raises those in their own files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from zero.agent.pricing import DEFAULT_OUTPUT_CAP
from zero.specialists.manifest import KNOWN_TOOLS, Specialist
from zero.tools import expand_tools

__all__ = ["PROJECT_ONLY_TOOLS", "ProjectLimits", "narrow"]

PROJECT_ONLY_TOOLS = expand_tools(["read-only", "plan"], KNOWN_TOOLS)
"""The most an untrusted specialist that only the project names gets: it can read and plan, not act."""

N = TypeVar("N", int, float)
_EFFORT = ("none", "minimal", "low", "medium", "high", "xhigh")  # what a model's reasoning costs, least first


@dataclass(frozen=True, kw_only=True)
class ProjectLimits:
    """The user's side of a run: its limits, the models and providers the user configured (the registry adds
    those of the user's own manifests), and the project specialists the user trusts (name: fingerprint)."""

    max_turns: int = 50
    max_output_tokens: int = DEFAULT_OUTPUT_CAP
    models: frozenset[str] = frozenset()
    providers: frozenset[str] = frozenset()
    trusted: Mapping[str, str] = field(default_factory=dict)


def narrow(spec: Specialist, base: Specialist | None, limits: ProjectLimits) -> Specialist:
    """``spec`` (a project's) within what ``base`` (the user's or the built-in one of the same name, if any)
    and ``limits`` allow, with a note for each thing it asked beyond that."""
    notes: list[str] = []

    def cap(key: str, asked: N | None, mine: N | None, run: N | None = None) -> N | None:
        """The project's value, at most the user's; the user's where the project set none (a limit left out
        is not a limit lifted)."""
        ceiling = min((v for v in (mine, run) if v is not None), default=None)
        if asked is None:
            return mine
        if ceiling is None or asked <= ceiling:
            return asked
        notes.append(
            f"{spec.path}: '{key} = {_number(asked)}' lowered to {_number(ceiling)}: a project's specialist may "
            "lower your limits, not raise them (yours are in your config and your own manifests)"
        )
        return ceiling

    b = base or replace(spec, tools=PROJECT_ONLY_TOOLS, model=None, provider=None)
    narrowed = replace(
        spec,
        max_turns=cap("max_turns", spec.max_turns, b.max_turns if base else None, limits.max_turns),
        max_output_tokens=cap(
            "max_output_tokens",
            spec.max_output_tokens,
            b.max_output_tokens if base else None,
            limits.max_output_tokens,
        ),
        timeout_seconds=cap("timeout_seconds", spec.timeout_seconds, b.timeout_seconds if base else None),
        budget_tokens=cap("budget.tokens", spec.budget_tokens, b.budget_tokens if base else None),
        budget_cost_usd=cap("budget.cost_usd", spec.budget_cost_usd, b.budget_cost_usd if base else None),
        trusted=limits.trusted.get(spec.name) == spec.fingerprint,
    )
    mine = b.reasoning_effort if base else None
    if spec.reasoning_effort is not None and _EFFORT.index(spec.reasoning_effort) > _EFFORT.index(mine or "medium"):
        notes.append(
            f"{spec.path}: 'reasoning_effort = {spec.reasoning_effort}' lowered to {mine or 'the model default'}: a "
            "project's specialist may lower what its calls cost, not raise it"
        )
        narrowed = replace(narrowed, reasoning_effort=mine)
    if narrowed.trusted:
        return replace(narrowed, narrowed=tuple(notes))
    trust = f"zero specialists trust {spec.name}"
    extra = [t for t in spec.tools if t not in b.tools]
    if extra:
        whose = {"builtin": "the built-in one of that name", "user": "your manifest of that name"}.get(
            b.location if base else "", "a specialist only the project has"
        )
        notes.append(
            f"{spec.path}: tools {', '.join(extra)} not granted: a project's specialist gets no more than {whose} "
            f"({', '.join(b.tools)}); {trust} grants them"
        )
        narrowed = replace(narrowed, tools=tuple(t for t in spec.tools if t in b.tools))
    picked = {"model": (spec.model, b.model, limits.models), "provider": (spec.provider, b.provider, limits.providers)}
    asked = [f"{key} = {v!r}" for key, (v, mine, known) in picked.items() if v not in (None, mine) and v not in known]
    if asked:
        instead = f"the {b.location} manifest's {b.model}" if base and b.model else "the caller's model"
        notes.append(
            f"{spec.path}: {' and '.join(asked)} not used, it runs on {instead}: a project's specialist may pick "
            f"only a model and provider you configured; {trust} lets it"
        )
        narrowed = replace(narrowed, model=b.model, provider=b.provider)
    return replace(narrowed, narrowed=tuple(notes))


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
