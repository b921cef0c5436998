"""Showing a run's tree: drawn live from its events (a Rich ``Live``), or followed from its session logs.

Both feed the same ``TeamTree`` the same events, so ``zero swarm watch`` from another terminal
and ``zero sessions tree`` afterwards show what the live view showed.
"""

from __future__ import annotations

import time

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream
from rich.console import Console, RenderableType
from rich.live import Live

from zero.agent import TERMINAL, Event
from zero.orchestrator.view import TeamTree, TreeNode, epoch, render_tree
from zero.sessions import SessionMetadata, SessionStore

__all__ = ["Follower", "draw_live", "follow_run", "root_node", "tree_from_store"]

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
    kind = "team" if meta.session_kind == "team" else "root"
    name = meta.team_name if kind == "team" else ""
    name = name or meta.member_name or meta.specialist or meta.agent_name or meta.title or meta.session_id
    return TreeNode(meta.session_id, name, kind, specialist=meta.specialist, model=meta.model_id)


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


def tree_from_store(store: SessionStore, session_id: str) -> TeamTree:
    """The tree of a run as its sessions recorded it; a session the logs leave unfinished (its
    process died) shows the status its metadata gives it."""
    meta = store.metadata(session_id)
    root = root_node(meta)
    tree = TeamTree(root, clock=lambda: root.finished or _latest(tree))
    Follower(store, tree).poll()
    for node in tree.nodes.values():
        if node.status not in TERMINAL and store.exists(node.session_id):
            node.status = store.metadata(node.session_id).status
    return tree


def _latest(tree: TeamTree) -> float:
    return max((n.last_event for n in tree.nodes.values()), default=0.0)


async def follow_run(store: SessionStore, session_id: str, console: Console, *, poll: float = 0.25) -> TeamTree:
    """Draw a run that another process is running, from its session logs, until it ends (without a
    terminal, only the tree it ended with is printed)."""
    meta = await anyio.to_thread.run_sync(store.metadata, session_id)
    tree = TeamTree(root_node(meta), clock=time.time)
    follower = Follower(store, tree)
    with (
        Live(console=console, auto_refresh=False, vertical_overflow="visible")
        if console.is_terminal
        else _Quiet() as live
    ):
        while True:
            await anyio.to_thread.run_sync(follower.poll)
            if not follower.done:
                current = await anyio.to_thread.run_sync(store.metadata, session_id)
                if current.finished:  # ended without a last event (its process died)
                    tree.root.status = current.status
            frame = render_tree(tree, budget=tree.budget(), max_lines=console.height)
            if follower.done:
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
