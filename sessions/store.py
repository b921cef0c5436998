"""The on-disk session store: ``sessions/<id>/metadata.json`` + ``events.jsonl``.

Durability rules:

* A batch of events is serialised first, then written with ONE ``write`` under an
  exclusive ``flock`` (on ``events.jsonl``). A reader never sees half a batch, and a
  crash of the process loses no batch the writer has written.
* The log is fsynced before ``metadata.json`` is replaced atomically (see ``_replace``),
  so the metadata never counts an event the disk might not hold.
* Sequence numbers come from the log itself (its last complete line), so a stale
  metadata file cannot produce a duplicate; they are contiguous from 1.
* A torn last line (a crash mid-write) is skipped on read and cut off before the
  next append; any other corrupt line is an error naming the line.

One writer thread per store does every write, in the order they were asked for, so
callers on an event loop hand a batch over without waiting (``submit``) and batches
that queue up for a session while the disk is busy are committed together.
``append``, ``update``, ``create`` and ``flush`` wait, and sync the log and write the
metadata at once; so does a run's last batch. Other submitted batches reach the disk
(fsync + metadata) within ``metadata_interval`` seconds: like SQLite's WAL with
``synchronous=NORMAL``, a power cut may lose the last seconds of a running session,
never its consistency. (An fsync costs ~0.15 ms of CPU here; a swarm appends thousands
of batches.)
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from zero.errors import SessionError
from zero.sessions._writer import Change, Request, Writer, copy_metadata, read_metadata
from zero.sessions.ids import validate_session_id
from zero.sessions.models import SessionMetadata, now_iso
from zero.tools import redact

__all__ = ["SessionStore", "default_data_dir"]

Event = dict[str, Any]


def default_data_dir() -> Path:
    """``$ZERO_HOME``, else ``${XDG_DATA_HOME:-~/.local/share}/zero``."""
    if home := os.environ.get("ZERO_HOME"):
        return Path(home).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "zero"


class SessionStore:
    """Sessions under ``root`` (``<data dir>/sessions``). Safe across threads and processes."""

    def __init__(self, root: Path | str, *, redactor: Callable[[str], str] = redact, metadata_interval: float = 5.0):
        self.root = Path(root)
        self._writer = Writer(self.root, redactor, metadata_interval)
        _STORES.add(self)

    @classmethod
    def default(cls) -> SessionStore:
        return cls(default_data_dir() / "sessions")

    def path(self, session_id: str) -> Path:
        return self.root / validate_session_id(session_id)

    def exists(self, session_id: str) -> bool:
        return (self.path(session_id) / "metadata.json").is_file()

    # -- writing -----------------------------------------------------------------

    def create(self, meta: SessionMetadata) -> SessionMetadata:
        """Create the session's folder, log and metadata; fails if the session exists."""
        self.path(meta.session_id)
        return self._result(Request("create", meta.session_id, meta=copy_metadata(meta), write_meta=True))

    def append(
        self, session_id: str, events: Sequence[tuple[str, dict[str, Any]]], update: Change | None = None
    ) -> SessionMetadata:
        """Append ``(type, payload)`` events as one durable batch, apply ``update``, write the metadata."""
        self.path(session_id)
        return self._result(Request("append", session_id, list(events), update, now_iso(), write_meta=True))

    def _result(self, request: Request) -> SessionMetadata:
        meta = self._writer.call(request)
        assert meta is not None  # a create or an append always answers with the metadata
        return meta

    def update(self, session_id: str, change: Change) -> SessionMetadata:
        """Change the metadata under the session's lock."""
        return self.append(session_id, (), change)

    def submit(
        self,
        session_id: str,
        events: Sequence[tuple[str, dict[str, Any]]] = (),
        update: Change | None = None,
        *,
        final: bool = False,
    ) -> None:
        """Queue a batch (and a metadata change) for the writer and return at once.

        Batches are committed in the order they were submitted; a failure is raised by the
        next ``submit`` to that session or the next ``flush``. The metadata follows within
        ``metadata_interval``, or with the batch itself if ``final`` (a run's last batch).
        """
        self.path(session_id)
        self._writer.put(Request("append", session_id, list(events), update, now_iso(), write_meta=final))

    def flush(self, session_id: str | None = None) -> None:
        """Wait until everything submitted so far is durable and the metadata of ``session_id``
        (of every session, if None) is written."""
        self._writer.call(Request("flush", session_id, write_meta=True))

    # -- reading -----------------------------------------------------------------

    def metadata(self, session_id: str) -> SessionMetadata:
        """The metadata, with every batch submitted before this call applied."""
        folder = self.path(session_id)
        meta = self._writer.call(Request("read", session_id))
        return meta if meta is not None else read_metadata(folder)

    def events(self, session_id: str) -> list[Event]:
        """Every event in order; a torn last line is skipped, other bad lines are errors."""
        log = self.path(session_id) / "events.jsonl"
        self._writer.call(Request("read", session_id))
        if not self.exists(session_id):
            raise SessionError(f"session {session_id} not found in {self.root}")
        try:
            data = log.read_bytes()
        except FileNotFoundError:
            return []
        return list(_parse(data, log))

    def list(self) -> list[SessionMetadata]:
        """All readable sessions, newest first."""
        found = []
        if self.root.is_dir():
            self.flush()
            for folder in self.root.iterdir():
                try:
                    found.append(read_metadata(folder))
                except (SessionError, ValueError):
                    continue
        return sorted(found, key=lambda m: (m.updated_at, m.session_id), reverse=True)


def _parse(data: bytes, log: Path) -> Iterator[Event]:
    # Everything after the last newline is a write cut short: it never committed.
    for number, line in enumerate(data.split(b"\n")[:-1], 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except ValueError as e:
            raise SessionError(f"{log}: line {number} is not valid JSON ({e})") from e


_STORES: weakref.WeakSet[SessionStore] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    """Batches submitted without waiting reach the disk even if the program forgot to flush."""
    for store in list(_STORES):
        if store._writer.busy():
            with contextlib.suppress(Exception):
                store.flush()
