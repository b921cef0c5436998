"""Sessions: the agent session, the run tree, the stores (on disk and in memory), ids, metadata, the recorder,
replay and lineage."""

from __future__ import annotations

from zero.sessions.agent_session import AgentSession, Delegating, ToolSet
from zero.sessions.fork import fork_session
from zero.sessions.ids import new_session_id, short_id, validate_session_id
from zero.sessions.lineage import SessionNode, lineage, session_tree, subtree_usage
from zero.sessions.memory import MemorySessionStore
from zero.sessions.models import (
    SessionKind,
    SessionMetadata,
    StoredEvent,
    UsageTotals,
    apply_event,
    now_iso,
    record_of,
)
from zero.sessions.recorder import SessionRecorder
from zero.sessions.replay import messages_from_events
from zero.sessions.rollup import Rollup, close_open_children, totals_json
from zero.sessions.run_tree import Listener, RunNode, RunTree
from zero.sessions.store import FileSessionStore, SessionStore, default_data_dir, parse_log, records_json
from zero.sessions.workspace import same_folder, session_workspace

__all__ = [
    "AgentSession",
    "Delegating",
    "FileSessionStore",
    "Listener",
    "MemorySessionStore",
    "Rollup",
    "RunNode",
    "RunTree",
    "SessionKind",
    "SessionMetadata",
    "SessionNode",
    "SessionRecorder",
    "SessionStore",
    "StoredEvent",
    "ToolSet",
    "UsageTotals",
    "apply_event",
    "close_open_children",
    "default_data_dir",
    "fork_session",
    "lineage",
    "messages_from_events",
    "new_session_id",
    "now_iso",
    "parse_log",
    "record_of",
    "records_json",
    "same_folder",
    "session_tree",
    "session_workspace",
    "short_id",
    "subtree_usage",
    "totals_json",
    "validate_session_id",
]
