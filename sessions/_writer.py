"""The session store's writer: one thread that commits every write in order, and the sessions it
keeps open. ``store.SessionStore`` is its public face; the rules it keeps are written there."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from zero.agent import Event, StatusChanged, decode_event
from zero.errors import SessionError
from zero.sessions._replace import replace_file
from zero.sessions.models import SessionMetadata, StoredEvent, apply_event, now_iso, record_of
from zero.tools import redact_values

MAX_OPEN = 256  # sessions whose log stays open between commits
MAX_QUEUED = 4096  # requests waiting for the writer before `submit` waits for room
IDLE_SECONDS = 2.0  # the writer thread ends after this long with nothing to do
GATHER_SECONDS = 0.01  # after a round, batches that nobody waits for gather this long before the next


@dataclass(eq=False)
class Request:
    kind: Literal["create", "append", "flush", "read", "write", "lease", "release", "repair"]
    session_id: str | None
    events: Sequence[Event] = ()
    created: str = ""
    write_meta: bool = False
    meta: SessionMetadata | None = None
    done: threading.Event | None = None
    result: SessionMetadata | None = None
    error: BaseException | None = None


class Writer:
    """The thread that commits requests in order, and the sessions it keeps open."""

    def __init__(self, root: Path, redactor: Callable[[str], str], interval: float):
        self.root = root
        self.redact = functools.partial(redact_values, redactor)
        self.interval = interval
        self.lock = threading.Lock()
        self.work = threading.Condition(self.lock)  # the writer waits here for requests
        self.room = threading.Condition(self.lock)  # submitters wait here while the queue is full
        self.queue: list[Request] = []
        self.current: list[Request] = []  # the requests of the round being written
        self.thread: threading.Thread | None = None
        self.idle = False  # the writer sleeps until asked: a new batch must wake it
        self.failed: dict[str, BaseException] = {}  # errors of submitted batches, not yet raised
        self.logs: OrderedDict[str, OpenLog] = OrderedDict()  # owned by the writer thread
        self.dirty: dict[str, OpenLog] = {}  # open sessions whose metadata.json is behind
        self.due_at = math.inf  # no dirty session's metadata is due before this (monotonic clock)
        self.root_made = False
        self.leases: dict[str, int] = {}  # the sessions this process runs, and their lease's fd

    # -- the callers' side (any thread) -----------------------------------------

    def put(self, request: Request) -> None:
        with self.lock:
            if request.session_id in self.failed:
                raise self.failed.pop(request.session_id)
            while len(self.queue) >= MAX_QUEUED:
                self.room.wait()
            self.queue.append(request)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="zero-session-writer", daemon=True)
                self.thread.start()
            elif self.idle or request.done is not None:
                self.work.notify()  # else the writer takes it after gathering (no wake-up per batch)

    def call(self, request: Request) -> SessionMetadata | None:
        # With no writer thread, nothing is queued, unwritten or open: a read, flush or write has no wait.
        if request.kind not in ("read", "flush", "write") or self.busy():
            request.done = threading.Event()
            self.put(request)
            request.done.wait()
        if request.error is not None:
            raise request.error
        if request.kind == "flush":
            with self.lock:
                keys = list(self.failed) if request.session_id is None else [request.session_id]
                errors = [self.failed.pop(k) for k in keys if k in self.failed]
            if errors:
                raise errors[0]
        return request.result

    def busy(self) -> bool:
        with self.lock:
            return self.thread is not None

    # -- the writer thread -------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as e:  # a bug, not a disk error (those are the requests' own): never hang callers
            with self.lock:
                self.thread = None
                stranded, self.queue = self.current + self.queue, []
                self.failed.setdefault("", e)
            for request in stranded:
                if request.done is not None and not request.done.is_set():
                    request.error = e
                    request.done.set()
            raise

    def _loop(self) -> None:
        idle_since = time.monotonic()
        while True:
            with self.lock:
                if not self.queue:
                    if not self.dirty and time.monotonic() - idle_since >= IDLE_SECONDS:
                        self._close_all()
                        self.thread = None
                        return
                    self.idle = True
                    self.work.wait(min(IDLE_SECONDS, max(0.0, self.due_at - time.monotonic())))
                    self.idle = False
                requests, self.queue = self.queue, []
                self.current = requests
                self.room.notify_all()
            if requests:
                self._process(requests)
                idle_since = time.monotonic()
            if time.monotonic() >= self.due_at:
                self._write_due()
            if requests:
                with self.lock:  # let more batches gather, unless someone is waiting
                    if not any(r.done for r in self.queue):
                        self.work.wait(GATHER_SECONDS)

    def _process(self, requests: list[Request]) -> None:
        by_session: dict[str | None, list[Request]] = {}
        for request in requests:  # sessions in the order they first asked
            by_session.setdefault(request.session_id, []).append(request)
        everything = by_session.pop(None, [])
        for session_id, mine in by_session.items():
            assert session_id is not None
            self._commit(session_id, mine)
        if everything:
            self._settle(everything, self._write_all_dirty)

    def _commit(self, session_id: str, requests: list[Request]) -> None:
        def work() -> SessionMetadata | None:
            kinds = {r.kind for r in requests}
            if requests[0].kind == "create":
                assert requests[0].meta is not None
                log = self._create(self.root / session_id, requests[0].meta)
            elif kinds <= {"read", "flush", "write"} and session_id not in self.logs:
                return None  # nothing to wait for: the caller reads the files
            elif kinds == {"repair"} and not self._take_lease(session_id, wait=False):
                return None  # someone runs it after all: nothing to repair
            else:
                log = self._open(session_id)
            with log.locked():
                log.sync()
                if kinds & {"lease", "repair"}:
                    self._take_lease(session_id)
                    if log.meta.status in ("pending", "running"):  # its last run died: rebuild from the log
                        log.rebuild(self.redact)
                self._write_events(log, requests)
                if log.dirty and (any(r.write_meta for r in requests) or log.due(self.interval)):
                    log.write_metadata()
                elif "read" in kinds:
                    log.refresh_metadata()
                self._track(log)
                if kinds & {"release", "repair"}:
                    self._release(session_id)
                return copy_metadata(log.meta) if any(r.done for r in requests) else None

        self._settle(requests, work)

    def _settle(self, requests: list[Request], work: Callable[[], SessionMetadata | None]) -> None:
        try:
            result = work()
            for request in requests:
                request.result = result
        except BaseException as e:
            for request in requests:
                request.error = e
            if any(r.done is None for r in requests):
                sid = requests[0].session_id
                with self.lock:
                    self.failed.setdefault(sid or "", e)
        finally:
            for request in requests:
                if request.done is not None:
                    request.done.set()

    def _write_events(self, log: OpenLog, requests: list[Request]) -> None:
        lines: list[str] = []
        seq, last_type = log.seq, log.last_type
        for request in requests:
            for event in request.events:
                seq += 1
                record = record_of(log.session_id, seq, request.created, event)
                record["payload"] = self.redact(record["payload"])  # values only, never keys or structure
                lines.append(_encode(record))
                last_type = event.kind
                apply_event(log.meta, event)
                log.changes.append(event)
        if lines:
            data = ("\n".join(lines) + "\n").encode("utf-8")
            view = memoryview(data)
            while view:
                view = view[os.write(log.fd, view) :]
            log.size, log.seq, log.last_type = log.size + len(data), seq, last_type
            log.unsynced = True
        for request in requests:
            if request.kind == "append":
                log.meta.updated_at = request.created
                log.dirty = True
        log.meta.event_count, log.meta.last_event_type = log.seq, log.last_type

    def _take_lease(self, session_id: str, *, wait: bool = True) -> bool:
        """Hold the session's lease (a lock the kernel drops when this process dies) for as long as this
        process runs it. With ``wait`` False, a lease someone holds is not an error: False."""
        if session_id in self.leases:
            return True
        fd = os.open(self.root / session_id / "lease", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            if not wait:
                return False
            who = f" (process {holder})" if holder.isdigit() else ""
            raise SessionError(
                f"session {session_id} is being run by another process{who}; wait for it to end, or stop it"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.leases[session_id] = fd
        return True

    def _release(self, session_id: str) -> None:
        fd = self.leases.pop(session_id, None)
        if fd is not None:
            os.close(fd)

    def _track(self, log: OpenLog) -> None:
        if log.dirty:
            self.dirty[log.session_id] = log
            self.due_at = min(self.due_at, log.written_at + self.interval)
        else:
            self.dirty.pop(log.session_id, None)

    def _create(self, folder: Path, meta: SessionMetadata) -> OpenLog:
        if not self.root_made:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.root_made = True
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            raise SessionError(f"session {meta.session_id} already exists") from None
        log = OpenLog(meta.session_id, folder, _open_log(folder), meta)
        log.dirty = True  # written at once by the commit (a create asks for it)
        self._take_lease(meta.session_id)  # before its metadata exists: a reader never sees it unowned
        self._keep(log)
        return log

    def _open(self, session_id: str) -> OpenLog:
        log = self.logs.get(session_id)
        if log is not None:
            self.logs.move_to_end(session_id)
            return log
        folder = self.root / session_id
        if not (folder / "metadata.json").is_file():
            raise SessionError(f"session {session_id} not found in {self.root}")
        log = OpenLog(session_id, folder, _open_log(folder), None)
        self._keep(log)
        return log

    def _keep(self, log: OpenLog) -> None:
        self.logs[log.session_id] = log
        while len(self.logs) > MAX_OPEN:
            _, oldest = self.logs.popitem(last=False)
            self._close(oldest)

    def _close(self, log: OpenLog) -> None:
        try:
            if log.dirty:
                self._write_one(log)
        finally:
            self.dirty.pop(log.session_id, None)
            os.close(log.fd)

    def _close_all(self) -> None:
        while self.logs:
            _, log = self.logs.popitem(last=False)
            with contextlib.suppress(OSError, SessionError):
                self._close(log)

    def _write_due(self) -> None:
        for log in list(self.dirty.values()):
            if log.due(self.interval):
                try:
                    self._write_one(log)
                except Exception as e:  # kept for the next submit or flush; retried after the interval
                    log.written_at = time.monotonic()
                    with self.lock:
                        self.failed.setdefault(log.session_id, e)
        self.due_at = min((log.written_at + self.interval for log in self.dirty.values()), default=math.inf)

    def _write_all_dirty(self) -> None:
        for log in list(self.dirty.values()):
            self._write_one(log)

    def _write_one(self, log: OpenLog) -> None:
        with log.locked():
            log.sync()
            log.write_metadata()
        self._track(log)


class OpenLog:
    """A session the writer has open: its log's fd (also the lock) and what it knows of both files."""

    def __init__(self, session_id: str, folder: Path, fd: int, meta: SessionMetadata | None):
        self.session_id = session_id
        self.folder = folder
        self.log_path = str(folder / "events.jsonl")
        self.meta_path = str(folder / "metadata.json")
        self.spare_path = str(folder / ".metadata.spare")
        self.fd = fd
        self.size = 0 if meta is not None else -1  # -1: read the tail before the first append
        self.seq = 0
        self.last_type = ""
        self.stamp: tuple[int, ...] | None = None  # metadata.json as we last wrote or read it
        self.meta = meta if meta is not None else self._load()
        self.changes: list[Event] = []  # folded in since the last write, replayed on another process's copy
        self.unsynced = False  # written to the log since its last fsync
        self.dirty = False
        self.written_at = time.monotonic()

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def due(self, interval: float) -> bool:
        return self.dirty and time.monotonic() - self.written_at >= interval

    def sync(self) -> None:
        """Catch up with the log if another process appended to it (or a crash tore its tail)."""
        size = os.fstat(self.fd).st_size
        if size != self.size:
            self.size, self.seq, self.last_type = _read_tail(self.fd, size, Path(self.log_path))

    def refresh_metadata(self) -> None:
        """If another process replaced ``metadata.json``, start again from its copy plus our changes."""
        try:
            stamp = _stamp(os.stat(self.meta_path))
        except FileNotFoundError:  # not written yet (a new session), or removed by hand
            self.stamp = None
            return
        if stamp != self.stamp:
            meta = self._load()
            for event in self.changes:
                apply_event(meta, event)
            meta.event_count, meta.last_event_type = self.seq, self.last_type
            meta.updated_at = max(meta.updated_at, self.meta.updated_at)
            self.meta = meta

    def write_metadata(self) -> None:
        if self.unsynced:
            os.fsync(self.fd)
            self.unsynced = False
        self.refresh_metadata()
        data = self.meta.model_dump_json(by_alias=True, indent=2).encode("utf-8") + b"\n"
        replace_file(
            self.meta_path, self.spare_path, data, exists=self.stamp is not None
        )  # under the session's lock: one writer
        self.stamp = _stamp(os.stat(self.meta_path))
        self.changes.clear()
        self.dirty = False
        self.written_at = time.monotonic()

    def rebuild(self, redact: Callable[[Any], Any]) -> None:
        """The metadata again from the log alone (the run that wrote it died, maybe before it wrote its
        metadata), and an event that says the run ended ``interrupted``."""
        meta = self.meta.model_copy(
            update={
                "status": "pending",
                "usage": type(self.meta.usage)(),
                "children_usage": type(self.meta.usage)(),
                "event_count": 0,
                "last_event_type": "",
            }
        )
        with open(self.log_path, "rb") as f:
            data = f.read(self.size)
        for stored in parse_log(data, self.log_path):
            apply_event(meta, stored.event)
        self.meta, self.changes, self.dirty = meta, [], True
        if meta.status in ("pending", "running"):
            end = StatusChanged(
                session_id=self.session_id,
                status="interrupted",
                reason="the process running it ended before it did (killed, or it crashed)",
            )
            self.seq += 1
            record = record_of(self.session_id, self.seq, now_iso(), end)
            record["payload"] = redact(record["payload"])
            line = (_encode(record) + "\n").encode("utf-8")
            os.write(self.fd, line)
            self.size += len(line)
            self.last_type = end.kind
            self.unsynced = True
            apply_event(meta, end)
        meta.event_count, meta.last_event_type = self.seq, self.last_type

    def _load(self) -> SessionMetadata:
        meta = read_metadata(self.folder)
        with contextlib.suppress(FileNotFoundError):
            self.stamp = _stamp(os.stat(self.meta_path))
        return meta


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def copy_metadata(meta: SessionMetadata) -> SessionMetadata:
    """A copy the caller may change: the two usage models are the only mutable parts."""
    return meta.model_copy(
        update={"usage": meta.usage.model_copy(), "children_usage": meta.children_usage.model_copy()}
    )


def _stamp(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _open_log(folder: Path) -> int:
    try:
        return os.open(folder / "events.jsonl", os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except FileNotFoundError:
        raise SessionError(f"session {folder.name} not found in {folder.parent}") from None


def parse_log(data: bytes, log: Path | str, *, first_line: int = 0) -> Iterator[StoredEvent]:
    """The events of whole log lines; a bad line is an error naming it. Types this version does not
    know (written by a newer Zero) are skipped."""
    session_id = Path(log).parent.name
    for number, line in enumerate(data.split(b"\n"), first_line + 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("a record must be a JSON object")
            kind = record.get("type")
            if not isinstance(kind, str):
                raise ValueError("the record has no type")
            payload = record.get("payload") or {}
            if not isinstance(payload, dict):
                raise ValueError("its payload is not an object")
            event = decode_event(kind, session_id, payload)
        except (ValueError, RecursionError) as e:
            raise SessionError(f"{log}: line {number} is not a valid event ({e})") from None
        if event is not None:  # None: a kind of event from a newer Zero
            yield StoredEvent(int(record.get("sequence", number)), str(record.get("createdAt", "")), event)


def read_metadata(folder: Path) -> SessionMetadata:
    try:
        meta = SessionMetadata.model_validate_json((folder / "metadata.json").read_bytes())
    except (FileNotFoundError, NotADirectoryError):
        raise SessionError(f"session {folder.name} not found in {folder.parent}") from None
    except ValueError as e:
        raise SessionError(f"{folder / 'metadata.json'} is damaged: {e}") from e
    if meta.session_id != folder.name:
        raise SessionError(
            f"{folder / 'metadata.json'} names session {meta.session_id!r}, not {folder.name!r}: the folder was "
            "renamed or the file copied in from another session; give the folder back its name"
        )
    return meta


def _read_tail(fd: int, size: int, log: Path) -> tuple[int, int, str]:
    """``(size, sequence, type)`` of the log's last complete line; a torn tail is cut off first."""
    if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
        # A crash cut the last write short: that batch never committed.
        size = _last_newline(fd, size) + 1
        os.ftruncate(fd, size)
        os.fsync(fd)
    if size == 0:
        return 0, 0, ""
    start = _last_newline(fd, size - 1) + 1
    line = os.pread(fd, size - start, start)
    try:
        record = json.loads(line)
        return size, int(record["sequence"]), str(record["type"])
    except (ValueError, KeyError) as e:
        raise SessionError(f"{log}: the last event is damaged ({e}); cannot append safely") from e


def _last_newline(fd: int, end: int) -> int:
    """The offset of the last newline before ``end`` (-1 if none), reading backwards in blocks."""
    block = 4096
    pos = end
    while pos > 0:
        start = max(0, pos - block)
        found = os.pread(fd, pos - start, start).rfind(b"\n")
        if found != -1:
            return start + found
        pos = start
        block *= 2
    return -1
