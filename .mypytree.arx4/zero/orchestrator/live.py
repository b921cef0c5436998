"""Showing a run's tree: drawn live from its events (a Rich ``Live``), or followed from its session logs.

Both feed the same ``TeamTree`` the same events, so ``zero swarm watch`` from another terminal
and ``zero sessions tree`` afterwards show what the live view showed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream
from rich.console import Console, RenderableType
from rich.live import Live

from zero.agent import TERMINAL, Event, Usage
from zero.orchestrator.view import NodeKind, TeamTree, TreeNode, epoch, render_tree
from zero.sessions import SessionMetadata, SessionNode, SessionStore, session_tree

__all__ = ["Follower", "draw_live", "follow_run", "node_of", "root_node", "settle", "tree_from_store"]

MAX_FPS = 10


async def draw_live(tree: TeamTree, events: MemoryObjectReceiveStream[Event], console: Console) -> None:
    """Draw ``tree`` in place until ``events`` end, at most ``MAX_FPS`` times a second.

    Events only update the model (cheap); a separate task redraws when something changed, or
    once a second for the clocks, and backs off if drawing gets slow, so the view costs the run
    next to nothing.
    """
    live = Live(
        console=console,
        auto_refresh=False,
        transient=False,
        redirect_stdout=False,
        redirect_stderr=False,
        vertical_overflow="visible",
    )
    with live, events:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_redraw, tree, live, console)
            async for event in events:
                tree.apply(event)
            tg.cancel_scope.cancel()
        live.update(_frame(tree, console), refresh=True)


def _frame(tree: TeamTree, console: Console) -> RenderableType:
    return render_tree(tree, budget=tree.budget(), max_lines=console.height)


async def _redraw(tree: TeamTree, live: Live, console: Console) -> None:
    seen = -1
    last = 0.0
    interval = 1 / MAX_FPS
    while True:
        await anyio.sleep(interval)
        now = time.monotonic()
        if tree.changes == seen and now - last < 1.0:
            continue
        seen, last = tree.changes, now
        started = time.perf_counter()
        live.update(_frame(tree, console), refresh=True)
        cost = time.perf_counter() - started
        interval = max(1 / MAX_FPS, cost * 20)  # drawing takes at most ~5 % of the time


# -- following a run from its session logs ------------------------------------------------


def root_node(meta: SessionMetadata) -> TreeNode:
    """The tree's root for a session read from disk."""
    return node_of(meta)


def node_of(meta: SessionMetadata, *, parent: str | None = None) -> TreeNode:
    """A session read from disk as a node: the root (``parent`` None), or below ``parent``."""
    kinds: dict[str, NodeKind] = {"team": "team", "member": "member", "child": "child"}  # (a fork: a child)
    kind: NodeKind = (
        kinds.get(meta.session_kind, "child") if parent else "team" if meta.session_kind == "team" else "root"
    )
    name = meta.team_name if kind == "team" else ""
    name = name or meta.member_name or meta.specialist or meta.agent_name or meta.title or meta.session_id
    return TreeNode(
        session_id=meta.session_id, name=name, kind=kind, specialist=meta.specialist, model=meta.model_id, parent=parent
    )


class Follower:
    """Reads the logs of a session and of every session below it, as they grow, into a tree."""

    def __init__(self, store: SessionStore, tree: TeamTree):
        self.store = store
        self.tree = tree
        self.cursors: dict[str, int] = {}
        tree.on_child = self.watch
        self.watch(tree.root_id)

    def watch(self, session_id: str) -> None:
        self.cursors.setdefault(session_id, 0)

    def poll(self) -> bool:
        """Read what every watched log gained, until nothing more came (sessions found on the way
        are read too). True if anything was read."""
        changed = False
        while True:
            new = False
            for session_id in list(self.cursors):
                if not self.store.exists(session_id):
                    continue
                events, self.cursors[session_id] = self.store.events_since(session_id, self.cursors[session_id])
                for stored in events:
                    self.tree.apply(stored.event, at=epoch(stored.created_at))
                    new = True
            if not new:
                return changed
            changed = True

    @property
    def done(self) -> bool:
        return self.tree.root.status in TERMINAL


def tree_from_store(store: SessionStore, session_id: str, *, clock: Callable[[], float] | None = None) -> TeamTree:
    """The tree of a run as its sessions recorded it (see ``settle``). ``clock``: now, for a tree that goes
    on live (the wall clock: the logs' times are epoch seconds); else the time of its last event."""
    return _followed(store, session_id, clock)[0]


def _followed(store: SessionStore, session_id: str, clock: Callable[[], float] | None) -> tuple[TeamTree, Follower]:
    sessions = session_tree(store, session_id)
    root = root_node(sessions.meta)
    tree = TeamTree(root, clock=clock or (lambda: root.finished or _latest(tree)))
    follower = Follower(store, tree)
    follower.poll()
    for found in sessions.walk():  # a session its parent's log does not name (a run died before it did)
        if found.meta.session_id not in tree.nodes:
            tree.add(node_of(found.meta, parent=found.meta.parent_session_id))  # (the follower reads it too)
    follower.poll()
    settle(tree, sessions)
    return tree, follower


def settle(tree: TeamTree, sessions: SessionNode) -> None:
    """Make ``tree`` say what the sessions say: every session below the root (by ``parentSessionId``) is a
    node, whether or not its parent's log named it; a finished session's status and own usage are its
    metadata's (a dead run's session is repaired to ``interrupted``; one that never ran stays ``pending``),
    so every view totals the same fold (``sessions.rollup``). A running session's metadata may lag its log:
    its node keeps what the events said, unknown cost included."""
    for found in sessions.walk():
        meta = found.meta
        node = tree.nodes.get(meta.session_id)
        if node is None:
            node = tree.add(node_of(meta, parent=meta.parent_session_id))
        if meta.finished:
            if node.status != meta.status:
                node.reason = ""
            node.status, node.usage, node.activity = meta.status, meta.usage.to_usage(), ""
            continue
        if meta.usage.partly_unpriced:
            node.usage = node.usage + Usage(cost_usd=None)
        if meta.status == "pending" and sessions.meta.finished:  # its parent said it starts, then the run died
            node.status, node.activity = "pending", ""
    tree.changes += 1


def _latest(tree: TeamTree) -> float:
    return max((n.last_event for n in tree.nodes.values()), default=0.0)


async def follow_run(store: SessionStore, session_id: str, console: Console, *, poll: float = 0.25) -> TeamTree:
    """Draw a run that another process is running, from its session logs, until it ends (without a
    terminal, only the tree it ended with is printed)."""
    tree, follower = await anyio.to_thread.run_sync(_followed, store, session_id, time.time)
    with (
        Live(console=console, auto_refresh=False, vertical_overflow="visible")
        if console.is_terminal
        else _Quiet() as live
    ):
        while True:
            await anyio.to_thread.run_sync(follower.poll)
            ended = follower.done
            if not ended:
                current = await anyio.to_thread.run_sync(store.metadata, session_id)
                if current.finished:  # ended without a last event (its process died)
                    tree.root.status = current.status
                # one that never started, with nothing running it, will not start: nothing more to see
                ended = current.finished or (
                    current.status == "pending" and not await anyio.to_thread.run_sync(store.held, session_id)
                )
            if ended:  # the last frame says what the sessions say, as sessions tree does
                settle(tree, await anyio.to_thread.run_sync(session_tree, store, session_id))
            frame = render_tree(tree, budget=tree.budget(), max_lines=console.height)
            if ended:
                break
            live.update(frame, refresh=True)
            await anyio.sleep(poll)
        live.update(frame, refresh=True)
    if not console.is_terminal:
        console.print(frame)
    return tree


class _Quiet:
    """A ``Live`` that draws nothing, for a console that is not a terminal."""

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, renderable: RenderableType, *, refresh: bool = False) -> None:
        return None
