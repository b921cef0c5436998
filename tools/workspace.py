"""Workspace confinement: every path a tool touches is resolved and checked."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from zero.errors import ToolError

__all__ = ["Workspace"]


class Workspace:
    """The folders tools may touch. The first root is the working directory."""

    def __init__(self, roots: Sequence[Path | str]):
        if not roots:
            raise ValueError("a workspace needs at least one root")
        self.roots = tuple(Path(os.path.realpath(r)) for r in roots)

    @property
    def root(self) -> Path:
        return self.roots[0]

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` (relative to the root), refused outside every root.

        Symlinks are resolved first, so a link pointing out of the workspace is refused too.
        """
        if not path or "\x00" in path:
            raise ToolError("path is empty or contains a NUL byte")
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.root / candidate
        real = Path(os.path.realpath(candidate))
        if not any(real == root or real.is_relative_to(root) for root in self.roots):
            raise ToolError(
                f"{path!r} is outside the workspace ({', '.join(str(r) for r in self.roots)}); "
                "only paths inside it can be read or written"
            )
        return real

    def display(self, path: Path) -> str:
        """``path`` relative to the root when it is inside it, for messages and listings."""
        try:
            return str(path.relative_to(self.root)) or "."
        except ValueError:
            return str(path)
