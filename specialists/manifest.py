"""The specialist manifest: a strict TOML format (docs/SPECIALISTS.md, "Manifest")."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from zero.agent.output_schema import read_schema
from zero.errors import ConfigError
from zero.strictfile import NAME_PATTERN, FileError, KeyLines, Problem, parse_data, read_data, validate_model
from zero.tools import builtin_tools, expand_tools

__all__ = ["NAME_PATTERN", "Manifest", "ManifestError", "ManifestFile", "Specialist"]

Location = Literal["builtin", "user", "project", "file"]
KNOWN_TOOLS = [t.name for t in builtin_tools()]


class ManifestError(FileError):
    """A manifest that cannot be used; every problem names the file and the key or line."""

    def __init__(self, problems: Sequence[Problem]):
        super().__init__(problems)
        first = self.problems[0]
        self.path, self.key, self.line, self.detail = first.path, first.key, first.line, first.message

    @classmethod
    def of(cls, path: Path | str, message: str, *, key: str | None = None, line: int | None = None) -> ManifestError:
        return cls([Problem(path=str(path), message=message, line=line, key=key)])


class ManifestBudget(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    tokens: int | None = Field(None, ge=1)
    cost_usd: float | None = Field(None, gt=0)


class Manifest(BaseModel):
    """What a manifest file may say. Unknown keys are errors, never ignored."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = None
    extends: str | None = Field(None, pattern=NAME_PATTERN)
    model: str | None = None
    provider: str | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    tools: list[str] = Field(default_factory=lambda: ["read-only"])
    max_turns: int | None = Field(None, ge=1, le=10_000)
    max_output_tokens: int | None = Field(None, ge=1, le=10_000_000)
    timeout_seconds: float | None = Field(None, gt=0)
    prompt: str = ""
    budget: ManifestBudget | None = None
    isolation: Literal["worktree", "none"] | None = None
    output_schema: Any = None  # a JSON Schema (a table), the path of one, or "json": read_schema checks it
    output_retries: int | None = Field(None, ge=0, le=10)


@dataclass(frozen=True, kw_only=True)
class ManifestFile:
    """A parsed manifest and where it came from."""

    manifest: Manifest
    path: Path
    location: Location
    digest: str = ""  # a hash of the text it was read from: what a user's trust of a project file covers
    output_schema: dict[str, Any] | None = None  # its output_schema, read (a path's file) and checked

    @property
    def set_fields(self) -> set[str]:
        return set(self.manifest.model_fields_set)

    @classmethod
    def load(cls, path: Path, location: Location = "file", raw: bytes | None = None) -> ManifestFile:
        """The manifest at ``path`` (``raw``: its bytes, read already)."""
        try:
            data, text = read_data(path, raw)
        except FileError as e:
            raise ManifestError(e.problems) from None
        return cls._check(data, text, path, location)

    @classmethod
    def parse(cls, text: str, path: Path, location: Location = "file") -> ManifestFile:
        try:
            data = parse_data(text, path)
        except FileError as e:
            raise ManifestError(e.problems) from None
        return cls._check(data, text, path, location)

    @classmethod
    def _check(cls, data: dict[str, object], text: str, path: Path, location: Location) -> ManifestFile:
        manifest, problems = validate_model(Manifest, data, path, text)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        lines = KeyLines(text)
        tools = data.get("tools")
        for item in tools if isinstance(tools, list) else []:
            if not isinstance(item, str):
                continue  # (the model's check says what it is instead)
            try:
                expand_tools([item], KNOWN_TOOLS)
            except ConfigError as e:
                problems.append(Problem(path=str(path), message=str(e), line=lines.line_of(("tools",)), key="tools"))
        if manifest is not None:
            if manifest.description is None and manifest.extends is None:
                problems.append(
                    Problem(
                        path=str(path),
                        message="description is required (unless the manifest extends another)",
                        line=None,
                        key="description",
                    )
                )
            if not manifest.prompt.strip() and manifest.extends is None:
                problems.append(
                    Problem(
                        path=str(path),
                        message="prompt is empty: say what this specialist does and how",
                        line=lines.line_of(("prompt",)),
                        key="prompt",
                    )
                )
        schema = None
        if manifest is not None and manifest.output_schema is not None:
            try:
                schema = read_schema(manifest.output_schema, path.parent)
            except ValueError as e:
                line = lines.line_of(("output_schema",))
                problems.append(Problem(path=str(path), message=f"output_schema: {e}", line=line, key="output_schema"))
        if manifest is None or problems:
            raise ManifestError(sorted(problems, key=lambda p: p.line or 0))
        return cls(manifest=manifest, path=path, location=location, digest=digest, output_schema=schema)


@dataclass(frozen=True, kw_only=True)
class Specialist:
    """A resolved specialist: ``extends`` merged, tools expanded to names."""

    name: str
    description: str
    prompt: str
    tools: tuple[str, ...]
    location: Location
    path: Path
    model: str | None = None
    provider: str | None = None
    reasoning_effort: str | None = None
    max_turns: int | None = None
    max_output_tokens: int | None = None
    timeout_seconds: float | None = None
    budget_tokens: int | None = None
    budget_cost_usd: float | None = None
    isolation: str | None = None  # "worktree" or "none"; None: the default for its tools (docs/SPECIALISTS.md)
    output_schema: dict[str, Any] | None = None  # the JSON Schema its result must match ({}: any JSON); None: untyped
    output_retries: int | None = None  # invalid results it may follow with another try (None: the default, 2)
    tool_selection: tuple[str, ...] = ()
    default_tools: bool = False
    fingerprint: str = ""  # of its project files' text (a project's specialist): what trusting it covers
    trusted: bool | None = None  # a project's specialist: does the user trust it as it is now (None: not a project's)
    narrowed: tuple[str, ...] = ()  # what it asked beyond what the user set, and what it got instead
    bases: tuple[str, ...] = ()  # what it extends: its base, that one's base, ...
    inherited: tuple[str, ...] = ()  # the manifest keys it takes from its base (a prompt of its own follows the base's)
