"""The session index: every session's metadata in one file, so listing 10,000 sessions reads one
file instead of 10,000.

It is a cache, never the record: each entry keeps the identity of the ``metadata.json`` it was read
from (inode, size, modification time), and an entry whose file changed, or that has no file any
more, is read again or dropped on the next listing; a missing or damaged index is rebuilt from the
sessions themselves. Any process may rewrite it (atomically, by rename); two listing at once write
the same content.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zero.errors import ZeroError
from zero.sessions.ids import SESSION_ID
from zero.sessions.models import SessionMetadata

__all__ = ["INDEX", "Row", "read_index"]

Row = dict[str, Any]
"""A session's metadata as its ``metadata.json`` holds it (camelCase keys)."""

INDEX = ".index.json"
_VERSION = 1


def read_index(root: Path, fresh: Callable[[str], SessionMetadata]) -> list[Row]:
    """Every readable session under ``root``, as rows. ``fresh(id)`` reads a session whose cached entry
    cannot be trusted: its file changed, or it says ``pending``/``running`` (its process may have died)."""
    cached = _load(root / INDEX)
    entries: dict[str, list[Any]] = {}
    changed = False
    base = str(root)
    try:
        names = [e.name for e in os.scandir(base) if SESSION_ID.fullmatch(e.name)]
    except OSError:
        return []
    for name in names:
        path = f"{base}/{name}/metadata.json"
        key = _identity(path)
        if key is None:
            changed = True
            continue
        entry = cached.get(name)
        if entry is not None and entry[0] == key and entry[1].get("status") not in ("pending", "running"):
            entries[name] = entry
            continue
        try:
            meta = fresh(name)
        except (ZeroError, ValueError, OSError):  # damaged or half-made: not listed, as before
            changed = True
            continue
        entries[name] = [_identity(path) or key, meta.to_json()]
        changed = True
    if changed or len(entries) != len(cached):
        _save(root / INDEX, entries)
    return [data for _, data in entries.values()]


def _identity(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def _load(path: Path) -> dict[str, list[Any]]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != _VERSION or not isinstance(data.get("sessions"), dict):
        return {}
    return {k: v for k, v in data["sessions"].items() if isinstance(v, list) and len(v) == 2 and isinstance(v[1], dict)}


def _save(path: Path, entries: dict[str, list[Any]]) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps({"version": _VERSION, "sessions": entries}, separators=(",", ":")))
        os.replace(tmp, path)
    except OSError:  # a read-only data folder still lists, just without the cache
        with contextlib.suppress(OSError):
            tmp.unlink()
