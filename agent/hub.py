"""Fan-out of events to the consumers of a run.

Listeners are called in order, at once, and must not block (the session recorder hands
events to the store's writer thread; a parent relays its child's events up). Every other
consumer reads its own memory object stream, so one that falls behind (a terminal nobody
reads, a slow pipe) never slows the agents, and nothing is lost: its stream keeps what it
has not read yet.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from zero.agent.events import Event

__all__ = ["EventHub", "Listener"]

Listener = Callable[[Event], None]


class EventHub:
    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._streams: list[MemoryObjectSendStream[Event]] = []
        self.closed = False

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def subscribe(self) -> MemoryObjectReceiveStream[Event]:
        """A stream of every event emitted from now on; it ends when the hub closes."""
        send, receive = anyio.create_memory_object_stream[Event](math.inf)
        if self.closed:
            send.close()
        else:
            self._streams.append(send)
        return receive

    def emit(self, event: Event) -> None:
        for listener in self._listeners:
            listener(event)
        for stream in self._streams:
            try:
                stream.send_nowait(event)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._streams = [s for s in self._streams if s is not stream]  # that consumer left

    def close(self) -> None:
        """End every subscriber's stream (after what it has not read yet)."""
        self.closed = True
        for stream in self._streams:
            stream.close()
        self._streams = []
