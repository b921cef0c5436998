"""Session lineage: a session's ancestors, and the tree of its descendants."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zero.agent import Usage
from zero.errors import SessionError
from zero.sessions.index import Row
from zero.sessions.models import SessionMetadata
from zero.sessions.rollup import Rollup, totals_json
from zero.sessions.store import SessionStore

__all__ = ["SessionNode", "lineage", "session_tree", "subtree_usage"]


@dataclass(kw_only=True)
class SessionNode:
    meta: SessionMetadata
    rollup: Rollup
    children: list[SessionNode] = field(default_factory=list)

    @property
    def children_usage(self) -> Usage:
        """What its descendants spent, from their own logs (see ``rollup``)."""
        return self.rollup.below(self.meta.session_id)

    @property
    def subtree_usage(self) -> Usage:
        return self.rollup.subtree(self.meta.session_id)

    def to_json(self) -> dict[str, Any]:
        data = self.meta.to_json()
        data["childrenUsage"] = totals_json(self.children_usage)
        data["subtreeUsage"] = self.subtree_usage.to_json()
        data["children"] = [c.to_json() for c in self.children]
        return data

    def walk(self) -> list[SessionNode]:
        found = [self]
        for child in self.children:
            found += child.walk()
        return found


def session_tree(store: SessionStore, session_id: str) -> SessionNode:
    """``session_id`` and every session below it, oldest child first (one scan of the store)."""
    root = store.metadata(session_id)
    run = store.rows(tree=root.root_session_id or root.session_id)  # (the sessions of its run: not the store's)
    rows = [root.to_json(), *(r for r in run if r.get("sessionId") != session_id)]
    by_parent: dict[str, list[Row]] = {}
    for row in rows:
        if parent := row.get("parentSessionId"):
            by_parent.setdefault(str(parent), []).append(row)
    rollup = Rollup.of_rows(rows)  # (only the sessions of this tree are read whole)

    def build(meta: SessionMetadata, seen: frozenset[str]) -> SessionNode:
        if meta.session_id in seen:
            raise SessionError(f"session {meta.session_id} is its own ancestor; its metadata is damaged")
        kids = sorted(by_parent.get(meta.session_id, []), key=lambda r: (r.get("createdAt", ""), r["sessionId"]))
        below = seen | {meta.session_id}
        return SessionNode(
            meta=meta, rollup=rollup, children=[build(SessionMetadata.model_validate(k), below) for k in kids]
        )

    return build(root, frozenset())


def subtree_usage(store: SessionStore, session_id: str) -> Usage:
    """What ``session_id`` and every session below it spent (the one fold: see ``rollup``)."""
    return session_tree(store, session_id).subtree_usage


def lineage(store: SessionStore, session_id: str) -> list[SessionMetadata]:
    """The chain from the root session down to ``session_id``."""
    chain = [store.metadata(session_id)]
    while chain[-1].parent_session_id:
        parent = chain[-1].parent_session_id
        if any(m.session_id == parent for m in chain):
            raise SessionError(f"session {session_id} has a cycle in its parents; its metadata is damaged")
        chain.append(store.metadata(parent))
    return list(reversed(chain))
