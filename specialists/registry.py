"""Specialist discovery: built-in, user and project manifests, later wins by name.

Precedence: a project manifest (``<workspace>/.zero/specialists/``) overrides a user one
(``${XDG_CONFIG_HOME:-~/.config}/zero/specialists/``), which overrides a built-in one.
A bad file is reported with its path and key and skipped; it never hides the others (a link is
followed: a project's only where it stays in its folder, else it is reported and skipped).
``extends`` is resolved after the merge; a cycle or a missing base drops only the
specialists on that chain. A project's manifest comes with a repository: it is narrowed to
what the user set (``zero.specialists.project``), and a user's or built-in manifest never
extends a project's, so a repository cannot change them either.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import TypeVar

from zero.errors import ConfigError, ToolError
from zero.specialists.manifest import KNOWN_TOOLS, Location, Manifest, ManifestError, ManifestFile, Specialist
from zero.specialists.project import ProjectLimits, narrow
from zero.strictfile import MAX_FILE
from zero.tools import NotFound, OutsideWorkspace, Workspace, expand_tools

__all__ = ["Specialist", "SpecialistRegistry", "builtin_dir", "project_dir", "user_dir"]


def builtin_dir() -> Path:
    return Path(str(resources.files("zero.manifests").joinpath("specialists")))


def user_config_dir() -> Path:
    """``${XDG_CONFIG_HOME:-~/.config}/zero``: your own config (``config.toml``, ``specialists/``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "zero"


def user_dir() -> Path:
    return user_config_dir() / "specialists"


def project_dir(workspace: Path) -> Path:
    return workspace / ".zero" / "specialists"


@dataclass(kw_only=True)
class SpecialistRegistry:
    """The specialists that loaded, and the errors of the files that did not."""

    specialists: dict[str, Specialist] = field(default_factory=dict)
    errors: list[ManifestError] = field(default_factory=list)
    overridden: dict[str, list[Path]] = field(default_factory=dict)
    workspace: Path | None = None  # where it was read from (its project folder's workspace), to read it again
    user: Path | None = None
    limits: ProjectLimits = field(default_factory=ProjectLimits)

    @classmethod
    def load(
        cls, workspace: Path | None = None, *, user: Path | None = None, limits: ProjectLimits | None = None
    ) -> SpecialistRegistry:
        """The specialists of ``workspace``; ``limits``: what the user set, which the project's stay within
        (by default the defaults, with no model configured and no project specialist trusted)."""
        folders: list[tuple[Path, Location]] = [(builtin_dir(), "builtin"), (user or user_dir(), "user")]
        if workspace is not None:
            folders.append((project_dir(workspace), "project"))
        registry = cls(workspace=workspace, user=user, limits=limits or ProjectLimits())
        files: dict[str, ManifestFile] = {}
        mine: dict[str, ManifestFile] = {}  # the built-in and user manifests: what the project's are held to
        for folder, location in folders:
            beneath = None
            if location == "project" and workspace is not None and folder.is_dir():
                if not Path(os.path.realpath(folder)).is_relative_to(os.path.realpath(workspace)):
                    registry.errors.append(ManifestError.of(folder, "it is a link that leads outside the workspace"))
                    continue
                beneath = Workspace([folder])
            for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
                try:
                    loaded = _load(path, location, beneath)
                except ManifestError as e:
                    registry.errors.append(e)
                    continue
                name = loaded.manifest.name
                if name in files:
                    registry.overridden.setdefault(name, []).append(files[name].path)
                files[name] = loaded
                if location != "project":
                    mine[name] = loaded
        limits = _with_own_models(limits or ProjectLimits(), mine)
        for name, file in files.items():
            try:
                if file.location != "project":
                    registry.specialists[name] = resolve(name, mine)
                else:
                    registry.specialists[name] = narrow(resolve(name, files), _base(name, mine), limits)
            except ManifestError as e:
                registry.errors.append(e)
        return registry

    def reload(self, trusting: Mapping[str, str] | None = None) -> None:
        """Read the folders again, in place (every agent of a run holds the same registry: a specialist saved
        is one they can all start), trusting ``trusting`` too (name: fingerprint)."""
        limits = replace(self.limits, trusted={**self.limits.trusted, **(trusting or {})})
        fresh = SpecialistRegistry.load(self.workspace, user=self.user, limits=limits)
        self.specialists, self.errors, self.overridden = fresh.specialists, fresh.errors, fresh.overridden
        self.limits = limits

    def resolve_draft(self, draft: ManifestFile, drafts: Mapping[str, ManifestFile] | None = None) -> Specialist:
        """``draft`` resolved (its ``extends`` chain, its tools) against the manifests on disk and ``drafts``
        (others not written yet), as it would be once written: a ``ManifestError`` says why it would not load."""
        on_disk = {spec.name: ManifestFile.load(spec.path, spec.location) for spec in self.specialists.values()}
        files = {**on_disk, **(drafts or {}), draft.manifest.name: draft}
        return resolve(draft.manifest.name, files)

    def get(self, name: str) -> Specialist:
        try:
            return self.specialists[name]
        except KeyError:
            raise ConfigError(f"no specialist named {name!r}; available: {', '.join(self.names())}") from None

    def names(self) -> list[str]:
        return sorted(self.specialists)


def _load(path: Path, location: Location, beneath: Workspace | None) -> ManifestFile:
    """A manifest of a folder. A project's comes with a repository: it is read beneath its folder, as the file
    tools read (a link is followed only where it stays inside, and only a regular file is read); the user's
    and the built-in ones are followed wherever their links lead (a dotfiles repository, say)."""
    if beneath is None:
        if not path.is_file():
            raise ManifestError.of(path, _not_a_file(path))
        return ManifestFile.load(path, location)
    try:
        raw = beneath.read_regular(path.name, limit=MAX_FILE)
    except OutsideWorkspace:
        raise ManifestError.of(
            path, f"it is a link that leads outside {path.parent}, where a project's manifests are read from"
        ) from None
    except NotFound:
        raise ManifestError.of(path, _not_a_file(path)) from None
    except ToolError as e:
        raise ManifestError.of(path, str(e)) from None
    return ManifestFile.load(path, location, raw)


def _not_a_file(path: Path) -> str:
    if path.is_symlink() and not path.exists():
        return f"it is a link to {os.readlink(path)}, which does not exist"
    return "it is a directory" if path.is_dir() else "it is not a regular file"


def _base(name: str, mine: dict[str, ManifestFile]) -> Specialist | None:
    """The user's (or built-in) specialist that a project's of the same name overrides, if it resolves."""
    try:
        return resolve(name, mine) if name in mine else None
    except ManifestError:
        return None


def _with_own_models(limits: ProjectLimits, mine: dict[str, ManifestFile]) -> ProjectLimits:
    """``limits`` with the models and providers of the user's own manifests: configured by the user too."""
    models = {f.manifest.model for f in mine.values() if f.manifest.model}
    providers = {f.manifest.provider for f in mine.values() if f.manifest.provider}
    return replace(limits, models=limits.models | models, providers=limits.providers | providers)


def resolve(name: str, files: dict[str, ManifestFile]) -> Specialist:
    """Merge ``name`` with its ``extends`` chain: prompt = base + own, own tools replace the base's."""
    file = files[name]
    chain = [name]
    while (base := files[chain[-1]].manifest.extends) is not None:
        if base in chain:
            raise ManifestError.of(file.path, f"extends cycle: {' -> '.join([*chain, base])}", key="extends")
        if base not in files:
            where = "" if len(chain) == 1 else f" (through {' -> '.join(chain)})"
            raise ManifestError.of(
                file.path, f"extends {base!r}, which is not a known specialist{where}", key="extends"
            )
        chain.append(base)
    merged: Specialist | None = None
    for step in reversed(chain):
        m = files[step].manifest
        description = m.description or (merged.description if merged else "")
        prompt = "\n\n".join(p for p in (merged.prompt if merged else "", m.prompt.strip()) if p)
        try:
            merged = _specialist(files[step], description, prompt, merged)
        except ManifestError as e:
            if step == name:
                raise
            raise ManifestError.of(file.path, f"its base {step!r} is unusable: {e.detail}", key="extends") from e
    assert merged is not None
    return replace(merged, bases=tuple(chain[1:]))


T = TypeVar("T")


def _pick(own: bool, value: T, inherited: T) -> T:
    return value if own else inherited


def _specialist(file: ManifestFile, description: str, prompt: str, base: Specialist | None) -> Specialist:
    m: Manifest = file.manifest
    own = file.set_fields if base is not None else set(Manifest.model_fields)
    selection = tuple(m.tools) if "tools" in own else base.tool_selection if base else ()
    try:
        tools = expand_tools(selection, KNOWN_TOOLS)
    except ConfigError as e:
        raise ManifestError.of(file.path, str(e), key="tools") from e
    b = base or Specialist(name="", description="", prompt="", tools=(), location=file.location, path=file.path)
    budget = m.budget
    has_budget = "budget" in own
    return Specialist(
        name=m.name,
        description=description,
        prompt=prompt,
        tools=tools,
        location=file.location,
        path=file.path,
        model=_pick("model" in own, m.model, b.model),
        provider=_pick("provider" in own, m.provider, b.provider),
        reasoning_effort=_pick("reasoning_effort" in own, m.reasoning_effort, b.reasoning_effort),
        max_turns=_pick("max_turns" in own, m.max_turns, b.max_turns),
        max_output_tokens=_pick("max_output_tokens" in own, m.max_output_tokens, b.max_output_tokens),
        timeout_seconds=_pick("timeout_seconds" in own, m.timeout_seconds, b.timeout_seconds),
        budget_tokens=_pick(has_budget, budget.tokens if budget else None, b.budget_tokens),
        budget_cost_usd=_pick(has_budget, budget.cost_usd if budget else None, b.budget_cost_usd),
        isolation=_pick("isolation" in own, m.isolation, b.isolation),
        output_schema=_pick("output_schema" in own, file.output_schema, b.output_schema),
        output_retries=_pick("output_retries" in own, m.output_retries, b.output_retries),
        tool_selection=selection,
        default_tools="tools" not in file.set_fields and (base is None or base.default_tools),
        fingerprint=_fingerprint(b.fingerprint, file) if file.location == "project" else b.fingerprint,
        inherited=tuple(key for key, value in _given(b).items() if value and key not in own) if base else (),
    )


def _given(spec: Specialist) -> dict[str, object]:
    """What a specialist sets, by manifest key: what one extending it can inherit."""
    return {
        "description": spec.description,
        "prompt": spec.prompt,
        "tools": spec.tool_selection or spec.default_tools,
        "model": spec.model,
        "provider": spec.provider,
        "reasoning_effort": spec.reasoning_effort,
        "max_turns": spec.max_turns,
        "max_output_tokens": spec.max_output_tokens,
        "timeout_seconds": spec.timeout_seconds,
        "budget": spec.budget_tokens or spec.budget_cost_usd,
        "isolation": spec.isolation,
        "output_schema": spec.output_schema is not None,
        "output_retries": spec.output_retries is not None,
    }


def _fingerprint(base: str, file: ManifestFile) -> str:
    """Of a project's specialist: its file's text and that of its project bases."""
    return hashlib.sha256(f"{base}:{file.digest}".encode()).hexdigest()[:16]
