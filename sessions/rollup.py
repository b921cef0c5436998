"""One fold for what sessions spent, used by every view that shows a total.

A session's own usage comes from its own log (its metadata's ``usage``); its subtree's is its own
plus the subtree of each child, the children found by ``parentSessionId``. A parent's log is not
asked what its children spent: a run killed with a child open never wrote that child's
``child_end``, but the child's log holds every call it made. So ``sessions tree`` and ``list``, a
team's result, the live footer, the shell's bar and ``/cost`` and the budget a resumed team starts
with all show the same figures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from zero.agent import ChildFinished, ChildStarted, Usage
from zero.sessions.models import UsageTotals
from zero.sessions.store import SessionStore

__all__ = ["Rollup", "close_open_children", "totals_json"]


class Rollup:
    """Sessions' own usage (``own(id)``) and their subtrees', given who each session's children are."""

    def __init__(self, own: Callable[[str], Usage], children: Mapping[str, Sequence[str]]):
        self._own = own
        self._children = children
        self._below: dict[str, Usage] = {}

    @classmethod
    def of_rows(cls, rows: Iterable[Mapping[str, Any]]) -> Rollup:
        """From index rows (``metadata.json`` as stored), reading a row's usage only when a total needs it;
        of two rows of one session, the first."""
        by_id: dict[str, Mapping[str, Any]] = {}
        for row in rows:
            if "damaged" not in row:
                by_id.setdefault(str(row["sessionId"]), row)
        return cls(
            lambda sid: UsageTotals.model_validate(by_id[sid].get("usage") or {}).to_usage(),
            _children((sid, str(r.get("parentSessionId") or "")) for sid, r in by_id.items()),
        )

    def own(self, session_id: str) -> Usage:
        return self._own(session_id)

    def below(self, session_id: str) -> Usage:
        """What the session's descendants spent (a cycle of damaged metadata is counted once)."""
        return self._below_of(session_id, frozenset())

    def subtree(self, session_id: str) -> Usage:
        """What the session and its descendants spent."""
        return self.own(session_id) + self.below(session_id)

    def _below_of(self, session_id: str, seen: frozenset[str]) -> Usage:
        if session_id in self._below:
            return self._below[session_id]
        seen = seen | {session_id}
        total = Usage()
        for child in self._children.get(session_id, ()):
            if child not in seen:
                total = total + self.own(child) + self._below_of(child, seen)
        self._below[session_id] = total
        return total


def _children(links: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for session_id, parent in links:
        if parent:
            found.setdefault(parent, []).append(session_id)
    return found


def totals_json(usage: Usage) -> dict[str, Any]:
    """A total as the metadata spells usage (``UsageTotals``: every field, camelCase)."""
    return UsageTotals.of(usage).model_dump(by_alias=True, mode="json")


OPEN_REASON = "the run that started it ended before it did (killed, or it crashed)"


def close_open_children(store: SessionStore, session_id: str) -> list[ChildFinished]:
    """Record the ``child_end`` of every child a dead run of ``session_id`` left open (started, never
    ended): the status its own session ended with (``interrupted``, for one that died with the run), and
    what its subtree spent beyond what the parent recorded of it, so the parent's ``childrenUsage`` is the
    fold again. Call it holding the session, as a resume does; the events it wrote."""
    starts: dict[str, ChildStarted] = {}
    runs: dict[str, int] = {}
    recorded: dict[str, Usage] = {}
    for stored in store.events(session_id):
        event = stored.event
        if isinstance(event, ChildStarted):
            starts[event.child_session_id] = event
            runs[event.child_session_id] = runs.get(event.child_session_id, 0) + 1
        elif isinstance(event, ChildFinished):
            runs[event.child_session_id] = runs.get(event.child_session_id, 0) - 1
            recorded[event.child_session_id] = recorded.get(event.child_session_id, Usage()) + event.usage
    ends: list[ChildFinished] = []
    rollup: Rollup | None = None
    for child, open_runs in runs.items():
        if open_runs <= 0 or not store.exists(child):
            continue
        meta = store.metadata(child)  # a dead run's child is repaired on the way: interrupted
        if not meta.finished:  # never started (it spent nothing), or running in this process after all
            continue
        rollup = rollup or Rollup.of_rows(store.rows(tree=meta.root_session_id or meta.session_id))
        start = starts[child]
        ends.append(
            ChildFinished(
                session_id=session_id,
                child_session_id=child,
                status=meta.status,
                usage=rollup.subtree(child) - recorded.get(child, Usage()),
                specialist=start.specialist,
                member=start.member,
                reason=OPEN_REASON,
            )
        )
    if ends:
        store.append(session_id, ends)
    return ends
