"""Session stores: the protocol every store keeps, and the one on disk.

On disk a session is ``sessions/<id>/metadata.json`` + ``events.jsonl``. Durability rules:

* A batch of events is serialised first, then written with ONE ``write`` under an
  exclusive ``flock`` (on ``events.jsonl``). A reader never sees half a batch, and a
  crash of the process loses no batch the writer has written.
* The log is fsynced before ``metadata.json`` is replaced atomically (see ``_replace``),
  so the metadata never counts an event the disk might not hold.
* Sequence numbers come from the log itself (its last complete line), so a stale
  metadata file cannot produce a duplicate; they are contiguous from 1.
* A torn last line (a crash mid-write) is skipped on read and cut off before the
  next append; any other corrupt line is an error naming the line.
* Secrets are redacted from every string value before it is encoded; keys and the
  structure of a record are never touched.
* A write the disk refuses (full, a file-size limit, read-only, failing) is taken back
  whole, and nothing more is written to that session: its log stays a prefix of what
  happened. Its metadata says ``failed`` where the disk still takes that (the spare it
  is swapped with holds its blocks from the start), and the run learns it from ``check``
  before its next model call and from ``written`` before its next side effect.

One writer thread per store does every write, in the order they were asked for, so
callers on an event loop hand a batch over without waiting (``submit``) and batches
that queue up for a session while the disk is busy are committed together.
``append``, ``create`` and ``flush`` wait, and sync the log and write the metadata at
once; so does a run's last batch. Other submitted batches reach the disk (fsync +
metadata) within ``metadata_interval`` seconds: like SQLite's WAL with
``synchronous=NORMAL``, a power cut may lose the last seconds of a running session,
never its consistency.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from zero.agent import Event
from zero.errors import ConfigError, SessionError, SessionWriteError
from zero.sessions._writer import (
    Request,
    Writer,
    _read_all,
    check_log,
    check_whole,
    copy_metadata,
    derive_interrupted,
    last_sequence,
    linked,
    missing_log,
    missing_metadata,
    open_lease,
    open_own,
    parse_log,
    read_metadata,
    read_session_file,
    unheld,
)
from zero.sessions.ids import validate_session_id
from zero.sessions.index import Row, read_index
from zero.sessions.models import SessionMetadata, StoredEvent, now_iso, record_of
from zero.tools import Redactor

__all__ = ["FileSessionStore", "SessionStore", "default_data_dir", "parse_log", "records_json"]


class SessionStore(Protocol):
    """Where sessions live. ``submit`` never waits; everything else sees what was submitted before it."""

    def create(self, meta: SessionMetadata) -> SessionMetadata:
        """Create a session; fails with ``SessionError`` if it exists."""
        ...

    def create_all(self, metas: Sequence[SessionMetadata]) -> list[SessionMetadata]:
        """Create sessions together (a team's: one wait, not one each); ``SessionError`` for the first that
        exists (the others are made)."""
        ...

    def append(self, session_id: str, events: Sequence[Event]) -> SessionMetadata:
        """Append ``events`` as one batch and wait until it is durable; the new metadata."""
        ...

    def submit(self, session_id: str, events: Sequence[Event], *, final: bool = False) -> None:
        """Queue a batch and return at once (``final``: a run's last batch, its metadata written with it)."""
        ...

    def flush(self, session_id: str | None = None) -> None:
        """Wait until everything submitted so far is durable."""
        ...

    def written(self, session_id: str) -> None:
        """Wait until everything submitted so far for the session is written (not necessarily fsynced):
        a tool with a side effect runs only once its call is in the log."""
        ...

    async def awritten(self, session_id: str) -> None:
        """``written`` for a caller on an event loop (it waits there)."""
        ...

    def check(self, session_id: str) -> None:
        """Raise ``SessionWriteError`` if a batch of the session could not be written (never waits)."""
        ...

    def acquire(self, session_id: str) -> None:
        """Hold the session for a run of this process (resume); ``SessionError`` if another process runs it."""
        ...

    def release(self, session_id: str) -> None:
        """This process's run of the session is over (after everything submitted for it)."""
        ...

    def held(self, session_id: str) -> bool:
        """Whether a process (this one included) runs the session now: it holds the session."""
        ...

    def exists(self, session_id: str) -> bool: ...

    def metadata(self, session_id: str) -> SessionMetadata: ...

    def events(self, session_id: str) -> list[StoredEvent]:
        """Every event in order; ``SessionError`` if the log lost events its metadata counts (it is damaged)."""
        ...

    def events_since(self, session_id: str, cursor: int) -> tuple[list[StoredEvent], int]:
        """The events after ``cursor`` (0: from the start) and the cursor to pass next time."""
        ...

    def rows(self, tree: str | None = None) -> list[Row]:
        """``list()`` as ``metadata.json`` holds it (camelCase), unvalidated: fast for many sessions. ``tree``: only
        the sessions whose ``rootSessionId`` is that (a run's, at any depth), whatever else the store holds."""
        ...

    def list(self) -> list[SessionMetadata]:
        """Every readable session, newest first."""
        ...


def default_data_dir() -> Path:
    """``$ZERO_HOME``, else ``${XDG_DATA_HOME:-~/.local/share}/zero``."""
    if home := os.environ.get("ZERO_HOME"):
        return Path(home).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "zero"


class FileSessionStore:
    """Sessions under ``root`` (``<data dir>/sessions``). Safe across threads and processes."""

    def __init__(
        self, root: Path | str, *, redactor: Callable[[str], str] | None = None, metadata_interval: float = 5.0
    ):
        self.root = Path(root)
        self._redact = redactor or Redactor()
        self._writer = Writer(self.root, self._redact, metadata_interval)
        _STORES.add(self)

    @classmethod
    def default(cls, *, writable: bool = False) -> FileSessionStore:
        """The sessions under ``$ZERO_HOME`` (``ConfigError`` if that, or its ``sessions``, is not a folder,
        or, for a command that writes, if no file can be made there)."""
        home = default_data_dir()
        for path in (home, home / "sessions"):
            if path.exists() and not path.is_dir():
                where = "ZERO_HOME" if path == home and os.environ.get("ZERO_HOME") else "the data folder"
                raise ConfigError(
                    f"{where} {path} is a file, not a folder: point ZERO_HOME at a folder, or move the file"
                )
        if writable:
            _check_writable(home)
        return cls(home / "sessions")

    def path(self, session_id: str) -> Path:
        """The session's folder; ``SessionError`` if a link stands there (Zero makes its sessions' folders itself:
        nothing is read or written through one, which would reach wherever it points)."""
        path = self.root / validate_session_id(session_id)
        if path.is_symlink():
            raise linked(path)
        return path

    def exists(self, session_id: str) -> bool:
        """Its metadata file is there (it may be damaged: reading it says so); not if a link stands there."""
        folder = self.root / validate_session_id(session_id)
        return not folder.is_symlink() and os.path.lexists(folder / "metadata.json")

    # -- writing -----------------------------------------------------------------

    def create(self, meta: SessionMetadata) -> SessionMetadata:
        return self.create_all([meta])[0]

    def create_all(self, metas: Sequence[SessionMetadata]) -> list[SessionMetadata]:
        requests = []
        for meta in metas:
            validate_session_id(meta.session_id)
            made = copy_metadata(meta)
            made.title = self._redact(made.title)  # (a prompt or a goal: a secret in it never reaches the list)
            requests.append(Request(kind="create", session_id=meta.session_id, meta=made, write_meta=True))
        made_all = self._writer.call_all(requests)
        assert all(meta is not None for meta in made_all)  # a create always answers with the metadata
        return [meta for meta in made_all if meta is not None]

    def append(self, session_id: str, events: Sequence[Event]) -> SessionMetadata:
        validate_session_id(session_id)
        return self._result(
            Request(kind="append", session_id=session_id, events=list(events), created=now_iso(), write_meta=True)
        )

    def _result(self, request: Request) -> SessionMetadata:
        meta = self._writer.call(request)
        assert meta is not None  # a create or an append always answers with the metadata
        return meta

    def submit(self, session_id: str, events: Sequence[Event], *, final: bool = False) -> None:
        """Queue a batch for the writer and return at once.

        Batches are committed in the order they were submitted; a failure is raised by the
        next ``submit`` to that session or the next ``flush``. The metadata follows within
        ``metadata_interval``, or with the batch itself if ``final`` (a run's last batch).
        """
        validate_session_id(session_id)  # (no Path made: a submit is on every event's way)
        self._writer.put(
            Request(kind="append", session_id=session_id, events=list(events), created=now_iso(), write_meta=final)
        )

    def flush(self, session_id: str | None = None) -> None:
        """Wait until everything submitted so far is durable and the metadata of ``session_id``
        (of every session, if None) is written."""
        self._writer.call(Request(kind="flush", session_id=session_id, write_meta=True))

    def written(self, session_id: str) -> None:
        self._writer.call(Request(kind="write", session_id=self._checked(session_id)))

    async def awritten(self, session_id: str) -> None:
        await self._writer.acall(Request(kind="write", session_id=self._checked(session_id)))

    def check(self, session_id: str) -> None:
        self._writer.check(session_id)

    def acquire(self, session_id: str) -> None:
        """Take the session's lease for a run of this process; a run that died before is repaired first
        (its metadata rebuilt from the log, its status ``interrupted``)."""
        self._writer.call(Request(kind="lease", session_id=self._checked(session_id)))

    def release(self, session_id: str) -> None:
        self._writer.put(Request(kind="release", session_id=self._checked(session_id), write_meta=True))

    def held(self, session_id: str) -> bool:
        if session_id in self._writer.leases:
            return True
        folder = self.root / validate_session_id(session_id)
        if folder.is_symlink():
            return False  # (a link is nobody's run)
        try:
            return not unheld(folder)
        except SessionError:  # a link or a folder in the lease's place: no process can hold it
            return False

    def _checked(self, session_id: str) -> str:
        self.path(session_id)
        return session_id

    # -- reading -----------------------------------------------------------------

    def metadata(self, session_id: str) -> SessionMetadata:
        """The metadata, with every batch submitted before this call applied. A session whose run a process
        that died left ``running`` (or ``pending``, before it wrote its metadata) is repaired on the way: rebuilt
        from its log, ``interrupted``. One that never ran (closed before it ran, or made and never run) stays
        ``pending``."""
        folder = self.path(session_id)
        meta = self._writer.call(Request(kind="read", session_id=session_id))
        meta = meta if meta is not None else read_metadata(folder)
        if meta.status in ("pending", "running") and session_id not in self._writer.leases and unheld(folder):
            try:
                meta = self._writer.call(
                    Request(kind="repair", session_id=session_id, write_meta=True)
                ) or read_metadata(folder)
            except SessionWriteError:  # a read-only or full disk: say what the repair would store
                meta = derive_interrupted(folder)
        return meta

    def events(self, session_id: str) -> list[StoredEvent]:
        """Every event in order; a torn last line is skipped, other bad lines are errors, and so is a log that
        holds less than the metadata counts (cut short, emptied or replaced: what it lost is lost)."""
        return self.events_since(session_id, 0)[0]

    def events_since(self, session_id: str, cursor: int) -> tuple[list[StoredEvent], int]:
        """The events after byte ``cursor`` of the log (only whole lines); the next cursor."""
        folder = self.path(session_id)
        log = folder / "events.jsonl"
        self._writer.call(Request(kind="read", session_id=session_id))
        if not self.exists(session_id):
            raise SessionError(f"session {session_id} not found in {self.root}")
        counted = read_metadata(folder) if cursor == 0 else None  # (before the log: it never counts more)
        try:
            data = read_session_file(log, cursor)
        except FileNotFoundError:
            raise missing_log(log) from None
        end = data.rfind(b"\n") + 1  # what follows the last newline is a write cut short (or under way)
        whole = 1 if cursor == 0 else None  # (read whole: numbered 1, 2, ... with none missing)
        events = list(parse_log(data[:end], log, first_line=_line_at(log, cursor), sequence=whole))
        if counted is not None:
            last = events[-1].sequence if events else 0
            if last < counted.event_count:  # (its last lines may be of kinds a newer Zero wrote: skipped above)
                last = last_sequence(log)
            check_whole(counted, last, log)
        return events, cursor + end

    def remove(self, session_id: str, *, keep: Callable[[SessionMetadata], bool] | None = None) -> bool:
        """Delete the session's folder, unless a process runs it (holds its lease) or ``keep(its metadata)``:
        both are checked holding the lease, so no run can start in between. False if it was left (or gone). A link
        in a session's place is removed itself, never what it points to."""
        folder = self.root / validate_session_id(session_id)
        if folder.is_symlink():
            folder.unlink()
            return True
        try:
            fd = open_lease(folder)
        except FileNotFoundError:
            return False
        except SessionError:  # a link or a stranger in the lease's place: no run can hold it, it goes
            fd = None
        try:
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return False
            if keep is not None and keep(read_metadata(folder)):
                return False
            shutil.rmtree(folder)  # (which never follows a link: one planted inside is removed, not its target)
        except OSError as e:
            raise SessionError(f"cannot remove {folder}: {e.strerror or e}") from e
        finally:
            if fd is not None:
                os.close(fd)
        return True

    def rows(self, tree: str | None = None) -> list[Row]:
        """All readable sessions (``tree``: of that run) as their ``metadata.json`` holds them, newest first: from
        the index, checked against each session's files (fast for many sessions; validate only what you show)."""
        return self.listing(tree)[0]

    def listing(self, tree: str | None = None) -> tuple[list[Row], dict[str, str]]:
        """``rows(tree)``, and the sessions that cannot be read, with why (their metadata is missing or damaged,
        or a dead run's log is)."""
        if not self.root.is_dir():
            return [], {}
        self.flush()

        def fresh(session_id: str) -> SessionMetadata | None:
            folder = self.root / session_id
            if not os.path.lexists(folder / "metadata.json"):
                if not unheld(folder):
                    return None  # being made: its metadata follows its lease
                raise missing_metadata(folder)
            meta = read_metadata(folder)
            if meta.status in ("pending", "running"):
                return self.metadata(session_id)  # (a dead run's is repaired: its log is checked then)
            check_log(meta, folder / "events.jsonl")
            return meta

        found, damaged = read_index(self.root, fresh, tree=tree)
        rows = sorted(found, key=lambda m: (m.get("updatedAt", ""), m.get("sessionId", "")), reverse=True)
        return rows, damaged

    def list(self) -> list[SessionMetadata]:
        """All readable sessions, newest first."""
        return [SessionMetadata.model_validate(row) for row in self.rows()]


def _check_writable(home: Path) -> None:
    """Make a file in ``home/sessions`` and remove it: the one proof that runs can be recorded there (as root,
    mode bits say nothing; a read-only mount or an immutable folder do)."""
    sessions = home / "sessions"
    try:
        sessions.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=sessions)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        where = f"ZERO_HOME={home}" if os.environ.get("ZERO_HOME") else f"the data folder {home}"
        reason = (e.strerror or type(e).__name__).lower()
        raise ConfigError(f"{where} is not writable: {reason}; set ZERO_HOME to a writable folder") from e


def _line_at(log: Path, offset: int) -> int:
    """How many lines come before byte ``offset`` of the log (for error messages)."""
    if offset == 0:
        return 0
    fd = open_own(log)  # (as it was just read: never through a link)
    try:
        return _read_all(fd, offset).count(b"\n")
    finally:
        os.close(fd)


_STORES: weakref.WeakSet[FileSessionStore] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    """Batches submitted without waiting reach the disk even if the program forgot to flush."""
    for store in list(_STORES):
        if store._writer.busy():
            with contextlib.suppress(Exception):
                store.flush()


def records_json(events: Sequence[StoredEvent], session_id: str) -> list[dict[str, Any]]:
    """The events as the log's records (for ``--json`` output)."""
    return [record_of(session_id, e.sequence, e.created_at, e.event) for e in events]
