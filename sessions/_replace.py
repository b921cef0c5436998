"""Replacing a small file atomically, and cheaply where the OS allows it.

The classic way, a temp file renamed over the target, creates an inode and frees one on
every write; on ext4 that costs ~0.3 ms of CPU (the rename also forces the new data's blocks
to be allocated). Linux can instead swap two names in one step (``renameat2`` with
``RENAME_EXCHANGE``): the new content is written in place into a spare file next to the
target and the two names are exchanged, ~0.015 ms, nothing created or freed. The spare then
holds the previous version, ready to be overwritten next time.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import sys
from collections.abc import Callable

__all__ = ["replace_file"]

BLOCK = 4096
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV}  # EXDEV: overlayfs


def _load_renameat2() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        function: Callable[..., int] = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # a C library older than glibc 2.28, or none to load
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]  # type: ignore[attr-defined]
    function.restype = ctypes.c_int  # type: ignore[attr-defined]
    return function


_renameat2 = _load_renameat2()


def replace_file(path: str, spare: str, data: bytes, *, exists: bool) -> None:
    """Make ``path`` hold ``data``, atomically for readers: they see the old content or the new.

    ``spare`` is the file next to ``path`` used for the swap (it keeps the previous version);
    ``exists`` says whether ``path`` is there to swap with (else it is simply renamed into place, and
    the spare made again at once: its blocks are held from then on, so a later swap needs no new room,
    and a full disk still takes the last word of a session). Neither file is fsynced: the caller's own
    log is the durable record.
    """
    global _renameat2
    if _renameat2 is not None and exists:
        # Padded to whole blocks, so the spare's length never changes between versions: after a
        # power cut it holds one version or the other, never an old body with a new length.
        data += b" " * (-len(data) % BLOCK)
        fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)  # (a link: ELOOP)
        try:
            if os.fstat(fd).st_nlink > 1:  # another name for the file (a hard link): not the spare's own
                raise OSError(errno.EMLINK, "the spare file has another name (a hard link)", spare)
            os.pwrite(fd, data, 0)
            if os.fstat(fd).st_size != len(data):
                os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        if _renameat2(_AT_FDCWD, spare.encode(), _AT_FDCWD, path.encode(), _RENAME_EXCHANGE) == 0:
            return
        code = ctypes.get_errno()
        if code not in _UNSUPPORTED:
            raise OSError(code, os.strerror(code), path)
        _renameat2 = None  # this system cannot swap names: fall back for good
    if _renameat2 is not None:
        data += b" " * (-len(data) % BLOCK)
    _write_new(spare, data)
    os.replace(spare, path)
    if _renameat2 is not None:
        _write_new(spare, data)  # the spare of the swaps to come, made now: its blocks are held from here on


def _write_new(path: str, data: bytes) -> None:
    with contextlib.suppress(FileNotFoundError):  # (made new: never a link's or another name's file)
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
