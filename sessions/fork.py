"""Forking a session: a new session holding another's conversation up to one of its events."""

from __future__ import annotations

from zero.agent import Message
from zero.errors import SessionError, UsageError
from zero.sessions.ids import new_session_id
from zero.sessions.models import SessionMetadata, now_iso
from zero.sessions.replay import messages_from_events
from zero.sessions.store import SessionStore

__all__ = ["fork_session"]


def fork_session(
    store: SessionStore, origin: str, *, at_sequence: int | None = None, session_id: str | None = None
) -> tuple[SessionMetadata, list[Message]]:
    """Write a new session with ``origin``'s conversation up to event ``at_sequence`` (all of it if
    None), linked to its origin (``forkedFrom``), ``pending`` and held by nobody; its metadata and the
    history to continue with."""
    meta = store.metadata(origin)
    if meta.session_kind == "team":  # (its members hold the conversations)
        raise UsageError(f"{origin} is a team run, which has no conversation of its own: fork one of its members")
    events = store.events(origin)
    if at_sequence is not None and not any(e.sequence == at_sequence for e in events):
        last = events[-1].sequence if events else 0
        raise UsageError(
            f"session {origin} has no event {at_sequence}: it has {last} "
            f"(--at takes 1 to {last}; zero sessions show {origin} numbers them)"
            if last
            else f"session {origin} has no events yet, so there is nothing to fork"
        )
    kept = [e.event for e in events if at_sequence is None or e.sequence <= at_sequence]
    history = messages_from_events(kept)
    if not history:
        raise SessionError(f"session {origin} has no conversation up to event {at_sequence} to fork")
    new_id = session_id or new_session_id("fork")
    made = now_iso()
    fork = meta.model_copy(
        update={
            "session_id": new_id,
            "session_kind": "fork",
            "title": f"{meta.title} (fork)"[:120],
            "parent_session_id": "",
            "root_session_id": new_id,
            "depth": 0,
            "status": "pending",
            "created_at": made,  # (now: not its origin's time)
            "updated_at": made,
            "usage": type(meta.usage).nothing(priced=not meta.usage.partly_unpriced),  # the origin's model
            "children_usage": type(meta.usage)(),
            "event_count": 0,
            "last_event_type": "",
            "forked_from": origin,
            "forked_at_sequence": at_sequence if at_sequence is not None else (events[-1].sequence if events else 0),
        }
    )
    store.create(fork)
    # (its compaction too: the history it continues with is the summary, as the origin's was)
    store.append(new_id, [e for e in kept if e.kind in ("message", "tool_call", "tool_result", "compaction")])
    store.release(new_id)  # made, not run: whoever runs it takes it (another process may)
    return store.metadata(new_id), history
