"""Session ids as a user types them: a whole id, a unique prefix of it or of its last part (the
short id the tree shows), or ``last``. (ACP and MCP take whole ids only, and never say which exist.)"""

from __future__ import annotations

import difflib
from pathlib import Path

from zero.errors import UsageError
from zero.sessions import FileSessionStore, SessionKind, same_folder, validate_session_id
from zero.sessions.index import Row

__all__ = ["LAST", "resolve_session_id"]

LAST = "last"


def resolve_session_id(
    store: FileSessionStore, text: str, *, here: Path | None = None, kind: SessionKind | None = None
) -> str:
    """The session ``text`` names; ``UsageError`` (exit 2) naming the closest ids, or the matches of an
    ambiguous prefix. ``last``: the newest top-level session (of the folder ``here``, if given; of ``kind``,
    if given: ``swarm resume last`` is the newest team)."""
    if text == LAST:
        return _last(store.rows(), here, kind)
    validate_session_id(text)
    folder = store.root / text  # (a folder whose metadata is missing, or a link, is a damaged session: rm takes it)
    if folder.is_symlink() or store.exists(text) or folder.is_dir():
        return text
    rows = store.rows()
    ids = [str(r.get("sessionId", "")) for r in rows]
    matches = [i for i in ids if i.startswith(text) or i.rsplit("_", 1)[-1].startswith(text)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = "\n  ".join(matches[:10]) + (f"\n  ... and {len(matches) - 10} more" if len(matches) > 10 else "")
        raise UsageError(f"{text!r} matches {len(matches)} sessions; give more of the id:\n  {shown}")
    close = difflib.get_close_matches(text, ids, n=3, cutoff=0.6)
    hint = f"; the closest: {', '.join(close)}" if close else ""
    raise UsageError(f"no session {text} in {store.root}{hint} (zero sessions list shows them)")


def _last(rows: list[Row], here: Path | None, kind: SessionKind | None) -> str:
    for row in rows:  # newest first
        if row.get("parentSessionId") or (kind is not None and row.get("sessionKind") != kind):
            continue
        if here is not None and not same_folder(str(row.get("cwd") or ""), here):
            continue
        return str(row["sessionId"])
    where = f" of {here}" if here is not None else ""
    raise UsageError(f"there is no {'team run' if kind == 'team' else 'session'}{where} yet")
