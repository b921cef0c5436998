"""The session recorder: the first consumer of an agent's events, writing them to its session."""

from __future__ import annotations

from zero.agent import STORED, Event
from zero.sessions.store import SessionStore

__all__ = ["SessionRecorder"]

_LAST = frozenset({"run_end", "team_end"})


class SessionRecorder:
    """Hands each event of one session to the store the moment it is emitted, without waiting.

    The store's writer commits them in order, so the log reads in causal order: the model's
    answer, then the tool call it asked for, the child that call started, and its result.
    Streaming deltas are not stored (the whole message is); events of other sessions are ignored.
    """

    def __init__(self, store: SessionStore, session_id: str):
        self.store = store
        self.session_id = session_id

    def __call__(self, event: Event) -> None:
        if event.session_id == self.session_id and event.kind in STORED:
            self.store.submit(self.session_id, (event,), final=event.kind in _LAST)
