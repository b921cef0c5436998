"""File systems a test makes as root: a small tmpfs to fill, a read-only view of a folder, the mounts a host
makes. Where mounting is not permitted (no CAP_SYS_ADMIN), the test is skipped and says why (``mounted``, for
tests that need root anyway, fails instead)."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

__all__ = ["fill", "mounted", "read_only_view", "tmpfs"]


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"mount {' '.join(args)} is not permitted here: {done.stderr.strip()}")


@contextmanager
def _mounted(path: Path) -> Iterator[Path]:
    try:
        yield path
    finally:
        # lazily: a session writer of the test's own process may still hold a log open there
        subprocess.run(["umount", "--lazy", str(path)], check=True)


@contextmanager
def mounted(*mounts: list[str]) -> Iterator[None]:
    """Each ``mount`` command's arguments run in turn (as a host does: a container's volumes), all unmounted
    afterwards, the last first."""
    with ExitStack() as made:
        for mount in mounts:
            subprocess.run(["mount", *mount], check=True)
            made.enter_context(_mounted(Path(mount[-1])))
        yield


@contextmanager
def tmpfs(path: Path, size: str = "1m") -> Iterator[Path]:
    """A tmpfs of ``size`` at ``path`` (made), unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    with _mounted(path):
        yield path


@contextmanager
def read_only_view(source: Path, path: Path) -> Iterator[Path]:
    """``source`` seen read-only at ``path`` (a bind mount: root's writes are refused too)."""
    path.mkdir(parents=True, exist_ok=True)
    _mount("--bind", str(source), str(path))
    with _mounted(path):
        _mount("-o", "remount,bind,ro", str(path))
        yield path


def fill(folder: Path, leave: int) -> Path:
    """Fill the file system of ``folder`` up, then free ``leave`` bytes again; the filler file is returned
    (remove it to make room)."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for block in (1 << 16, 1 << 12):
            try:
                while True:
                    os.write(fd, b"\0" * block)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
        os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
    finally:
        os.close(fd)
    free = os.statvfs(folder)
    assert free.f_bavail * free.f_frsize == leave, "the file system did not give back what the filler freed"
    return filler
