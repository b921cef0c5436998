"""Workspace confinement: every path a tool touches is resolved and checked."""

from __future__ import annotations

import errno
import os
import stat
import weakref
from collections.abc import Sequence
from pathlib import Path

from zero.errors import ToolError
from zero.tools._beneath import Outside, open_beneath
from zero.tools.owns import Owns

__all__ = ["NotFound", "OutsideWorkspace", "Workspace"]


class NotFound(ToolError):
    """The path does not exist (yet)."""


class OutsideWorkspace(ToolError):
    """The path, or a link on the way, leads outside every root."""


class Workspace:
    """The folders tools may touch. The first root is the working directory. ``owns``: the only files the
    file tools may write there (a team member's globs, relative to the root), for ``owner`` (``member 'api'``)."""

    def __init__(self, roots: Sequence[Path | str], *, owns: Owns | None = None, owner: str = ""):
        if not roots:
            raise ValueError("a workspace needs at least one root")
        self.roots = tuple(Path(os.path.realpath(r)) for r in roots)
        self.owns = owns
        self.owner = owner
        self._fds: dict[Path, int] = {}
        weakref.finalize(self, _close_all, self._fds)

    @property
    def root(self) -> Path:
        return self.roots[0]

    def owned_by(self, owns: Owns, owner: str) -> Workspace:
        """The same folders, where the file tools write only the files ``owns`` names, for ``owner``."""
        return Workspace(self.roots, owns=owns, owner=owner)

    def unowned(self, real: str) -> str | None:
        """Why a write landing at the real path ``real`` is not this workspace's owner's to make (None: it is)."""
        if self.owns is None:
            return None
        relative = os.path.relpath(real, self.root)
        if self.owns.owns(relative.replace(os.sep, "/")):
            return None
        shown = real if relative.startswith("..") else relative
        return (
            f"{shown} is outside the files {self.owner} owns ({', '.join(self.owns.globs)}); "
            "write only those, and leave this change to the member that owns it"
        )

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

    def open(self, path: str, flags: int = os.O_RDONLY, mode: int = 0o644, *, make_dirs: bool = False) -> int:
        """A descriptor of ``path`` (relative to the root), resolved and opened in one step: a link is followed
        only where it stays inside, so no race (a folder swapped for a link) can lead outside. The caller closes it.
        """
        root, relative = self._locate(path)
        try:
            return open_beneath(self._root_fd(root), str(root), relative, flags, mode, make_dirs=make_dirs)
        except Outside:
            raise self._outside(path) from None
        except FileNotFoundError:
            raise NotFound(f"{path} does not exist") from None
        except NotADirectoryError:
            raise ToolError(f"{path} is not a directory (or a part of it is not)") from None
        except IsADirectoryError:
            raise ToolError(f"{path} is a directory") from None
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise ToolError(f"{path}: too many levels of symbolic links") from None
            raise ToolError(f"{path}: {e.strerror}") from None

    def read_regular(self, path: str, limit: int | None = None) -> bytes:
        """The bytes of the regular file ``path`` (at most ``limit`` and one more, so a longer file shows), read
        as a repository's file must be: a link is followed only where it stays inside (else ``OutsideWorkspace``),
        and only a regular file is read (a FIFO or a device could block or never end)."""
        fd = self.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        kind = stat.S_IFMT(os.fstat(fd).st_mode)
        if kind != stat.S_IFREG:
            os.close(fd)
            raise ToolError(f"it is not a regular file but {_KINDS.get(kind, 'a special file')}")
        with os.fdopen(fd, "rb", buffering=0) as f:
            if limit is None:
                return f.read()
            chunks, size = [], 0
            while size <= limit and (chunk := f.read(limit + 1 - size)):
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks)

    def _locate(self, path: str) -> tuple[Path, str]:
        """The root ``path`` is in, and ``path`` relative to it (for ``open``)."""
        if not path or "\x00" in path:
            raise ToolError("path is empty or contains a NUL byte")
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            return self.root, str(candidate)
        lexical = Path(os.path.normpath(candidate))
        for real in (lexical, Path(os.path.realpath(candidate))):
            for root in self.roots:
                if real == root or real.is_relative_to(root):
                    return root, str(real.relative_to(root))
        raise self._outside(path)

    def _outside(self, path: str) -> OutsideWorkspace:
        return OutsideWorkspace(
            f"{path!r} is outside the workspace ({', '.join(str(r) for r in self.roots)}); "
            "only paths inside it can be read or written"
        )

    def _root_fd(self, root: Path) -> int:
        if root not in self._fds:
            self._fds[root] = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        return self._fds[root]

    def shown(self, path: str) -> str:
        """``path`` as a user would name it: relative to the root, tidied up."""
        root, relative = self._locate(path)
        tidy = os.path.normpath(relative)
        return tidy if root == self.root else str(root / tidy)


_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def _close_all(fds: dict[Path, int]) -> None:
    for fd in fds.values():
        os.close(fd)
