"""What the user trusts of a workspace's files, and what a project's specialists are held to.

A cloned repository's ``.zero/`` is someone else's code. What the user approved of it (a project's
MCP server, a project's specialist) is remembered per workspace in ``$ZERO_HOME/KIND-approved.json``
with the fingerprint of what they saw, so an edited file asks again.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from zero.agent import PriceTable
from zero.cli.config import Configs, RunSettings
from zero.sessions import default_data_dir
from zero.specialists import ProjectLimits, SpecialistRegistry

__all__ = ["Approvable", "approve", "approved", "load_specialists", "specialist_warnings"]

Approvable = Literal["mcp", "specialists"]
"""What a user approves of a project: its MCP servers, its specialists."""


def _file(kind: Approvable) -> Path:
    return default_data_dir() / f"{kind}-approved.json"


def _all(kind: Approvable) -> dict[str, dict[str, str]]:
    try:
        data = json.loads(_file(kind).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def approved(kind: Approvable, workspace: Path) -> dict[str, str]:
    """What the user approved of ``workspace`` (``kind``: ``mcp`` or ``specialists``): name to fingerprint."""
    found = _all(kind).get(str(workspace), {})
    return {k: v for k, v in found.items() if isinstance(v, str)} if isinstance(found, dict) else {}


def approve(kind: Approvable, workspace: Path, name: str, fingerprint: str) -> None:
    """Remember that the user approved ``name`` of ``workspace`` as it is now (``fingerprint``)."""
    path = _file(kind)
    data = _all(kind)
    data.setdefault(str(workspace), {})[name] = fingerprint
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, path)


def load_specialists(
    workspace: Path, configs: Configs, settings: RunSettings | None, trusting: Mapping[str, str] | None = None
) -> SpecialistRegistry:
    """The specialists of ``workspace``, a project's held to what the user set: this run's limits
    (``settings``; None: the user's config and the defaults) and the specialists the user trusts (and
    ``trusting``: name to fingerprint, as if trusted too)."""
    model, provider = (settings.model, settings.provider) if settings else (None, None)
    if model == configs.project.model:  # the project's config picked it: not a model you configured
        model = None
    defaults = ProjectLimits()
    limits = ProjectLimits(
        max_turns=settings.max_turns if settings else configs.user.max_turns or defaults.max_turns,
        max_output_tokens=_output_cap(configs, settings) or defaults.max_output_tokens,
        models=frozenset(m for m in (configs.user.model, model) if m),
        providers=frozenset(p for p in (configs.user.provider, provider) if p),
        trusted={**approved("specialists", workspace), **(trusting or {})},
    )
    return SpecialistRegistry.load(workspace, limits=limits)


def specialist_warnings(registry: SpecialistRegistry) -> tuple[str, ...]:
    """The manifests that did not load, and what project specialists asked beyond what the user set."""
    skipped = (f"skipped specialist manifest {problem}" for problem in registry.errors)
    return (*skipped, *(note for s in registry.specialists.values() for note in s.narrowed))


def _output_cap(configs: Configs, settings: RunSettings | None) -> int | None:
    """The run's output cap a call: the one set, else what the run's model has by default."""
    if settings is None:
        return configs.user.max_output_tokens
    prices = PriceTable.builtin().with_overrides(settings.prices)
    return settings.max_output_tokens or prices.output_cap(settings.model)
