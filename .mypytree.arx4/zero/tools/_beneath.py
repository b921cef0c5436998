"""Opening a path beneath a folder in one step, so a race cannot lead it outside.

Checking a path's real location and then opening it by name leaves a window in which another
process can swap a folder for a symbolic link. Here the path is resolved and opened together,
relative to the folder's descriptor: with Linux's ``openat2(RESOLVE_BENEATH)`` where it exists,
else (and for an absolute link that points back inside the folder, which ``openat2`` refuses) by
a walk that opens one component at a time with ``O_NOFOLLOW`` and resolves each link itself,
never above the folder.
"""

from __future__ import annotations

import ctypes
import errno
import os
import posixpath
import sys
from collections.abc import Callable

__all__ = ["Outside", "open_beneath"]

_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # the same number on every Linux architecture
_MAX_LINKS = 40


class Outside(OSError):
    """The path leads outside the folder."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _load_openat2() -> Callable[[int, str, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall
    except (AttributeError, OSError):
        return None

    def openat2(dirfd: int, path: str, flags: int, mode: int) -> int:
        how = _OpenHow(
            flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS
        )
        fd = int(syscall(_SYS_OPENAT2, dirfd, os.fsencode(path), ctypes.byref(how), ctypes.sizeof(how)))
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return fd

    return openat2


_openat2 = _load_openat2()


def open_beneath(
    root: int, root_path: str, path: str, flags: int, mode: int = 0o644, *, make_dirs: bool = False
) -> int:
    """Open ``path`` (relative to the folder ``root_path``, open on ``root``) without ever leaving that folder.

    Raises ``Outside`` if the path, or a link on the way, leads outside; other ``OSError`` as ``open``.
    ``make_dirs`` creates missing parent folders (beneath it too).
    """
    global _openat2
    path = path.lstrip("/") or "."
    if make_dirs:  # the folders on the way (and the folder itself, if a folder is opened)
        parent = path if flags & os.O_DIRECTORY else posixpath.dirname(path)
        if parent:
            os.close(_walk(root, root_path, parent, os.O_RDONLY | os.O_DIRECTORY, 0, make_dirs=True))
    if _openat2 is not None:
        try:
            return _openat2(root, path, flags, mode)
        except OSError as e:
            if e.errno == errno.ENOSYS:
                _openat2 = None  # an older kernel: walk from now on
            elif e.errno not in (errno.EXDEV, errno.EAGAIN):
                raise
            # EXDEV: outside, or an absolute link back inside, which the walk tells apart; EAGAIN: a ".." was
            # met while anything anywhere was renamed, so the kernel could not vouch for it (it says retry)
    return _walk(root, root_path, path, flags, mode)


def _walk(root: int, root_path: str, path: str, flags: int, mode: int, *, make_dirs: bool = False) -> int:
    """Resolve ``path`` one component at a time from ``root``, following links by hand."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    stack = [os.dup(root)]  # the folders from the root down to the current one
    links = 0
    try:
        while parts:
            name = parts.pop(0)
            if name == "..":
                if len(stack) == 1:
                    raise Outside(errno.EXDEV, "leads above the workspace", path)
                os.close(stack.pop())
                continue
            last = not parts
            try:
                fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=stack[-1])
            except FileNotFoundError:
                if last and flags & os.O_CREAT:
                    return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=stack[-1])
                if make_dirs and (not last or flags & os.O_DIRECTORY):
                    os.mkdir(name, 0o755, dir_fd=stack[-1])
                    parts.insert(0, name)
                    continue
                raise
            try:
                if _is_link(fd):
                    links += 1
                    if links > _MAX_LINKS:
                        raise OSError(errno.ELOOP, "too many levels of symbolic links", path)
                    target = os.readlink(name, dir_fd=stack[-1])
                    if target.startswith("/"):
                        if not (target == root_path or target.startswith(root_path + "/")):
                            raise Outside(errno.EXDEV, "a link leads outside the workspace", path)
                        for extra in stack[1:]:
                            os.close(extra)
                        del stack[1:]
                        target = target[len(root_path) :]
                    parts[:0] = [p for p in target.split("/") if p not in ("", ".")]
                    continue
                if last:
                    return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=stack[-1])
                stack.append(
                    os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=stack[-1])
                )
            finally:
                os.close(fd)
        return os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=stack[-1])
    finally:
        for fd in stack:
            os.close(fd)


def _is_link(fd: int) -> bool:
    """Is the ``O_PATH | O_NOFOLLOW`` descriptor ``fd`` a symbolic link (not what it points to)?"""
    return os.stat(fd).st_mode & 0o170000 == 0o120000
