"""The session store's writer: one thread that commits every write in order, and the sessions it
keeps open. ``store.SessionStore`` is its public face; the rules it keeps are written there."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import fcntl
import functools
import json
import math
import os
import resource
import shutil
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from zero.agent import Event, MessageAdded, StatusChanged, decode_event
from zero.errors import SessionError, SessionWriteError
from zero.sessions._replace import replace_file
from zero.sessions.ids import SESSION_ID
from zero.sessions.models import SessionMetadata, StoredEvent, apply_event, now_iso, record_of
from zero.strictfile import NotAFile
from zero.tools import redact_values

MAX_OPEN: int | None = None  # sessions whose log stays open between commits (None: from the descriptor limit)
MAX_QUEUED = 4096  # requests waiting for the writer before `submit` waits for room
IDLE_SECONDS = 2.0  # the writer thread ends after this long with nothing to do
GATHER_SECONDS = 0.01  # after a round, batches that nobody waits for gather this long before the next


@dataclass(eq=False, kw_only=True)
class Request:
    kind: Literal["create", "append", "flush", "read", "write", "lease", "release", "repair"]
    session_id: str | None
    events: Sequence[Event] = ()
    created: str = ""
    write_meta: bool = False
    meta: SessionMetadata | None = None
    done: threading.Event | Woken | None = None
    result: SessionMetadata | None = None
    error: BaseException | None = None


class Woken:
    """A request's done signal for a caller on an event loop: the writer's ``set`` wakes its future there
    (no thread hand-off per wait). A caller that stopped waiting, or a loop that closed, is not woken."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[None] = self.loop.create_future()
        self.woken = False

    def set(self) -> None:
        self.woken = True
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            self.loop.call_soon_threadsafe(self._wake)

    def is_set(self) -> bool:
        return self.woken

    def _wake(self) -> None:
        if not self.future.done():  # (cancelled: its caller went away)
            self.future.set_result(None)


@dataclass(eq=False, kw_only=True)
class Fault:
    """Why a session's writes stopped; ``reported`` once someone was told (a flush of every session
    raises only the faults nobody heard of)."""

    error: BaseException
    reported: bool = False
    meta: SessionMetadata | None = None  # the session's metadata as its writes left it


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
        # Sessions a write of failed: nothing more is written to them (the log stays a prefix of what
        # happened), and ``written``, ``check`` and ``flush`` raise why. "" is a bug of the writer.
        self.faults: dict[str, Fault] = {}
        self.logs: OrderedDict[str, OpenLog] = OrderedDict()  # owned by the writer thread
        self.max_open = open_limit()
        self.dirty: dict[str, OpenLog] = {}  # open sessions whose metadata.json is behind
        self.due_at = math.inf  # no dirty session's metadata is due before this (monotonic clock)
        self.root_made = False
        self.leases: dict[str, int] = {}  # the sessions this process runs, and their lease's fd

    # -- the callers' side (any thread) -----------------------------------------

    def put(self, request: Request) -> None:
        with self.lock:
            while len(self.queue) >= MAX_QUEUED:
                self.room.wait()
            self.queue.append(request)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="zero-session-writer", daemon=True)
                self.thread.start()
            elif self.idle or request.done is not None:
                self.work.notify()  # else the writer takes it after gathering (no wake-up per batch)

    def call(self, request: Request) -> SessionMetadata | None:
        if self._waits(request):
            request.done = threading.Event()
            self.put(request)
            request.done.wait()
        return self._answer(request)

    async def acall(self, request: Request) -> SessionMetadata | None:
        """``call`` for a caller on an event loop: it waits there, not in a thread of its own."""
        if self._waits(request):
            request.done = woken = Woken()
            self.put(request)
            await woken.future
        return self._answer(request)

    def _waits(self, request: Request) -> bool:
        # With no writer thread, nothing is queued, unwritten or open: a read, flush or write has no wait.
        return request.kind not in ("read", "flush", "write") or self.busy()

    def _answer(self, request: Request) -> SessionMetadata | None:
        if request.error is not None:
            raise request.error
        if request.kind in ("flush", "write"):
            self.check(request.session_id)
        return request.result

    def call_all(self, requests: Sequence[Request]) -> list[SessionMetadata | None]:
        """``call`` each of ``requests`` (creates, appends), queued together and waited for together; the first
        error raised once all are done."""
        done = [threading.Event() for _ in requests]
        for request, signal in zip(requests, done, strict=True):
            request.done = signal
            self.put(request)
        for signal in done:
            signal.wait()
        if (error := next((r.error for r in requests if r.error is not None), None)) is not None:
            raise error
        return [request.result for request in requests]

    def check(self, session_id: str | None) -> None:
        """Raise why the session's writes stopped, if they did (None: the first fault nobody was told of)."""
        with self.lock:
            if session_id is None:
                fault = next((f for f in self.faults.values() if not f.reported), None)
            else:
                fault = self.faults.get(session_id)
            if fault is None:
                return
            fault.reported = True
        raise fault.error

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
                self.faults.setdefault("", Fault(error=e))
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
        kinds = {r.kind for r in requests}
        fault = self.faults.get(session_id)
        if fault is not None:
            self._settle(requests, lambda: self._refuse(session_id, requests, fault))
            return
        took = session_id not in self.leases  # a lease this commit takes is given back if it fails

        def work() -> SessionMetadata | None:
            create = requests[0].meta if requests[0].kind == "create" else None
            if create is None and kinds <= {"read", "flush", "write"} and session_id not in self.logs:
                return None  # nothing to wait for: the caller reads the files
            if create is None and kinds == {"repair"} and not self._take_lease(session_id, wait=False):
                return None  # someone runs it after all: nothing to repair
            try:
                log = self._open(session_id) if create is None else self._create(self.root / session_id, create)
                with log.locked():
                    log.sync()
                    if kinds & {"lease", "repair"}:
                        self._take_lease(session_id)
                        if log.stale():  # its last run died (maybe before it wrote its metadata): rebuild
                            log.rebuild(self.redact)
                        elif "repair" in kinds and self._orphaned(log.meta):
                            log.end(_unstarted(session_id), self.redact)
                    self._write_events(log, requests)
                    if log.dirty and (any(r.write_meta for r in requests) or log.due(self.interval)):
                        log.write_metadata()
                    elif "read" in kinds:
                        log.refresh_metadata()
                    self._track(log)
            finally:
                if kinds & {"release", "repair"}:
                    self._release(session_id)
            return copy_metadata(log.meta) if any(r.done for r in requests) else None

        def guarded() -> SessionMetadata | None:
            try:
                return work()
            except BaseException as e:
                made = "create" in kinds and session_id in self.logs
                error = _as_fault(e, self.root / session_id, created=not made)
                ours = session_id in self.leases and not kinds & {"lease", "repair"}
                if made:  # half made: as if it was never asked for
                    self._forget(session_id)
                    self._release(session_id)
                    shutil.rmtree(self.root / session_id, ignore_errors=True)
                elif "append" in kinds or (ours and isinstance(error, SessionWriteError)):
                    self._break(session_id, error)  # a batch (or the summary) of this process's run is lost
                elif isinstance(error, SessionWriteError):  # a lease or a repair that failed: read afresh next time
                    self._forget(session_id)
                if took and "lease" in kinds:
                    self._release(session_id)
                if error is e:
                    raise
                raise error from e

        self._settle(requests, guarded)

    def _refuse(self, session_id: str, requests: list[Request], fault: Fault) -> SessionMetadata | None:
        """The requests for a session whose writes stopped: nothing is written, its lease is still given
        back, a reader gets the metadata as the writes left it, anything else the fault."""
        for request in requests:
            if request.kind == "release":
                self._release(session_id)
            elif request.kind in ("append", "lease") and request.done is not None:
                fault.reported = True
                raise fault.error
        log = self.logs.get(session_id)
        meta = log.meta if log is not None else fault.meta
        return copy_metadata(meta) if meta is not None and any(r.done for r in requests) else None

    def _break(self, session_id: str, error: BaseException) -> None:
        """Stop writing the session: its log stays a prefix of what happened, whole events only. Its metadata
        says ``failed`` if the disk still takes that (in place of the spare: usually no new room needed)."""
        with self.lock:
            fault = self.faults.setdefault(session_id, Fault(error=error))
        log = self.logs.get(session_id)
        if log is None:
            return
        self.dirty.pop(session_id, None)
        failed = StatusChanged(session_id=session_id, status="failed", reason=str(error))
        apply_event(log.meta, failed)
        log.changes.append(failed)
        log.meta.updated_at = now_iso()
        with contextlib.suppress(OSError, SessionError), log.locked():
            log.write_metadata()
        log.dirty = False
        fault.meta = copy_metadata(log.meta)

    def _forget(self, session_id: str) -> None:
        """Close the session's log and drop what was known of it: the next request reads it afresh."""
        log = self.logs.pop(session_id, None)
        self.dirty.pop(session_id, None)
        if log is not None:
            with contextlib.suppress(OSError):
                os.close(log.fd)

    def _settle(self, requests: list[Request], work: Callable[[], SessionMetadata | None]) -> None:
        try:
            result = work()
            for request in requests:
                request.result = result
        except BaseException as e:
            for request in requests:
                request.error = e
            waited = any(r.done is not None for r in requests)
            sid = requests[0].session_id or ""
            with self.lock:
                fault = self.faults.get(sid)
                if fault is None and not all(r.done is not None for r in requests):
                    fault = self.faults[sid] = Fault(error=e)  # a submitted batch met it: the next check or flush says
                if fault is not None and waited:
                    fault.reported = True
        finally:
            for request in requests:
                if request.done is not None:
                    request.done.set()

    def _write_events(self, log: OpenLog, requests: list[Request]) -> None:
        """The requests' batches, in one write; if the disk takes only part of it, the batches it took whole
        stay (a prefix of what happened), and only what the log holds is folded into the metadata."""
        batches: list[tuple[Request, bytes]] = []
        seq = log.seq
        for request in requests:
            lines = []
            for event in request.events:
                seq += 1
                record = record_of(log.session_id, seq, request.created, event)
                record["payload"] = self.redact(record["payload"])  # values only, never keys or structure
                lines.append(_encode(record) + "\n")
            if lines:
                batches.append((request, "".join(lines).encode("utf-8")))
        kept, cut = len(batches), None
        if batches:
            try:
                log.append(b"".join(data for _, data in batches), [len(data) for _, data in batches])
            except _Cut as e:
                kept, cut = e.kept, e.error
        for request, _ in batches[:kept]:
            for event in request.events:
                log.seq += 1
                log.last_type = event.kind
                self._fold(log, event)
        for request in requests:
            if request.kind == "append":
                log.meta.updated_at = request.created
                log.dirty = True
        log.meta.event_count, log.meta.last_event_type = log.seq, log.last_type
        if cut is not None:
            raise cut

    def _fold(self, log: OpenLog, event: Event) -> None:
        """Fold a written event into the metadata, as the log holds it: a prompt that titles the session is
        redacted first, as its record was."""
        if isinstance(event, MessageAdded) and event.role == "user" and not log.meta.title:
            event = dataclasses.replace(event, content=self.redact(event.content))
        apply_event(log.meta, event)
        log.changes.append(event)

    def _take_lease(self, session_id: str, *, wait: bool = True) -> bool:
        """Hold the session's lease (a lock the kernel drops when this process dies) for as long as this
        process runs it. With ``wait`` False, a lease someone holds is not an error: False."""
        if session_id in self.leases:
            return True
        fd = open_lease(self.root / session_id)
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
        # Who holds it is a courtesy for the message above: a full disk may refuse it, the lease still holds.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.leases[session_id] = fd
        return True

    def _orphaned(self, meta: SessionMetadata) -> bool:
        """A member that never started, of a team whose run is over (it ended, or its process died): nothing
        will start it now but ``zero swarm resume``, which takes an interrupted member as well. The members of a
        team that never started stay ``pending`` with it."""
        team = meta.parent_session_id
        if meta.status != "pending" or meta.session_kind != "member" or team in self.leases:
            return False
        if not SESSION_ID.fullmatch(team):  # (a field of a file: never a path out of the sessions folder)
            return False
        folder = self.root / team
        try:
            parent = read_metadata(folder)
            if parent.finished:
                return True
            ran = parent.status == "running" or last_sequence(folder / "events.jsonl") != parent.event_count
        except SessionError:
            return False
        return ran and unheld(folder)  # (as ``stale`` says of a session: a team that never started stays pending)

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
        log = OpenLog(meta.session_id, folder, _open_log(folder, create=True), meta)
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
        log = OpenLog(session_id, folder, _open_log(folder, create=False), None)
        try:  # a log that lost events is never written to: what follows would hide the loss
            with log.locked():
                log.sync()
            check_log(log.meta, Path(log.log_path), fd=log.fd, last=log.seq)
            _check_spare(Path(log.spare_path))
        except BaseException:
            os.close(log.fd)
            raise
        self._keep(log)
        return log

    def _keep(self, log: OpenLog) -> None:
        self.logs[log.session_id] = log
        while len(self.logs) > (MAX_OPEN or self.max_open):
            _, oldest = self.logs.popitem(last=False)
            self._close(oldest)

    def _close(self, log: OpenLog) -> None:
        try:
            if log.dirty:
                self._write_one(log)
        except (OSError, SessionError) as e:
            self._break(log.session_id, _as_fault(e, log.folder))
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
                self._write_or_break(log)
        self.due_at = min((log.written_at + self.interval for log in self.dirty.values()), default=math.inf)

    def _write_all_dirty(self) -> None:
        for log in list(self.dirty.values()):
            self._write_or_break(log)

    def _write_or_break(self, log: OpenLog) -> None:
        """Write a session's metadata; if that fails, its writes stop (the next check or flush says why)."""
        try:
            self._write_one(log)
        except (OSError, SessionError) as e:
            self._break(log.session_id, _as_fault(e, log.folder))

    def _write_one(self, log: OpenLog) -> None:
        with log.locked():
            log.sync()
            log.write_metadata()
        self._track(log)


def open_limit() -> int:
    """How many sessions' logs stay open between commits: a quarter of the descriptors this process may open
    (each running session also holds its lease, and each call under way a connection), at least 256. A run of
    more sessions than stay open would close and reopen each one's log every round, writing its metadata and
    syncing it each time."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 16 if soft == resource.RLIM_INFINITY else max(256, soft // 4)


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

    def append(self, data: bytes, batches: Sequence[int]) -> None:
        """Add ``data``, whole batches of whole lines (``batches``: their lengths, in order), to the log. A
        write the disk refuses part way is taken back to the end of the last batch it took whole, and
        raises ``_Cut``: the log never ends with part of a batch."""
        view = memoryview(data)
        written = 0
        try:
            while view:
                n = os.write(self.fd, view)
                written, view = written + n, view[n:]
        except OSError as e:
            kept = whole = 0
            for length in batches:
                if whole + length > written:
                    break
                kept, whole = kept + 1, whole + length
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, self.size + whole)  # shrinking needs no room, nor passes a file-size limit
            self.size += whole
            self.unsynced = self.unsynced or whole > 0
            fault = write_fault(e, self.log_path)
            fault.__cause__ = e
            raise _Cut(kept, fault) from e
        self.size += len(data)
        self.unsynced = True

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
            try:
                os.fsync(self.fd)
            except OSError as e:
                raise write_fault(e, self.log_path) from e
            self.unsynced = False
        self.refresh_metadata()
        data = self.meta.model_dump_json(by_alias=True, indent=2).encode("utf-8") + b"\n"
        try:  # under the session's lock: one writer
            replace_file(self.meta_path, self.spare_path, data, exists=self.stamp is not None)
        except OSError as e:
            raise write_fault(e, self.meta_path) from e
        self.stamp = _stamp(os.stat(self.meta_path))
        self.changes.clear()
        self.dirty = False
        self.written_at = time.monotonic()

    def stale(self) -> bool:
        """Whether the metadata of a session nobody runs may not be what its log says: it says ``running``
        (its run died), or ``pending`` while the log holds events it does not count (a run started and died
        before it wrote its metadata). A ``pending`` session whose log it counts never ran: it stays so."""
        return self.meta.status == "running" or (self.meta.status == "pending" and self.seq != self.meta.event_count)

    def rebuild(self, redact: Callable[[Any], Any]) -> None:
        """The metadata again from the log alone (the run that wrote it died, maybe before it wrote its
        metadata), and, if a run had started, an event that says it ended ``interrupted`` (one closed before
        it ever ran, or never started, stays ``pending``)."""
        ran = self.meta.status == "running"  # (its metadata was written once its run started)
        meta = folded(self.meta, _read_all(self.fd, self.size), self.log_path)  # (the descriptor checked at open)
        before, self.meta, self.changes = self.meta, meta, []
        if _cut_short(meta, ran=ran):
            self.end(_interrupted(self.session_id), redact)
        meta.event_count, meta.last_event_type = self.seq, self.last_type
        self.dirty = self.dirty or meta != before  # a session that never ran reads the same: nothing to write

    def end(self, event: StatusChanged, redact: Callable[[Any], Any]) -> None:
        """Append the status a dead run's session ends with, and fold it in."""
        record = record_of(self.session_id, self.seq + 1, now_iso(), event)
        record["payload"] = redact(record["payload"])
        line = (_encode(record) + "\n").encode("utf-8")
        try:
            self.append(line, [len(line)])
        except _Cut as e:
            raise e.error from e.error.__cause__
        self.seq += 1
        self.last_type = event.kind
        apply_event(self.meta, event)
        self.meta.event_count, self.meta.last_event_type = self.seq, self.last_type
        self.dirty = True

    def _load(self) -> SessionMetadata:
        meta = read_metadata(self.folder)
        with contextlib.suppress(FileNotFoundError):
            self.stamp = _stamp(os.stat(self.meta_path))
        return meta


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _cut_short(meta: SessionMetadata, *, ran: bool) -> bool:
    """A dead process left the session's run unfinished: its log (``meta``, folded from it) says it runs, or
    its metadata said so (``ran``) and the log says no end. A session that never ran stays pending, whether
    its log says it was closed before it ran or holds only what it was made with (a fork's history)."""
    return meta.status == "running" or (ran and not meta.finished)


def _unstarted(session_id: str) -> StatusChanged:
    return StatusChanged(
        session_id=session_id,
        status="interrupted",
        reason="its team's process ended before it started",
    )


def _interrupted(session_id: str) -> StatusChanged:
    return StatusChanged(
        session_id=session_id,
        status="interrupted",
        reason="the process running it ended before it did (killed, or it crashed)",
    )


def folded(meta: SessionMetadata, log: bytes, path: str | Path) -> SessionMetadata:
    """``meta`` with its status, usage and counts folded again from the log's whole lines."""
    meta = meta.model_copy(
        update={
            "status": "pending",
            "usage": type(meta.usage).nothing(priced=not meta.usage.partly_unpriced),  # as it was made
            "children_usage": type(meta.usage)(),
            "event_count": 0,
            "last_event_type": "",
        }
    )
    end = log.rfind(b"\n") + 1  # what follows the last newline is a write cut short
    for stored in parse_log(log[:end], path, sequence=1):
        apply_event(meta, stored.event)
        meta.event_count, meta.last_event_type = stored.sequence, stored.event.kind
    return meta


def derive_interrupted(folder: Path) -> SessionMetadata:
    """What the repair of a dead run's session would store, derived without writing (its folder is
    read-only, or its disk full): the metadata folded from the log, ``interrupted`` if it was cut short."""
    meta = read_metadata(folder)
    ran = meta.status == "running"
    try:
        log = read_session_file(folder / "events.jsonl")
    except FileNotFoundError:
        log = b""
    meta = folded(meta, log, folder / "events.jsonl")
    if _cut_short(meta, ran=ran):
        apply_event(meta, _interrupted(meta.session_id))
    return meta


class _Cut(Exception):  # noqa: N818 (not an error of its own: it carries one)
    """A write the disk took only ``kept`` batches of; ``error`` says why."""

    def __init__(self, kept: int, error: SessionWriteError):
        super().__init__(str(error))
        self.kept, self.error = kept, error


def write_fault(e: OSError, path: str | Path, *, created: bool = True) -> SessionWriteError:
    """What a user is told when the disk refuses a session's file: what, where, and how to go on
    (``created`` False: the session could not even be made, so there is nothing to resume)."""
    what = "disk full" if e.errno == errno.ENOSPC else (e.strerror or type(e).__name__).lower()
    fix = "make room" if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else "fix that"
    if not created:
        return SessionWriteError(f"cannot write the session: {what} ({path}); nothing ran: {fix}, then try again")
    return SessionWriteError(
        f"cannot write the session: {what} ({path}); it keeps everything up to its last whole event: "
        f"{fix}, then continue it with zero sessions resume {Path(path).parent.name}"
    )


def _as_fault(e: BaseException, folder: Path, *, created: bool = True) -> BaseException:
    """An OS error met on a session's files as the error users see; anything else as it is."""
    if not created and isinstance(e, SessionWriteError) and isinstance(e.__cause__, OSError):
        e = e.__cause__  # said again, for a session that could not be made
    if isinstance(e, OSError) and not isinstance(e, (FileNotFoundError, NotADirectoryError)):
        path = e.filename if isinstance(e.filename, str) else folder / "events.jsonl"
        return write_fault(e, path, created=created)
    return e


def copy_metadata(meta: SessionMetadata) -> SessionMetadata:
    """A copy the caller may change: the two usage models are the only mutable parts."""
    return meta.model_copy(
        update={"usage": meta.usage.model_copy(), "children_usage": meta.children_usage.model_copy()}
    )


def open_own(path: Path, flags: int = os.O_RDONLY) -> int:
    """A descriptor of a session's own file ``path``, opened inside its folder without following a link to
    either (a link planted there could lead to any file: a write through it, as root, would clobber it):
    ``NotAFile`` for a link, a file with another name (a hard link), a FIFO, a device or a folder."""
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise NotAFile(e.errno, "is in a folder that is a link, not a session's own", str(path)) from None
        raise
    try:
        fd = os.open(
            path.name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, 0o600, dir_fd=folder
        )
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EISDIR):
            what = "is a link, not a file" if e.errno == errno.ELOOP else "is a folder, not a file"
            raise NotAFile(e.errno, what, str(path)) from None
        raise
    finally:
        os.close(folder)
    if (why := _not_own(os.fstat(fd))) is not None:
        os.close(fd)
        raise NotAFile(errno.EINVAL, why, str(path))
    os.set_blocking(fd, True)
    return fd


def _check_spare(path: Path) -> None:
    """``SessionError`` if the spare a metadata write swaps in is not the session's own file (a link planted
    there: the write refuses it, and every later one would; the session is damaged, said before any run)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return  # (made with the next write)
    why = "is a link, not a file" if stat.S_ISLNK(st.st_mode) else _not_own(st)
    if why is not None:
        raise _not_a_file(NotAFile(errno.EINVAL, why, str(path)))


def _not_own(st: os.stat_result) -> str | None:
    """Why a file is not a session's own (None: it is)."""
    if stat.S_ISDIR(st.st_mode):
        return "is a folder, not a file"
    if not stat.S_ISREG(st.st_mode):
        return "is a FIFO, a device or a socket, not a file"
    if st.st_nlink > 1:
        return "has another name (a hard link), not a file of its own"
    return None


def _stamp(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _open_log(folder: Path, *, create: bool) -> int:
    """The log's descriptor for appending: made with a new session, else it must be there."""
    try:
        return open_own(folder / "events.jsonl", os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0))
    except FileNotFoundError:
        if not create and folder.is_dir():
            raise missing_log(folder / "events.jsonl") from None
        raise SessionError(f"session {folder.name} not found in {folder.parent}") from None
    except NotAFile as e:
        raise _not_a_file(e) from None


def linked(path: Path) -> SessionError:
    return SessionError(
        f"{path} is a link, not a session folder: never read through (zero sessions rm {path.name} removes the link)"
    )


def open_lease(folder: Path) -> int:
    """The session's lease, made if it is not there (``SessionError`` if a link or another file stands there)."""
    try:
        return open_own(folder / "lease", os.O_RDWR | os.O_CREAT)
    except NotAFile as e:
        raise _not_a_file(e) from None


def unheld(folder: Path) -> bool:
    """Nobody holds the session's lease: the process that ran it has ended."""
    try:
        fd = open_lease(folder)
    except FileNotFoundError:
        return False  # the folder is gone
    except OSError:  # a read-only disk: a lock can still be tried through a read-only descriptor
        try:
            fd = open_own(folder / "lease")
        except FileNotFoundError:
            return True  # a run makes its lease before anything else: none, no run
        except NotAFile as e:
            raise _not_a_file(e) from None
        except OSError:
            return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # (closing drops the lock if we got it)
    return True


def missing_metadata(folder: Path) -> SessionError:
    return SessionError(
        f"{folder / 'metadata.json'} is missing: the session cannot be read (zero sessions rm {folder.name} removes it)"
    )


def _first_error(e: ValidationError) -> str:
    """What is wrong with a file pydantic read, on one line: the first error and where it is."""
    errors = e.errors(include_url=False)
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where + ': ' if where else ''}{first['msg']}{more}"


def missing_log(log: Path) -> SessionError:
    return SessionError(f"{log} is missing: the session's log (its record) was removed, and what it held is lost")


def check_whole(meta: SessionMetadata, last: int, log: Path | str) -> None:
    """``SessionError`` if the log, whose last event is number ``last``, holds less than the metadata counts:
    the metadata is written only once the log holds what it counts, so the log lost events."""
    if last < meta.event_count:
        held = f"only {last} event{'' if last == 1 else 's'}" if last else "no events"
        raise SessionError(
            f"{log} holds {held} where the session's metadata counts {meta.event_count}: "
            "the log was cut or replaced, and what it held is lost"
        )


def check_log(meta: SessionMetadata, log: Path, *, fd: int | None = None, last: int | None = None) -> None:
    """``SessionError`` if the log lost events: it holds fewer than its metadata counts (cut or emptied), or its
    first event is not number 1 (its start cut). Its first and last lines only (``fd``: the log open already;
    ``last``: its last event's number, known already); a whole read checks every number."""
    mine = _open_existing(log) if fd is None else fd
    try:
        size = os.fstat(mine).st_size
        check_whole(meta, _tail(mine, size, log)[1] if last is None else last, log)
        if first := _first_line(mine, size):
            list(parse_log(first, log, sequence=1))
    finally:
        if fd is None:
            os.close(mine)


def last_sequence(log: Path) -> int:
    """The number of the log's last whole event (0: none), read from its tail without changing it."""
    fd = _open_existing(log)
    try:
        return _tail(fd, os.fstat(fd).st_size, log)[1]
    finally:
        os.close(fd)


def _open_existing(log: Path) -> int:
    try:
        return open_own(log)
    except FileNotFoundError:
        raise missing_log(log) from None
    except NotAFile as e:
        raise _not_a_file(e) from None


def _read_all(fd: int, size: int) -> bytes:
    """The first ``size`` bytes of the file open at ``fd``."""
    chunks, at = [], 0
    while at < size and (part := os.pread(fd, size - at, at)):
        chunks.append(part)
        at += len(part)
    return b"".join(chunks)


def _first_line(fd: int, size: int) -> bytes:
    """The log's first whole line (empty if none: a first write under way, or cut short)."""
    data = b""
    while len(data) < size and b"\n" not in data:
        part = os.pread(fd, 1 << 16, len(data))
        if not part:
            break
        data += part
    end = data.find(b"\n")
    return data[: end + 1] if end >= 0 else b""


def read_session_file(path: Path, start: int = 0) -> bytes:
    """The bytes of a session's file from byte ``start``. A FIFO or a device in its place (a link to
    /dev/zero) makes the session damaged: it is never waited on or read."""
    try:
        fd = open_own(path)
    except NotAFile as e:
        raise _not_a_file(e) from None
    with os.fdopen(fd, "rb") as f:
        f.seek(start)
        return f.read()


def read_swapped(path: Path) -> bytes:
    """The content of a file ``replace_file`` keeps (``metadata.json``), whole. A reader slowed down between
    opening it and reading could read it after it became the spare, while the next version was written into
    it (a version not yet current, or a mix of two): what was read counts only if the file is still the
    current one and untouched since it was opened (its inode and change time), else it is read again."""
    for _ in range(1000):
        try:
            fd = open_own(path)
        except NotAFile as e:
            raise _not_a_file(e) from None
        with os.fdopen(fd, "rb") as f:
            before = os.fstat(fd)
            data = f.read()
        now = os.stat(path)
        if (now.st_ino, now.st_ctime_ns) == (before.st_ino, before.st_ctime_ns):
            return data
    return data  # (swapped a thousand times while read: as good as any)


def _not_a_file(e: NotAFile) -> SessionError:
    return SessionError(f"{e.filename} {e.strerror}: the session is damaged (remove it with zero sessions rm)")


def parse_log(
    data: bytes, log: Path | str, *, first_line: int = 0, sequence: int | None = None
) -> Iterator[StoredEvent]:
    """The events of whole log lines; a bad line is an error naming it. Types this version does not
    know (written by a newer Zero) are skipped. ``sequence``: the number the first record must carry, each
    next one more (a log read whole: one that lost lines from its start or its middle is damaged)."""
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
            at = int(record.get("sequence", number))
        except (ValueError, RecursionError, TypeError) as e:
            raise SessionError(f"{log}: line {number} is not a valid event ({e})") from None
        if sequence is not None:
            if at != sequence:
                raise SessionError(
                    f"{log}: line {number} holds event {at} where event {sequence} was due: the log lost events "
                    "(cut, or lines removed), and what it held is lost"
                )
            sequence += 1
        if event is not None:  # None: a kind of event from a newer Zero
            yield StoredEvent(sequence=at, created_at=str(record.get("createdAt", "")), event=event)


def read_metadata(folder: Path) -> SessionMetadata:
    try:
        meta = SessionMetadata.model_validate_json(read_swapped(folder / "metadata.json"))
    except (FileNotFoundError, NotADirectoryError):
        if folder.is_dir():
            raise missing_metadata(folder) from None
        raise SessionError(f"session {folder.name} not found in {folder.parent}") from None
    except ValidationError as e:
        raise SessionError(f"{folder / 'metadata.json'} is damaged: {_first_error(e)}") from e
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
    whole = _tail(fd, size, log)
    if whole[0] != size:  # a crash cut the last write short: that batch never committed
        os.ftruncate(fd, whole[0])
        os.fsync(fd)
    return whole


def _tail(fd: int, size: int, log: Path) -> tuple[int, int, str]:
    """``(size, sequence, type)`` of the log up to its last complete line (what follows it is a write cut
    short, or under way)."""
    if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
        size = _last_newline(fd, size) + 1
    if size == 0:
        return 0, 0, ""
    start = _last_newline(fd, size - 1) + 1
    line = os.pread(fd, size - start, start)
    try:
        record = json.loads(line)
        return size, int(record["sequence"]), str(record["type"])
    except (ValueError, KeyError, TypeError) as e:
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
