"""Sessions on disk: the store, ids, metadata, the recorder and replay."""

from __future__ import annotations

from zero.sessions.ids import new_session_id, validate_session_id
from zero.sessions.lineage import SessionNode, lineage, session_tree
from zero.sessions.models import (
    TERMINAL,
    SessionKind,
    SessionMetadata,
    UsageTotals,
    add_children_usage,
    now_iso,
    set_status,
)
from zero.sessions.recorder import SessionRecorder, message_payload
from zero.sessions.replay import messages_from_events
from zero.sessions.store import SessionStore, default_data_dir

__all__ = [
    "TERMINAL",
    "SessionKind",
    "SessionMetadata",
    "SessionNode",
    "SessionRecorder",
    "SessionStore",
    "UsageTotals",
    "add_children_usage",
    "default_data_dir",
    "lineage",
    "message_payload",
    "messages_from_events",
    "new_session_id",
    "now_iso",
    "session_tree",
    "set_status",
    "validate_session_id",
]
