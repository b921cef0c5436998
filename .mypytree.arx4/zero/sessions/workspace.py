"""Which workspace a recorded session belongs to: the one check every way of resuming goes through
(``zero sessions resume``, the shell, ACP, ``Task {resume}``).

A session is resumed only in the folder it was recorded in. Folders are compared by what the file
system says they are (device and inode), not by spelling: a symlink or ``..`` to the same folder
is the same workspace, and two folders are never one because their names look alike. A recorded
workspace that is missing, relative (the folder it meant cannot be known: joining it to today's
folder would invent one) or gone is refused, and so is any comparison that cannot be made.
"""

from __future__ import annotations

import os
from pathlib import Path

from zero.errors import UsageError
from zero.sessions.models import SessionMetadata

__all__ = ["same_folder", "session_workspace"]


def same_folder(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name the same folder (False when either cannot be looked at)."""
    if os.fspath(a) == os.fspath(b):
        return os.path.isdir(a)
    try:
        first, second = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def session_workspace(meta: SessionMetadata, current: Path) -> Path:
    """The workspace to resume ``meta`` in: ``current``, if it is the folder the session recorded;
    else ``UsageError`` saying what is wrong and what to do."""
    recorded = meta.cwd
    who = f"session {meta.session_id}"
    if not recorded:
        raise UsageError(f"{who} recorded no workspace, so there is no telling which files it worked on")
    if not os.path.isabs(recorded):
        raise UsageError(
            f"{who} recorded its workspace as {recorded!r}, a relative path: the folder it meant cannot be "
            "known, so it is not resumed"
        )
    if not os.path.isdir(recorded):
        raise UsageError(f"{who} worked in {recorded}, which no longer exists; it cannot be resumed there")
    if not same_folder(recorded, current):
        raise UsageError(
            f"{who} belongs to the workspace {recorded}, not {current}: run the command there, or pass --cwd {recorded}"
        )
    return current
