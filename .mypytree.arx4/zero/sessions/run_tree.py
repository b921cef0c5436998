"""The run tree: every session one command runs, where each sits, who hears its events, and why it stops.

A front end makes one ``RunTree`` for its command (the context holds it); every agent session, team and
member of the run is a node of it. It is the run's one hub: ``emit(event)`` finds the node of the event's
session (one lookup), hands the event to that session's own listeners (its recorder first, so a log reads
in causal order), then to the subscribers of that node and of each node above it. A subscriber of a node
hears its whole subtree: ``zero exec`` reads the top-level session's, ``zero swarm run`` the team's.

It also holds the one stop reason: ``stop(status, under=node)`` marks a node and everything below it with
the status they end with, and (unless told only to mark them) cancels their runs now; a run that ends
asks the tree why (``why``). A node added below a stopping one starts stopping too.

A member running elsewhere (another process, another machine) would be a node like any other: its events
arrive with their session ids, and its stop is a subtree stop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from zero.agent import Event, RunStatus
from zero.errors import SessionError
from zero.sessions.models import SessionKind, SessionMetadata

__all__ = ["Listener", "RunNode", "RunTree"]

Listener = Callable[[Event], None]
"""Hears an event the moment it is emitted; it must not block (the recorder hands events to the store's
writer thread)."""


@dataclass(eq=False, kw_only=True)
class RunNode:
    """One session of the run: its place (parent, root, depth, kind, names), its listeners and its stop."""

    tree: RunTree = field(repr=False)
    session_id: str
    kind: SessionKind = ""
    parent: RunNode | None = None
    parent_session_id: str = ""  # also when the parent is not in this run (a resumed child or member)
    root_session_id: str = ""
    depth: int = 0
    title: str = ""
    team_name: str = ""
    member_name: str = ""
    children: list[RunNode] = field(default_factory=list)
    status: RunStatus | None = None  # set once it is stopping: what it ends as
    closed: bool = False
    own: list[Listener] = field(default_factory=list, repr=False)  # hear its own events, its recorder first
    subscribers: list[Listener] = field(default_factory=list, repr=False)  # hear its subtree's events
    streams: list[MemoryObjectSendStream[Event]] = field(default_factory=list, repr=False)
    _scope: anyio.CancelScope | None = field(default=None, repr=False)

    @property
    def scope(self) -> anyio.CancelScope:
        """The scope of its run in progress, or of the next one (a stop before it began ends it at once)."""
        if self._scope is None:
            self._scope = anyio.CancelScope()
        return self._scope

    def next_run(self) -> None:
        """Its run has ended: the next one gets a scope of its own."""
        self._scope = None

    def walk(self) -> Iterator[RunNode]:
        """This node and every node below it."""
        yield self
        for child in self.children:
            yield from child.walk()


class RunTree:
    """One command's run: its nodes by session id, the one hub of their events, the one stop reason."""

    def __init__(self) -> None:
        self.nodes: dict[str, RunNode] = {}
        self._everyone: list[Listener] = []  # hear every event of the run

    # -- the nodes -----------------------------------------------------------------

    def add(
        self,
        session_id: str,
        *,
        kind: SessionKind = "",
        under: RunNode | None = None,
        title: str = "",
        team_name: str = "",
        member_name: str = "",
    ) -> RunNode:
        """A session of this run below ``under`` (None: a root), one deeper, on ``under``'s root."""
        return self._keep(
            RunNode(
                tree=self,
                session_id=session_id,
                kind=kind,
                parent=under,
                parent_session_id=under.session_id if under else "",
                root_session_id=under.root_session_id if under else session_id,
                depth=under.depth + 1 if under else 0,
                title=title,
                team_name=team_name or (under.team_name if under else ""),
                member_name=member_name,
            )
        )

    def recorded(self, meta: SessionMetadata, *, under: RunNode | None = None) -> RunNode:
        """A recorded session run again (a resume, a fork), where its metadata places it; ``under``: the node
        of this run it runs below (a Task resumed by its parent), if any."""
        return self._keep(
            RunNode(
                tree=self,
                session_id=meta.session_id,
                kind=meta.session_kind,
                parent=under,
                parent_session_id=meta.parent_session_id,
                root_session_id=meta.root_session_id or meta.session_id,
                depth=under.depth + 1 if under else meta.depth,
                title=meta.title,
                team_name=meta.team_name,
                member_name=meta.member_name,
            )
        )

    def _keep(self, node: RunNode) -> RunNode:
        old = self.nodes.get(node.session_id)
        if old is not None:
            if not old.closed:
                raise SessionError(f"session {node.session_id} is running already")
            if old.parent is not None:
                old.parent.children.remove(old)
        if node.parent is not None:
            node.parent.children.append(node)
            node.status = node.parent.status  # below a stopping node, it stops too
        self.nodes[node.session_id] = node
        return node

    def close(self, node: RunNode) -> None:
        """``node``'s session has closed: its subscribers' streams end (after what they have not read yet). Its
        own listeners stay: a session stopped before it could run still gets its final status recorded. The
        node stays too, for what reads the run."""
        node.closed = True
        for stream in node.streams:
            stream.close()
        node.streams = []

    # -- the hub -------------------------------------------------------------------

    def attach(self, node: RunNode, listener: Listener) -> None:
        """``listener`` hears ``node``'s own events, after those attached before it (the recorder first)."""
        node.own.append(listener)

    def listen(self, listener: Listener, *, under: RunNode | None = None) -> None:
        """``listener`` hears every event of ``under``'s subtree (None: of the whole run) at once, in order; it
        must not block."""
        (under.subscribers if under is not None else self._everyone).append(listener)

    def subscribe(self, under: RunNode) -> MemoryObjectReceiveStream[Event]:
        """A stream of every event of ``under``'s subtree from now on; it ends when ``under`` closes. A
        consumer that falls behind never slows the agents, and loses nothing."""
        send, receive = anyio.create_memory_object_stream[Event](math.inf)
        if under.closed:
            send.close()
        else:
            under.streams.append(send)
        return receive

    def emit(self, event: Event) -> None:
        node = self.nodes.get(event.session_id)
        if node is not None:
            for listener in node.own:
                listener(event)
        above = node
        while above is not None:
            for listener in above.subscribers:
                listener(event)
            for stream in above.streams:
                try:
                    stream.send_nowait(event)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    above.streams = [s for s in above.streams if s is not stream]  # that consumer left
            above = above.parent
        for listener in self._everyone:
            listener(event)

    # -- the stop --------------------------------------------------------------------

    def stop(self, status: RunStatus, *, under: RunNode, cancel: bool = True) -> None:
        """``under`` and everything below it end ``status`` when they stop; ``cancel``: stop their runs now
        (else they go on until something else ends them: a spent budget's next call, their parent's end)."""
        for node in under.walk():
            node.status = status
            if cancel:
                node.scope.cancel()

    def why(self, node: RunNode) -> RunStatus:
        """What ``node``'s run ends as when it is cancelled: the status it is stopping with, else ``cancelled``
        (a parent's stop)."""
        return node.status or "cancelled"
