"""A session store in memory: for tests, and for embedding Zero where nothing should touch the disk."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from zero.agent import Event
from zero.errors import SessionError
from zero.sessions._writer import copy_metadata
from zero.sessions.ids import validate_session_id
from zero.sessions.index import Row
from zero.sessions.models import SessionMetadata, StoredEvent, apply_event, now_iso

__all__ = ["MemorySessionStore"]


@dataclass
class _Session:
    meta: SessionMetadata
    events: list[StoredEvent] = field(default_factory=list)


class MemorySessionStore:
    """Keeps the same rules as the store on disk (contiguous sequences, metadata folded from the
    events), minus the disk. Every write is immediate, so ``flush`` has nothing to wait for."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._held: set[str] = set()

    def _get(self, session_id: str) -> _Session:
        try:
            return self._sessions[validate_session_id(session_id)]
        except KeyError:
            raise SessionError(f"session {session_id} not found") from None

    def create(self, meta: SessionMetadata) -> SessionMetadata:
        if validate_session_id(meta.session_id) in self._sessions:
            raise SessionError(f"session {meta.session_id} already exists")
        self._sessions[meta.session_id] = _Session(copy_metadata(meta))
        self._held.add(meta.session_id)
        return copy_metadata(meta)

    def create_all(self, metas: Sequence[SessionMetadata]) -> list[SessionMetadata]:
        return [self.create(meta) for meta in metas]

    def append(self, session_id: str, events: Sequence[Event]) -> SessionMetadata:
        session = self._get(session_id)
        created = now_iso()
        for event in events:
            session.events.append(StoredEvent(sequence=len(session.events) + 1, created_at=created, event=event))
            apply_event(session.meta, event)
        meta = session.meta
        meta.updated_at = created
        meta.event_count = len(session.events)
        meta.last_event_type = session.events[-1].event.kind if session.events else ""
        return copy_metadata(meta)

    def submit(self, session_id: str, events: Sequence[Event], *, final: bool = False) -> None:
        self.append(session_id, events)

    def flush(self, session_id: str | None = None) -> None:
        return None

    def written(self, session_id: str) -> None:
        return None

    async def awritten(self, session_id: str) -> None:
        return None

    def check(self, session_id: str) -> None:
        return None

    def acquire(self, session_id: str) -> None:
        self._get(session_id)  # one process: nobody else can hold it
        self._held.add(session_id)

    def release(self, session_id: str) -> None:
        self._held.discard(session_id)

    def held(self, session_id: str) -> bool:
        return session_id in self._held

    def exists(self, session_id: str) -> bool:
        return validate_session_id(session_id) in self._sessions

    def metadata(self, session_id: str) -> SessionMetadata:
        return copy_metadata(self._get(session_id).meta)

    def events(self, session_id: str) -> list[StoredEvent]:
        return list(self._get(session_id).events)

    def events_since(self, session_id: str, cursor: int) -> tuple[list[StoredEvent], int]:
        events = self._get(session_id).events
        return events[cursor:], len(events)

    def rows(self, tree: str | None = None) -> list[Row]:
        return [m.to_json() for m in self.list() if tree is None or m.root_session_id in (tree, "")]

    def list(self) -> list[SessionMetadata]:
        found = [copy_metadata(s.meta) for s in self._sessions.values()]
        return sorted(found, key=lambda m: (m.updated_at, m.session_id), reverse=True)
