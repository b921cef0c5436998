"""The specialist manifest: a strict TOML format (DESIGN.md section 2)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from zero.errors import ConfigError, did_you_mean

__all__ = ["NAME_PATTERN", "Manifest", "ManifestError", "ManifestFile"]

NAME_PATTERN = r"^[a-z][a-z0-9-]{0,63}$"
Location = Literal["builtin", "user", "project", "file"]


class ManifestError(ConfigError):
    """A manifest that cannot be used; the message names the file and the key or line."""

    def __init__(self, path: Path | str, message: str, *, key: str | None = None, line: int | None = None):
        where = str(path) + (f":{line}" if line else "")
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.key = key
        self.line = line
        self.detail = message


class ManifestBudget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tokens: int | None = Field(None, ge=1)
    cost_usd: float | None = Field(None, gt=0)


class Manifest(BaseModel):
    """What a manifest file may say. Unknown keys are errors, never ignored."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = None
    extends: str | None = Field(None, pattern=NAME_PATTERN)
    model: str | None = None
    provider: str | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    tools: list[str] = Field(default_factory=lambda: ["read-only"])
    max_turns: int | None = Field(None, ge=1)
    timeout_seconds: float | None = Field(None, gt=0)
    prompt: str = ""
    budget: ManifestBudget | None = None


@dataclass(frozen=True)
class ManifestFile:
    """A parsed manifest and where it came from."""

    manifest: Manifest
    path: Path
    location: Location

    @property
    def set_fields(self) -> set[str]:
        return set(self.manifest.model_fields_set)

    @classmethod
    def load(cls, path: Path, location: Location = "file") -> ManifestFile:
        try:
            text = path.read_text("utf-8")
        except OSError as e:
            raise ManifestError(path, f"cannot read: {e.strerror}") from e
        return cls.parse(text, path, location)

    @classmethod
    def parse(cls, text: str, path: Path, location: Location = "file") -> ManifestFile:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            found = re.search(r"line (\d+)", str(e))
            raise ManifestError(path, f"not valid TOML: {e}", line=int(found.group(1)) if found else None) from e
        try:
            manifest = Manifest.model_validate(data)
        except ValidationError as e:
            raise _first_problem(path, text, data, e) from e
        if manifest.description is None and manifest.extends is None:
            raise ManifestError(
                path, "description is required (unless the manifest extends another)", key="description"
            )
        if not manifest.prompt.strip() and manifest.extends is None:
            raise ManifestError(
                path,
                "prompt is empty: say what this specialist does and how",
                key="prompt",
                line=_line_of(text, "prompt"),
            )
        return cls(manifest, path, location)


def _line_of(text: str, key: str) -> int | None:
    match = re.search(rf"^\s*{re.escape(key)}\s*=", text, re.MULTILINE)
    return text.count("\n", 0, match.start()) + 1 if match else None


def _first_problem(path: Path, text: str, data: dict[str, Any], e: ValidationError) -> ManifestError:
    err = e.errors()[0]
    loc = [str(p) for p in err["loc"]]
    key = ".".join(loc)
    line = _line_of(text, loc[-1]) if loc else None
    if err["type"] == "extra_forbidden":
        fields = list(Manifest.model_fields) if len(loc) == 1 else ["tokens", "cost_usd"]
        return ManifestError(path, f"unknown key {key!r}{did_you_mean(loc[-1], fields)}", key=key, line=line)
    if err["type"] == "string_pattern_mismatch":
        return ManifestError(
            path,
            f"{key} {err['input']!r} is not a valid name: use lowercase letters, digits and dashes, "
            "starting with a letter (at most 64)",
            key=key,
            line=line,
        )
    if err["type"] == "missing":
        return ManifestError(path, f"{key} is required", key=key)
    return ManifestError(path, f"{key}: {err['msg']}", key=key, line=line)
