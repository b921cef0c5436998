"""File tools: read_file, list_directory, write_file, edit_file."""

from __future__ import annotations

import os
import stat

import anyio.to_thread
from pydantic import Field

from zero.errors import ToolError
from zero.tools.base import ArgsModel, BuiltinTool, ToolContext, ToolOutput
from zero.tools.workspace import NotFound

__all__ = ["EditFile", "ListDirectory", "ReadFile", "WriteFile"]

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
        return ToolOutput(body + more + note if lines else f"{args.path} is empty{note}")


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
        return ToolOutput("\n".join(shown) + more if entries else f"{args.path} is empty")


class WriteFileArgs(ArgsModel):
    path: str = Field(description="File path, relative to the workspace root.")
    content: str = Field(description="The whole new content of the file.")


class WriteFile(BuiltinTool[WriteFileArgs]):
    name = "write_file"
    description = "Create a file or overwrite it with new content; missing folders are created."
    side_effect = "write"
    args = WriteFileArgs

    async def run(self, args: WriteFileArgs, ctx: ToolContext) -> ToolOutput:
        workspace = ctx.workspace

        def write() -> bool:
            try:
                fd, existed = workspace.open(args.path, os.O_WRONLY), True
            except NotFound:
                fd = workspace.open(args.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, make_dirs=True)
                existed = False
            refuse_linked(fd, args.path)
            with os.fdopen(fd, "wb") as f:
                f.truncate(0)
                f.write(args.content.encode("utf-8"))
            return existed

        existed = await anyio.to_thread.run_sync(write)
        verb = "Overwrote" if existed else "Created"
        lines = args.content.count("\n") + (0 if args.content.endswith("\n") or not args.content else 1)
        return ToolOutput(f"{verb} {args.path} ({lines} lines)", changed_files=(workspace.shown(args.path),))


class EditFileArgs(ArgsModel):
    path: str = Field(description="File path, relative to the workspace root.")
    old_text: str = Field(description="The exact text to replace, including whitespace.")
    new_text: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of exactly one.")


class EditFile(BuiltinTool[EditFileArgs]):
    name = "edit_file"
    description = (
        "Replace an exact piece of text in a file. old_text must occur exactly once "
        "(add surrounding lines to make it unique) unless replace_all is true."
    )
    side_effect = "write"
    args = EditFileArgs

    async def run(self, args: EditFileArgs, ctx: ToolContext) -> ToolOutput:
        if not args.old_text:
            raise ToolError("old_text is empty; use write_file to create a file")
        workspace = ctx.workspace

        def edit() -> int:
            fd = workspace.open(args.path, os.O_RDWR)
            refuse_linked(fd, args.path)
            text, _ = read_fd(os.dup(fd), args.path)
            count = text.count(args.old_text)
            if count == 0:
                raise ToolError(
                    f"old_text was not found in {args.path}; read the file again and copy the "
                    "exact text, including indentation and line breaks"
                )
            if count > 1 and not args.replace_all:
                at, lines, start = [], [], 0
                while (start := text.find(args.old_text, start)) != -1:
                    at.append(start)
                    start += 1
                lines = [str(text.count("\n", 0, i) + 1) for i in at]
                raise ToolError(
                    f"old_text occurs {count} times in {args.path} (lines {', '.join(lines)}); "
                    "include more surrounding text to make it unique, or set replace_all"
                )
            with os.fdopen(fd, "wb") as f:
                f.seek(0)
                f.truncate(0)
                f.write(text.replace(args.old_text, args.new_text).encode("utf-8"))
            return count

        count = await anyio.to_thread.run_sync(edit)
        what = f"{count} occurrences" if count > 1 else "1 occurrence"
        return ToolOutput(f"Edited {args.path}: replaced {what}", changed_files=(workspace.shown(args.path),))
