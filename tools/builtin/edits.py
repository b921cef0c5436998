"""The write tools, write_file and edit_file, and what a call of one would change: one computation for the
tool and for the approval that shows it.

An approval's preview runs the tool's own code on the same bytes: the file is opened as the tool opens it
(beneath the workspace, a link followed only while it stays inside), read as bytes, and changed as the tool
changes it (``plan_edit``). What the approval saw is pinned (``Pin``: the real path the write lands at, and a
digest of the bytes there); a tool run with a pin (``pinned``, set around an approved call) checks the file
it opened against it and writes nothing if it is another one (a link swapped after the question) or holds
other bytes (the file changed).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import secrets
import stat
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio.to_thread
from pydantic import Field

from zero.errors import ToolError
from zero.tools.base import ArgsModel, BuiltinTool, ToolContext, ToolOutput
from zero.tools.builtin.files import refuse_linked
from zero.tools.workspace import NotFound, Workspace

__all__ = [
    "PREVIEW_BYTES",
    "EditFile",
    "EditPlan",
    "Pin",
    "WriteFile",
    "pinned",
    "plan_edit",
    "plan_replace",
    "replace_file",
    "unowned_call",
]

PREVIEW_BYTES = 1_000_000  # of a file an approval shows; past it, the change is not shown
_BINARY = 8192  # a NUL in a file's first bytes makes it binary, as read_file says

Change = Callable[[bytes | None], bytes]  # the bytes before (None: no file) to the bytes written, or ToolError


@dataclass(frozen=True, slots=True, kw_only=True)
class Pin:
    """What an approval saw of a write: the real path it lands at, whether a file was there, and the
    SHA-256 of its bytes (None: too big to preview, so only its place and existence are pinned)."""

    real: str
    existed: bool
    digest: str | None


pinned: ContextVar[Pin | None] = ContextVar("pinned", default=None)
"""The pin of the approved write being run: set by the agent loop around the call the approval was for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EditPlan:
    """What a write or edit would do if the tool ran now, computed by the tool's own code."""

    path: str  # as the call names it
    real: str | None  # the real path it lands at; None: it cannot be resolved (``error`` says why)
    before: bytes | None = None  # the file's bytes (None: there is no file, or it is too big to preview)
    after: bytes | None = None  # what the tool would write (None: it would fail, or too big to preview)
    error: str = ""  # the tool would fail, saying this
    too_big: int = 0  # the file's size, past PREVIEW_BYTES: the change is not computed
    pin: Pin | None = None  # what an approval of it pins


def plan_edit(workspace: Workspace, name: str, arguments: dict[str, Any]) -> EditPlan | None:
    """What the write tool ``name`` would do with ``arguments`` now (None: ``name`` is not a write tool)."""
    tool = _TOOLS.get(name)
    return None if tool is None else tool.plan(workspace, arguments)


def unowned_call(workspace: Workspace, name: str, arguments: dict[str, Any]) -> str | None:
    """Why the call of the write tool ``name`` would write a file its workspace's owner does not own (None: it
    would not, or ``name`` writes nothing); asked before the call, so that it is denied (or asked about), and
    again by the write itself."""
    path = arguments.get("path")
    return unowned_write(workspace, path) if name in _TOOLS and isinstance(path, str) else None


def unowned_write(workspace: Workspace, path: str) -> str | None:
    """Why a write to ``path`` is not the workspace's owner's to make (None: it is, or the path cannot be
    resolved, which the tool then says)."""
    if workspace.owns is None:  # (no path is resolved for a workspace whose owner may write anything)
        return None
    try:
        return workspace.unowned(str(workspace.resolve(path)))
    except (ToolError, OSError):
        return None


@dataclass(slots=True, kw_only=True)
class _Target:
    """A write's file, opened as the tool opens it: the file (``name`` None), or, for one that does not exist
    yet, its folder (``fd`` None when that does not exist either) and its name there; ``real``: where it lands."""

    fd: int | None
    name: str | None
    real: str

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)


def _open(workspace: Workspace, path: str, flags: int, *, make_dirs: bool) -> _Target:
    """The target of a write to ``path``: opened with ``flags`` if it exists (a regular file with one link),
    else its folder (made, with ``make_dirs``)."""
    try:
        fd = workspace.open(path, flags | os.O_NONBLOCK | os.O_NOCTTY)
    except NotFound:
        pass
    else:
        kind = os.fstat(fd).st_mode
        if not stat.S_ISREG(kind):
            os.close(fd)
            raise ToolError(f"{path} is a directory" if stat.S_ISDIR(kind) else f"{path} is not a regular file")
        refuse_linked(fd, path)
        return _Target(fd=fd, name=None, real=_real(fd))
    folder, name = posixpath.split(path)
    if name in ("", ".", ".."):
        raise ToolError(f"{path} names a folder, not a file")
    try:
        fd = workspace.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY, make_dirs=make_dirs)
    except NotFound:  # a preview makes no folder: where the path leads as it resolves now
        return _Target(fd=None, name=name, real=str(workspace.resolve(path)))
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return _Target(fd=fd, name=name, real=posixpath.join(_real(fd), name))
    os.close(fd)  # the name is there, yet what it leads to is not: a link to nothing
    raise ToolError(f"{path} is a link to a file that does not exist; write to the file's real path")


def _real(fd: int) -> str:
    """The path of the open file ``fd``, as the kernel knows it (wherever links led to it)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc (macOS): the call that says it there
        import fcntl

        getpath = getattr(fcntl, "F_GETPATH", None)
        if getpath is None:
            raise ToolError("this system cannot say where a write lands, so it is not made") from None
        return os.fsdecode(fcntl.fcntl(fd, getpath, bytes(1024)).split(b"\0", 1)[0])


def _read(fd: int, limit: int | None = None) -> bytes:
    """The bytes of the open file ``fd`` from its start (at most ``limit`` and one more)."""
    os.lseek(fd, 0, os.SEEK_SET)
    chunks, size = [], 0
    while (limit is None or size <= limit) and (chunk := os.read(fd, 1 << 20)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _plan(workspace: Workspace, path: str, change: Change) -> EditPlan:
    """The tool's own steps up to the write: open, read, change; nothing is made or written."""
    try:
        target = _open(workspace, path, os.O_RDONLY, make_dirs=False)
    except ToolError as e:
        return EditPlan(path=path, real=None, error=str(e))
    try:
        before = _read(target.fd, PREVIEW_BYTES) if target.fd is not None and target.name is None else None
        size = os.fstat(target.fd).st_size if before is not None and target.fd is not None else 0
    finally:
        target.close()
    existed = target.name is None
    if before is not None and len(before) > PREVIEW_BYTES:
        return EditPlan(path=path, real=target.real, too_big=size, pin=Pin(real=target.real, existed=True, digest=None))
    pin = Pin(real=target.real, existed=existed, digest=_digest(before) if before is not None else None)
    try:
        after = change(before)
    except ToolError as e:
        return EditPlan(path=path, real=target.real, before=before, error=str(e), pin=pin)
    return EditPlan(path=path, real=target.real, before=before, after=after, pin=pin)


def _write(
    workspace: Workspace, path: str, change: Change, pin: Pin | None, *, reads: bool, creates: bool
) -> tuple[bool, bytes | None]:
    """Change ``path`` as ``change`` says (``reads``: it needs the bytes before; ``creates``: it may make the
    file, and its folders), refusing a file other than ``pin``'s; whether the file existed, and its bytes
    before (None: a new file, or not read)."""
    # An approved write (``pin``) was asked about with it said; else a file not owned is never written, nor a
    # folder made for it. (Owning is a plan, not a wall: a member's shell can write anywhere in its workspace.)
    if pin is None and (unowned := unowned_write(workspace, path)) is not None:
        raise ToolError(f"{unowned}; nothing was written")
    target = _open(workspace, path, os.O_RDWR, make_dirs=creates)
    try:
        existed = target.name is None
        before = _read(target.fd) if existed and target.fd is not None and (reads or pin is not None) else None
        if pin is not None:
            _check(pin, path, target.real, existed, before)
        after = change(before)
        if target.fd is None:  # not even its folder is there (and may not be made)
            raise NotFound(f"{path} does not exist")
        if target.name is None:
            fd = os.dup(target.fd)
        else:  # made beneath the folder opened above, never through a link
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                fd = os.open(target.name, flags, 0o644, dir_fd=target.fd)
            except FileExistsError:  # made since it was opened
                raise ToolError(f"{path} appeared while it was being written; nothing was written") from None
        with os.fdopen(fd, "wb") as f:
            f.seek(0)
            f.truncate(0)
            f.write(after)
        return existed, before
    finally:
        target.close()


def _check(pin: Pin, path: str, real: str, existed: bool, before: bytes | None) -> None:
    """Refuse a write whose file is not the one its approval showed."""
    if real != pin.real:
        raise ToolError(f"{path} now leads to {real}, not to {pin.real} as when it was approved; nothing was written")
    if existed != pin.existed or (pin.digest is not None and (before is None or _digest(before) != pin.digest)):
        raise ToolError(f"{path} changed since it was approved; nothing was written: read it again")


def plan_replace(workspace: Workspace, path: str, data: bytes) -> EditPlan:
    """What ``replace_file`` would do now: the file at ``path`` (none, or a regular one) becoming ``data``."""
    try:
        fd, _ = _plain_file(workspace, path)
    except ToolError as e:
        return EditPlan(path=path, real=None, error=str(e))
    if fd is not None:
        os.close(fd)
    return _plan(workspace, path, lambda before: data)


def replace_file(workspace: Workspace, path: str, data: bytes, pin: Pin | None) -> bool:
    """Make ``data`` the whole of ``path`` in one step (a new spare file beside it, renamed over it: a reader
    sees the old file or the new one, never half of one), its folders made; refused where a link or anything
    but a regular file is there, or the file is not ``pin``'s (what its approval showed); whether a file was
    there."""
    fd, name = _plain_file(workspace, path, make_dirs=True)
    assert fd is not None  # (made, or an error said why not)
    try:
        try:
            before_stat: os.stat_result | None = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            before_stat = None
        existed = before_stat is not None
        if pin is not None:
            before = None
            if existed:
                held = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
                try:
                    before = _read(held)
                finally:
                    os.close(held)
            _check(pin, path, posixpath.join(_real(fd), name), existed, before)
        mode = stat.S_IMODE(before_stat.st_mode) if before_stat is not None else 0o644
        spare = f".{name}.{secrets.token_hex(4)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        out = os.open(spare, flags, mode, dir_fd=fd)
        try:
            with os.fdopen(out, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(spare, name, src_dir_fd=fd, dst_dir_fd=fd)  # (a rename never follows a link at its target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(spare, dir_fd=fd)
            raise
        return existed
    finally:
        os.close(fd)


def _plain_file(workspace: Workspace, path: str, *, make_dirs: bool = False) -> tuple[int | None, str]:
    """The folder of ``path`` opened beneath the workspace (None: it is not there, and ``make_dirs`` is not
    set) and the file's name in it; refused where a link, a file of several hard links or anything but a
    regular file has that name."""
    folder, name = posixpath.split(path)
    if name in ("", ".", ".."):
        raise ToolError(f"{path} names a folder, not a file")
    try:
        fd = workspace.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY, make_dirs=make_dirs)
    except NotFound:
        return None, name
    try:
        found = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return fd, name
    kind = found.st_mode
    if stat.S_ISREG(kind) and found.st_nlink == 1:
        return fd, name
    os.close(fd)
    if stat.S_ISREG(kind):  # as the write tools refuse it (what the plan says, too)
        raise ToolError(f"{path} has {found.st_nlink} hard links: the same file may live elsewhere; remove it first")
    if stat.S_ISLNK(kind):
        raise ToolError(f"{path} is a link: it is not written through; remove it first")
    raise ToolError(f"{path} is not a regular file: it is not replaced; remove it first")


class _PathArgs(ArgsModel):
    path: str = Field(description="File path, relative to the workspace root.")


P = TypeVar("P", bound=_PathArgs)


class _Writer(BuiltinTool[P]):
    """A write tool: what it writes is ``change`` of the bytes before, which ``plan`` shows."""

    side_effect = "write"

    def change(self, args: P) -> Change:
        raise NotImplementedError

    def plan(self, workspace: Workspace, arguments: dict[str, Any]) -> EditPlan:
        """What a call with ``arguments`` would do now."""
        try:
            args = self.parse(arguments)
        except ToolError as e:
            return EditPlan(path=str(arguments.get("path", "")), real=None, error=str(e))
        return _plan(workspace, args.path, self.change(args))


class WriteFileArgs(_PathArgs):
    content: str = Field(description="The whole new content of the file.")


class WriteFile(_Writer[WriteFileArgs]):
    name = "write_file"
    description = "Create a file or overwrite it with new content; missing folders are created."
    args = WriteFileArgs

    def change(self, args: WriteFileArgs) -> Change:
        content = args.content.encode("utf-8")
        return lambda before: content

    async def run(self, args: WriteFileArgs, ctx: ToolContext) -> ToolOutput:
        change, pin = self.change(args), pinned.get()
        existed, _ = await anyio.to_thread.run_sync(
            lambda: _write(ctx.workspace, args.path, change, pin, reads=False, creates=True)
        )
        verb = "Overwrote" if existed else "Created"
        lines = args.content.count("\n") + (0 if args.content.endswith("\n") or not args.content else 1)
        return ToolOutput(text=f"{verb} {args.path} ({lines} lines)", changed_files=(ctx.workspace.shown(args.path),))


class EditFileArgs(_PathArgs):
    old_text: str = Field(description="The exact text to replace, including whitespace.")
    new_text: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of exactly one.")


class EditFile(_Writer[EditFileArgs]):
    name = "edit_file"
    description = (
        "Replace an exact piece of text in a file. old_text must occur exactly once "
        "(add surrounding lines to make it unique) unless replace_all is true."
    )
    args = EditFileArgs

    def change(self, args: EditFileArgs) -> Change:
        """The edit as bytes: the file's bytes are kept as they are but for the text replaced (an encoding, line
        ends and all)."""
        old, new = args.old_text.encode("utf-8"), args.new_text.encode("utf-8")

        def edited(before: bytes | None) -> bytes:
            if not old:
                raise ToolError("old_text is empty; use write_file to create a file")
            if before is None:
                raise ToolError(f"{args.path} does not exist")
            if b"\x00" in before[:_BINARY]:
                raise ToolError(f"{args.path} is a binary file")
            count = before.count(old)
            if count == 0:
                raise ToolError(
                    f"old_text was not found in {args.path}; read the file again and copy the "
                    "exact text, including indentation and line breaks"
                )
            if count > 1 and not args.replace_all:
                at, start = [], 0
                while (start := before.find(old, start)) != -1:
                    at.append(str(before.count(b"\n", 0, start) + 1))
                    start += 1
                raise ToolError(
                    f"old_text occurs {count} times in {args.path} (lines {', '.join(at)}); "
                    "include more surrounding text to make it unique, or set replace_all"
                )
            return before.replace(old, new)

        return edited

    async def run(self, args: EditFileArgs, ctx: ToolContext) -> ToolOutput:
        change, pin = self.change(args), pinned.get()
        _, before = await anyio.to_thread.run_sync(
            lambda: _write(ctx.workspace, args.path, change, pin, reads=True, creates=False)
        )
        count = (before or b"").count(args.old_text.encode("utf-8"))
        what = f"{count} occurrences" if count > 1 else "1 occurrence"
        return ToolOutput(text=f"Edited {args.path}: replaced {what}", changed_files=(ctx.workspace.shown(args.path),))


_TOOLS: dict[str, _Writer[Any]] = {"write_file": WriteFile(), "edit_file": EditFile()}
