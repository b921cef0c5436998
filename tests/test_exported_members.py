"""The public surface: each package's ``__all__`` is sorted and names exactly what its ``__init__`` defines
or re-exports from its own modules, and every error Zero raises can be imported from a public place."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
from support.package import error_classes, packages, public_home

ALLOWED_PRIVATE = {"__version__"}


def isort_key(name: str) -> tuple[int, list[int | str]]:
    """The order of ruff's RUF022 (``ruff check --select RUF022 --fix`` sorts a list this way):
    SCREAMING_CASE constants, then CamelCase classes, then the rest, each in natural order."""
    group = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return group, [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def members(package: str) -> set[str]:
    """The public names an ``__init__`` binds at its top level: what it defines, and what it imports from
    its own modules (``from zero.agent.events import Event`` in ``zero.agent``). Imports from elsewhere (the
    standard library, another package of Zero) are its tools, not its surface."""
    source = importlib.import_module(package).__file__
    if source is None:  # a folder of data files (zero.manifests.teams): nothing to export
        return set()
    names: set[str] = set()
    for node in ast.parse(Path(source).read_text()).body:
        match node:
            case ast.ImportFrom(module=str(module), level=0) if module.startswith(f"{package}."):
                names.update(alias.asname or alias.name for alias in node.names)
            case ast.ImportFrom(level=level) if level > 0:
                names.update(alias.asname or alias.name for alias in node.names)
            case ast.ClassDef() | ast.FunctionDef() | ast.AsyncFunctionDef():
                names.add(node.name)
            case ast.Assign(targets=targets):
                names.update(target.id for target in targets if isinstance(target, ast.Name))
            case ast.AnnAssign(target=ast.Name(id=name)):
                names.add(name)
    return {name for name in names if not name.startswith("_") or name in ALLOWED_PRIVATE} - {"__all__"}


def declared(package: str) -> list[str] | None:
    found = getattr(importlib.import_module(package), "__all__", None)
    return None if found is None else list(found)


@pytest.mark.parametrize("package", packages())
def test_all_is_sorted_and_complete(package: str) -> None:
    module = importlib.import_module(package)
    expected = members(package)
    exported = declared(package)
    if exported is None:
        assert expected == set(), f"{package} binds public names but has no __all__: {sorted(expected)}"
        return
    assert exported == sorted(exported, key=isort_key), (
        f"{package}.__all__ is not sorted: ruff check --select RUF022 --fix {module.__file__}"
    )
    assert len(exported) == len(set(exported)), f"{package}.__all__ names something twice"
    assert [name for name in exported if not hasattr(module, name)] == [], f"{package}.__all__ names what it lacks"
    assert sorted(expected - set(exported)) == [], f"{package} defines or re-exports these outside __all__"
    assert sorted(set(exported) - expected) == [], f"{package}.__all__ names what it neither defines nor re-exports"


def test_every_error_class_is_exported_where_it_is_defined() -> None:
    classes = list(error_classes())
    assert len(classes) >= 20  # the walk met the whole tree, not only what this worker had imported
    missing = [
        f"{cls.__module__}.{cls.__qualname__} (add it to {public_home(cls)}.__all__)"
        for cls in classes
        if cls.__name__ not in (declared(public_home(cls)) or [])
        or getattr(importlib.import_module(public_home(cls)), cls.__name__) is not cls
    ]
    assert sorted(missing) == []
