"""Search tools: glob and grep, with bounded output."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path

import anyio.to_thread
from pydantic import Field

from zero.errors import ToolError
from zero.tools.base import ArgsModel, BuiltinTool, ToolContext, ToolOutput
from zero.tools.workspace import Workspace

__all__ = ["Glob", "Grep"]

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".ruff_cache"}
MAX_FILE_BYTES = 2_000_000


def walk_files(top: Path) -> Iterator[Path]:
    """Files below ``top`` in a stable order, skipping VCS and cache folders and symlinks."""
    if top.is_file():
        yield top
        return
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath, name)
            if not path.is_symlink():
                yield path


class GlobArgs(ArgsModel):
    pattern: str = Field(description="Glob pattern such as '**/*.py' or 'src/*.ts'.")
    path: str = Field(".", description="Directory to search from, relative to the workspace root.")
    max_results: int = Field(500, ge=1, le=5000)


class Glob(BuiltinTool[GlobArgs]):
    name = "glob"
    description = "Find files whose path matches a glob pattern ('**' matches any folders)."
    side_effect = "read"
    args = GlobArgs

    async def run(self, args: GlobArgs, ctx: ToolContext) -> ToolOutput:
        top = ctx.workspace.resolve(args.path)
        regex = re.compile(_glob_regex(args.pattern))

        def find() -> tuple[list[str], bool]:
            found: list[str] = []
            for path in walk_files(top):
                rel = path.relative_to(top).as_posix() if path != top else path.name
                if regex.fullmatch(rel):
                    found.append(ctx.workspace.display(path))
                    if len(found) > args.max_results:
                        return found[: args.max_results], True
            return found, False

        found, more = await anyio.to_thread.run_sync(find)
        if not found:
            return ToolOutput(f"no files match {args.pattern!r} under {args.path}")
        note = f"\n[stopped at {args.max_results} results]" if more else ""
        return ToolOutput("\n".join(found) + note)


def _glob_regex(pattern: str) -> str:
    """Translate a glob where ``**/`` spans folders and ``*`` stays within one."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


class GrepArgs(ArgsModel):
    pattern: str = Field(description="Regular expression (Python syntax) to search for.")
    path: str = Field(".", description="File or directory to search, relative to the workspace root.")
    include: str | None = Field(None, description="Only files whose name matches this glob, e.g. '*.py'.")
    ignore_case: bool = False
    max_results: int = Field(200, ge=1, le=2000)


class Grep(BuiltinTool[GrepArgs]):
    name = "grep"
    description = "Search file contents with a regular expression; prints path:line:text for each match."
    side_effect = "read"
    args = GrepArgs

    async def run(self, args: GrepArgs, ctx: ToolContext) -> ToolOutput:
        try:
            regex = re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
        except re.error as e:
            raise ToolError(f"invalid regular expression {args.pattern!r}: {e}") from e
        top = ctx.workspace.resolve(args.path)
        found, more = await anyio.to_thread.run_sync(_grep, top, regex, args, ctx.workspace)
        if not found:
            return ToolOutput(f"no matches for {args.pattern!r} under {args.path}")
        note = f"\n[stopped at {args.max_results} matches; narrow the pattern or path]" if more else ""
        return ToolOutput("\n".join(found) + note)


def _grep(top: Path, regex: re.Pattern[str], args: GrepArgs, workspace: Workspace) -> tuple[list[str], bool]:
    found: list[str] = []
    for path in walk_files(top):
        if args.include and not fnmatch.fnmatch(path.name, args.include):
            continue
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        if b"\x00" in data[:8192]:
            continue
        shown = workspace.display(path)
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                found.append(f"{shown}:{number}:{line[:300]}")
                if len(found) >= args.max_results:
                    return found, True
    return found, False
