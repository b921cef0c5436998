"""Which stored sessions an editor may take over ACP, and the one answer for each it may not.

A request names its workspace with an absolute ``cwd``, checked before anything else. A session is
offered and taken only if it is a top-level one, its stored workspace is an absolute path to a folder
that exists and is the one asked for (by file-system identity), and its metadata and log can be read
whole: a damaged session gets the same error from ``session/load``, ``session/resume`` and
``session/fork`` and is not listed (``zero sessions list`` shows one whose metadata is damaged as
``damaged``; ``zero sessions show`` says what is wrong with a log). Anything else would be offered and then
refused.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from acp import RequestError

from zero.agent import Message
from zero.errors import ZeroError
from zero.sessions import (
    FileSessionStore,
    SessionMetadata,
    SessionStore,
    messages_from_events,
    same_folder,
    session_workspace,
    validate_session_id,
)

__all__ = ["DAMAGED", "Checked", "damaged", "history", "listable", "recorded", "requested"]

DAMAGED = -32603  # the JSON-RPC code of a session that cannot be read (an internal error of its files)


def requested(cwd: str | None) -> Path:
    """The workspace a request names: an absolute path to a folder, or invalid params."""
    if cwd is None or not cwd.strip():
        raise RequestError.invalid_params({"message": "cwd is required: an absolute path to the workspace"})
    if not os.path.isabs(cwd):
        raise RequestError.invalid_params({"message": f"cwd must be an absolute path, not {cwd!r}"})
    if not os.path.isdir(cwd):
        raise RequestError.invalid_params({"message": f"cwd {cwd} is not a folder"})
    return Path(os.path.realpath(cwd))


def recorded(store: SessionStore, session_id: str, workspace: Path) -> SessionMetadata:
    """The session's metadata, if it exists, is a top-level one and belongs to ``workspace``; else the error
    that says which (a damaged one: ``damaged``)."""
    try:
        validate_session_id(session_id)
    except ZeroError:
        raise RequestError.resource_not_found(session_id) from None
    if not store.exists(session_id):
        raise RequestError.resource_not_found(session_id)
    try:
        meta = store.metadata(session_id)
    except (ZeroError, ValueError, OSError) as e:
        raise damaged(session_id, str(e)) from None
    if meta.parent_session_id or meta.session_kind in ("team", "member", "child"):
        raise RequestError.invalid_params({"message": f"{session_id} is not a top-level session"})
    try:
        session_workspace(meta, workspace)
    except ZeroError as e:
        raise RequestError.invalid_params({"message": str(e)}) from None
    return meta


def history(store: SessionStore, meta: SessionMetadata) -> list[Message]:
    """The conversation the session's log holds (empty if it never ran); ``damaged`` if the log cannot be
    read whole."""
    try:
        return _conversation(store, meta)
    except (ZeroError, ValueError, OSError) as e:
        raise damaged(meta.session_id, str(e)) from None


def damaged(session_id: str, why: str) -> RequestError:
    message = (
        f"session {session_id} is damaged and cannot be loaded or resumed: {why} "
        f"(zero sessions show {session_id} says more)"
    )
    return RequestError(DAMAGED, message, {"sessionId": session_id, "status": "damaged", "reason": why})


class Checked:
    """Which sessions' files read whole, remembered while neither file changes (a listing reads many)."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[tuple[int, ...], bool]] = {}

    def readable(self, store: FileSessionStore, row: dict[str, Any]) -> bool:
        session_id = str(row["sessionId"])
        folder = store.path(session_id)
        try:
            key = tuple(n for f in ("metadata.json", "events.jsonl") for n in _stamp(folder / f))
        except OSError:
            return False
        seen = self._seen.get(session_id)
        if seen is None or seen[0] != key:
            ok = True
            try:
                _conversation(store, store.metadata(session_id))
            except (ZeroError, ValueError, OSError):
                ok = False
            seen = self._seen[session_id] = key, ok
        return seen[1]


def listable(
    store: FileSessionStore, workspaces: Sequence[Path], checked: Checked, start: int, count: int
) -> tuple[list[dict[str, Any]], int | None]:
    """A page of the sessions a client may take in ``workspaces``, newest first, from position ``start``;
    and where the next page starts (None: this is the last)."""
    rows = [row for row in store.rows() if _offered(row, workspaces)]
    page: list[dict[str, Any]] = []
    for at in range(start, len(rows)):
        if len(page) == count:
            return page, at
        if checked.readable(store, rows[at]):
            page.append(rows[at])
    return page, None


def _offered(row: dict[str, Any], workspaces: Sequence[Path]) -> bool:
    """A top-level session whose stored workspace is an absolute path to one of ``workspaces``."""
    if row.get("parentSessionId") or row.get("sessionKind") in ("team", "member", "child"):
        return False  # children and members appear in their parent's replay
    stored = str(row.get("cwd") or "")
    return os.path.isabs(stored) and any(same_folder(stored, w) for w in workspaces)


def _conversation(store: SessionStore, meta: SessionMetadata) -> list[Message]:
    """The session's conversation, read whole from its log (``SessionError`` if it lost events)."""
    return messages_from_events(e.event for e in store.events(meta.session_id))


def _stamp(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns
