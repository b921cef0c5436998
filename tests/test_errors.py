"""The error tree drawn in ``zero/errors.py`` is the tree of the classes: every ``ZeroError`` subclass Zero
defines, under its parent, with the exit code where it sets its own, retryable where it is, and the package
that exports it where that is not ``zero.errors``."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from support.package import error_classes, public_home

import zero.errors
from zero.errors import ZeroError

LINE = re.compile(r"    (?P<branch>(?:[│ ]   )*(?:[├└]── )?)(?P<name>[A-Z]\w*)(?P<about>.*)")


@dataclass(frozen=True)
class Drawn:
    name: str
    depth: int
    branch: str
    about: str


def drawing() -> list[Drawn]:
    """The lines of the tree in the module's docstring: from the line after ``::`` to the next blank one."""
    doc = zero.errors.__doc__ or ""
    block = doc[doc.index("::\n\n") + 4 :].split("\n\n")[0]
    drawn = []
    for line in block.splitlines():
        match = LINE.fullmatch(line)
        assert match, f"not a line of the tree: {line!r}"
        branch = match["branch"]
        drawn.append(Drawn(match["name"], len(branch) // 4, branch, match["about"].strip()))
    return drawn


def branches(depths: list[int]) -> list[str]:
    """How a tree of these depths is drawn: ``├── `` before a node with a sibling below it, ``└── `` before
    the last one, and ``│   `` in the columns of ancestors that have siblings still to come."""
    drawn = []
    for i, depth in enumerate(depths):
        rest = depths[i + 1 :]

        def more_at(level: int, rest: list[int] = rest) -> bool:  # a sibling below, before the level ends
            for later in rest:
                if later < level:
                    return False
                if later == level:
                    return True
            return False

        columns = "".join("│   " if more_at(level) else "    " for level in range(1, depth))
        drawn.append("" if depth == 0 else columns + ("├── " if more_at(depth) else "└── "))
    return drawn


def classes() -> dict[str, type[ZeroError]]:
    found: dict[str, type[ZeroError]] = {"ZeroError": ZeroError}
    for cls in error_classes():
        assert cls.__name__ not in found, f"two error classes named {cls.__name__}"
        found[cls.__name__] = cls
    return found


def drawn_parents(drawn: list[Drawn]) -> dict[str, str]:
    parents: dict[str, str] = {}
    path: list[str] = []
    for node in drawn:
        assert node.depth <= len(path), f"{node.name} is drawn deeper than under its parent"
        del path[node.depth :]
        if path:
            parents[node.name] = path[-1]
        path.append(node.name)
    return parents


def test_the_drawing_is_a_well_drawn_tree_rooted_at_zero_error() -> None:
    drawn = drawing()
    assert drawn[0].name == "ZeroError" and [n.depth for n in drawn].count(0) == 1
    names = [n.name for n in drawn]
    assert sorted({n for n in names if names.count(n) > 1}) == []
    assert [n.branch for n in drawn] == branches([n.depth for n in drawn])


def test_the_drawing_has_every_class_under_its_parent() -> None:
    real = {name: cls.__mro__[1].__name__ for name, cls in classes().items() if cls is not ZeroError}
    drawn = drawn_parents(drawing())
    assert sorted(set(real) - set(drawn)) == [], "error classes missing from the drawing in zero/errors.py"
    assert sorted(set(drawn) - set(real)) == [], "the drawing in zero/errors.py shows classes that do not exist"
    assert {name: drawn[name] for name in real} == real


@pytest.mark.parametrize("node", drawing()[1:], ids=lambda node: node.name)
def test_each_line_says_what_its_class_does(node: Drawn) -> None:
    cls = classes()[node.name]
    parent = cls.__mro__[1]
    shown = re.findall(r"\(exit (\d+)\)", node.about)
    if shown or cls.exit_code != getattr(parent, "exit_code", None):
        assert shown == [str(cls.exit_code)], f"{node.name} exits {cls.exit_code}: draw it '(exit {cls.exit_code})'"
    retryable = bool(getattr(cls, "retryable", False))
    assert node.about.startswith("retryable") == retryable
    assert node.about.startswith("retryable, once") == (retryable and getattr(cls, "max_retries", None) == 1)
    home = re.findall(r"\[([\w.]+)\]", node.about)
    assert home == ([] if cls.__module__ == "zero.errors" else [public_home(cls)])
