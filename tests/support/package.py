"""The installed package as tests see it: its packages (as pyproject.toml lists them) and every module of
them, imported, so that a walk of a class's subclasses meets every one Zero defines."""

from __future__ import annotations

import functools
import importlib
import pkgutil
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from zero.errors import ZeroError

ROOT = Path(__file__).resolve().parents[2]


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


@functools.cache
def packages() -> tuple[str, ...]:
    """Every package the distribution installs (``[tool.setuptools] packages``), ``zero`` first."""
    names: list[str] = pyproject()["tool"]["setuptools"]["packages"]
    return tuple(sorted(names, key=lambda name: (name != "zero", name)))


@functools.cache
def every_module() -> tuple[ModuleType, ...]:
    """Every module of every package, imported (the sandbox's first process included: importing it runs
    nothing, it is run as a script)."""
    found: dict[str, ModuleType] = {}
    for name in packages():
        package = importlib.import_module(name)
        found[name] = package
        for info in pkgutil.iter_modules(package.__path__, f"{name}."):
            found[info.name] = importlib.import_module(info.name)
    return tuple(found[name] for name in sorted(found))


def error_classes() -> Iterator[type[ZeroError]]:
    """Every subclass of ``ZeroError`` Zero defines, anywhere in the package."""
    every_module()
    pending = list(ZeroError.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith("zero."):
            yield cls


def public_home(cls: type) -> str:
    """Where an error class is imported from: the top-level package that defines it (``zero.tools`` for
    ``zero.tools.workspace.NotFound``), or, for the package root's own modules (``zero.errors``,
    ``zero.strictfile``), that module: the root re-exports nothing, since ``zero --help`` imports it."""
    parts = cls.__module__.split(".")
    return ".".join(parts[:2])
