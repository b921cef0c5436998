"""File tools: read_file, list_directory (the write tools are in ``edits``)."""

from __future__ import annotations

import os
import stat

import anyio.to_thread
from pydantic import Field

from zero.errors import ToolError
from zero.tools.base import ArgsModel, BuiltinTool, ToolContext, ToolOutput

__all__ = ["ListDirectory", "ReadFile", "refuse_linked"]

MAX_READ_LINES = 2000
MAX_LIST_ENTRIES = 1000


def read_fd(fd: int, display: str) -> tuple[str, int]:
    """The text of an open file and its number of hard links; closes ``fd``."""
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        os.close(fd)
        raise ToolError(f"{display} is a directory; use list_directory")
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    if b"\x00" in data[:8192]:
        raise ToolError(f"{display} is a binary file")
    return data.decode("utf-8", errors="replace"), st.st_nlink


def refuse_linked(fd: int, display: str) -> None:
    """A file with other hard links may be one outside the workspace under another name: never write it."""
    links = os.fstat(fd).st_nlink
    if links > 1:
        os.close(fd)
        raise ToolError(
            f"{display} has {links} hard links: the same file may live elsewhere, outside the workspace, "
            "so it is not changed; copy it to a new file first if you need to edit it"
        )


def linked_note(links: int, display: str) -> str:
    if links <= 1:
        return ""
    return f"\n[note: {display} has {links} hard links; the same file exists under another name, maybe outside]"


class ReadFileArgs(ArgsModel):
    path: str = Field(description="File path, relative to the workspace root.")
    start_line: int | None = Field(None, ge=1, description="First line to read (1-based).")
    end_line: int | None = Field(None, ge=1, description="Last line to read (inclusive).")


class ReadFile(BuiltinTool[ReadFileArgs]):
    name = "read_file"
    description = (
        "Read a text file of the workspace. Lines are numbered; give start_line/end_line "
        f"to read part of a long file (at most {MAX_READ_LINES} lines at once)."
    )
    side_effect = "read"
    args = ReadFileArgs

    async def run(self, args: ReadFileArgs, ctx: ToolContext) -> ToolOutput:
        fd = ctx.workspace.open(args.path)
        text, links = await anyio.to_thread.run_sync(read_fd, fd, args.path)
        lines = text.splitlines()
        start = args.start_line or 1
        end = min(args.end_line or len(lines), len(lines), start + MAX_READ_LINES - 1)
        if lines and start > len(lines):
            raise ToolError(f"{args.path} has {len(lines)} lines; start_line {start} is past the end")
        body = "\n".join(f"{n:>6}\t{lines[n - 1]}" for n in range(start, end + 1))
        more = f"\n[lines {start}-{end} of {len(lines)}]" if (start > 1 or end < len(lines)) else ""
        note = linked_note(links, args.path)
        return ToolOutput(text=body + more + note if lines else f"{args.path} is empty{note}")


class ListDirectoryArgs(ArgsModel):
    path: str = Field(".", description="Directory path, relative to the workspace root.")


class ListDirectory(BuiltinTool[ListDirectoryArgs]):
    name = "list_directory"
    description = "List the entries of a directory; subdirectories end with '/'."
    side_effect = "read"
    args = ListDirectoryArgs

    async def run(self, args: ListDirectoryArgs, ctx: ToolContext) -> ToolOutput:
        fd = ctx.workspace.open(args.path, os.O_RDONLY | os.O_DIRECTORY)
        # One directory read, as cheap as opening it: done inline, not in a worker thread
        # (a thread hop would leave the model connection idle a whole event-loop round longer).
        try:
            with os.scandir(fd) as it:
                entries = sorted(e.name + ("/" if e.is_dir(follow_symlinks=False) else "") for e in it)
        finally:
            os.close(fd)
        shown = entries[:MAX_LIST_ENTRIES]
        more = f"\n[{len(entries) - len(shown)} more entries not shown]" if len(entries) > len(shown) else ""
        return ToolOutput(text="\n".join(shown) + more if entries else f"{args.path} is empty")
