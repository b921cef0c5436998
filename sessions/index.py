"""The session index: every session's metadata in one file, so listing 10,000 sessions reads one
file instead of 10,000.

It is a cache, never the record: each entry keeps the identity of the ``metadata.json`` it was read
from and of the log beside it (inode, size, modification time), and an entry whose files changed (a
log cut short by hand included), or that has no file any more, is read again or dropped on the next
listing; a missing or damaged index is rebuilt from the sessions themselves. Any process may rewrite it
(atomically, by rename); two listing at once write the same content.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zero.errors import ZeroError
from zero.sessions._writer import linked, open_own
from zero.sessions.ids import SESSION_ID
from zero.sessions.models import SessionMetadata
from zero.strictfile import write_file

__all__ = ["INDEX", "Row", "read_index"]

Row = dict[str, Any]
"""A session's metadata as its ``metadata.json`` holds it (camelCase keys)."""

INDEX = ".index.json"
_VERSION = 2  # (1: the metadata file's identity alone)


def read_index(
    root: Path, fresh: Callable[[str], SessionMetadata | None], *, tree: str | None = None
) -> tuple[list[Row], dict[str, str]]:
    """Every readable session under ``root``, as rows, and the damaged ones with what is wrong with them.
    ``fresh(id)`` reads a session whose cached entry cannot be trusted (its file changed or is missing, or
    it says ``pending``/``running``: its process may have died); None: not a session yet (being made).
    ``tree``: only the sessions of the run whose root session that is (a session's ``rootSessionId`` never
    changes, so a cached entry of another run is kept as it is, its files not even looked at)."""
    cached = _load(root / INDEX)
    entries: dict[str, list[Any]] = {}
    damaged: dict[str, str] = {}
    base = str(root)
    try:
        found = [e for e in os.scandir(base) if SESSION_ID.fullmatch(e.name)]
    except OSError:
        return [], {}
    for link in (e for e in found if e.is_symlink()):  # never followed: it may point anywhere
        damaged[link.name] = str(linked(Path(link.path)))
    names = [e.name for e in found if e.is_dir(follow_symlinks=False)]
    changed = False
    kept: dict[str, list[Any]] = {}  # cached entries of other runs (``tree``): saved again, not returned
    for name in names:
        entry = cached.get(name)
        if tree is not None and entry is not None and not _in_tree(entry[1], tree):
            kept[name] = entry
            continue
        path = f"{base}/{name}/"
        key = _identity(path)
        if (
            entry is not None
            and key is not None
            and entry[0] == key
            and entry[1].get("status") not in ("pending", "running")
        ):
            entries[name] = entry
            continue
        changed = changed or entry is not None
        try:
            meta = fresh(name)
        except (ZeroError, ValueError, OSError) as e:  # listed as damaged, never in the cache
            damaged[name] = str(e) or type(e).__name__
            continue
        if meta is not None:
            entries[name] = [_identity(path) or key, meta.to_json()]
            changed = True
    if changed or len(entries) + len(kept) != len(cached):
        _save(root / INDEX, {**kept, **entries})
    rows = [data for _, data in entries.values()]
    if tree is not None:  # (read afresh, maybe of another run: a new session, or a changed file)
        rows = [row for row in rows if _in_tree(row, tree)]
    return rows, damaged


def _in_tree(row: Row, tree: str) -> bool:
    """Whether a row is of the run whose root session is ``tree`` (one that names no root may be)."""
    return row.get("rootSessionId") in (tree, "", None)


def _identity(folder: str) -> list[int] | None:
    """Who the session's two files are now: a change to either, or either gone, and its entry is read again."""
    try:
        meta, log = os.stat(folder + "metadata.json"), os.stat(folder + "events.jsonl")
    except OSError:
        return None
    return [meta.st_ino, meta.st_size, meta.st_mtime_ns, log.st_ino, log.st_size, log.st_mtime_ns]


def _load(path: Path) -> dict[str, list[Any]]:
    try:
        with os.fdopen(open_own(path), "rb") as f:  # (never through a link: it could lead anywhere)
            data = json.loads(f.read())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != _VERSION or not isinstance(data.get("sessions"), dict):
        return {}
    return {k: v for k, v in data["sessions"].items() if isinstance(v, list) and len(v) == 2 and isinstance(v[1], dict)}


def _save(path: Path, entries: dict[str, list[Any]]) -> None:
    data = json.dumps({"version": _VERSION, "sessions": entries}, separators=(",", ":")).encode()
    with contextlib.suppress(OSError):  # a read-only data folder still lists, just without the cache
        write_file(path, data, force=True)  # (a new file of its own, renamed in: never a link's or a FIFO's)
