"""The tool registry and the tool categories manifests name."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from zero.errors import ConfigError, did_you_mean
from zero.tools.base import Tool

__all__ = ["CATEGORIES", "ToolRegistry", "expand_tools"]

_READ_ONLY = ("read_file", "list_directory", "glob", "grep")
CATEGORIES: dict[str, tuple[str, ...]] = {
    "read-only": _READ_ONLY,
    "edit": (*_READ_ONLY, "write_file", "edit_file"),
    "execute": (*_READ_ONLY, "bash"),
    "plan": ("update_plan",),
    "delegate": ("Task", "TaskOutput", "TaskStop", "CreateSpecialist"),
}


def expand_tools(selection: Iterable[str], known: Iterable[str]) -> tuple[str, ...]:
    """Expand categories and tool ids into tool names, in first-seen order.

    Raises ``ConfigError`` naming an unknown entry, with a "did you mean". ``mcp:SERVER`` (all of a
    configured MCP server's tools) and ``mcp__SERVER__TOOL`` (one) are kept as they are: which servers
    exist is known only when a run starts them.
    """
    known = set(known) | {n for names in CATEGORIES.values() for n in names}
    names: dict[str, None] = {}
    for item in selection:
        if item.startswith(("mcp:", "mcp__")) and len(item) > 5:  # an MCP server's tools, or one of them
            names[item] = None
        elif item in CATEGORIES:
            names.update(dict.fromkeys(CATEGORIES[item]))
        elif item in known:
            names[item] = None
        else:
            hint = did_you_mean(item, [*CATEGORIES, *known])
            raise ConfigError(f"unknown tool or category {item!r}{hint}")
    return tuple(names)


class ToolRegistry:
    """Tools by name, in registration order."""

    def __init__(self, tools: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def select(self, names: Iterable[str]) -> ToolRegistry:
        """A registry of only ``names`` (names not registered here are left out)."""
        return ToolRegistry(self._tools[n] for n in names if n in self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)
