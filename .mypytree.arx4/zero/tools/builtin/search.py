"""Search tools: glob and grep, with bounded output."""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass

import anyio.to_thread
from pydantic import Field

from zero.errors import ToolError
from zero.tools.base import ArgsModel, BuiltinTool, ToolContext, ToolOutput
from zero.tools.workspace import Workspace

__all__ = ["Glob", "Grep"]

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".ruff_cache"}
MAX_FILE_BYTES = 2_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class _File:
    """A file met on a walk: its path from the search's top, as shown, and how to open it safely."""

    relative: str
    shown: str
    name: str
    dir_fd: int

    def read(self) -> bytes | None:
        """Its bytes (None if it is too big, not a regular file, or gone)."""
        try:
            fd = os.open(self.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.dir_fd)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
                return None
            return f.read()


def walk_files(workspace: Workspace, path: str) -> Iterator[_File]:
    """Files below ``path`` in a stable order, skipping VCS and cache folders and links. The walk holds
    each folder open and never follows a link, so no race can lead it outside the workspace."""
    top = workspace.open(path)
    base = workspace.shown(path)
    try:
        if not stat.S_ISDIR(os.fstat(top).st_mode):
            parent, name = os.path.split(base)
            holder = workspace.open(parent or ".", os.O_RDONLY | os.O_DIRECTORY)
            try:
                yield _File(relative=name, shown=base, name=name, dir_fd=holder)
            finally:
                os.close(holder)
            return
        for dirpath, dirnames, filenames, dir_fd in os.fwalk(".", dir_fd=top):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                try:
                    if not stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                        continue
                except OSError:
                    continue
                relative = os.path.normpath(os.path.join(dirpath, name))
                yield _File(
                    relative=relative, shown=os.path.normpath(os.path.join(base, relative)), name=name, dir_fd=dir_fd
                )
    finally:
        os.close(top)


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
        regex = re.compile(_glob_regex(args.pattern))

        def find() -> tuple[list[str], bool]:
            found: list[str] = []
            for file in walk_files(ctx.workspace, args.path):
                if regex.fullmatch(file.relative):
                    found.append(file.shown)
                    if len(found) > args.max_results:
                        return found[: args.max_results], True
            return found, False

        found, more = await anyio.to_thread.run_sync(find)
        if not found:
            return ToolOutput(text=f"no files match {args.pattern!r} under {args.path}")
        note = f"\n[stopped at {args.max_results} results]" if more else ""
        return ToolOutput(text="\n".join(found) + note)


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
        found, more = await anyio.to_thread.run_sync(_grep, regex, args, ctx.workspace)
        if not found:
            return ToolOutput(text=f"no matches for {args.pattern!r} under {args.path}")
        note = f"\n[stopped at {args.max_results} matches; narrow the pattern or path]" if more else ""
        return ToolOutput(text="\n".join(found) + note)


def _grep(regex: re.Pattern[str], args: GrepArgs, workspace: Workspace) -> tuple[list[str], bool]:
    found: list[str] = []
    for file in walk_files(workspace, args.path):
        if args.include and not fnmatch.fnmatch(file.name, args.include):
            continue
        data = file.read()
        if data is None or b"\x00" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                found.append(f"{file.shown}:{number}:{line[:300]}")
                if len(found) >= args.max_results:
                    return found, True
    return found, False
