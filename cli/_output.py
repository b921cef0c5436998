"""Terminal and pipe output that never blocks the event loop.

A ``write()`` to a pipe whose reader stopped reading (or to a terminal paused with Ctrl-S)
blocks the thread that calls it; on the event loop that would stall every agent. A
``BackgroundWriter`` hands each write to a thread of its own, which writes them in order;
the agents go on, and nothing is lost: ``close()`` waits until everything is written.
"""

from __future__ import annotations

import contextlib
import io
import os
import queue
import select
import stat
import threading
from collections.abc import Callable
from typing import TextIO

__all__ = ["BackgroundWriter"]


class BackgroundWriter(io.TextIOBase):
    """A text stream whose ``write`` returns at once; a thread writes to ``target`` in order.

    If the reader goes away (a closed pipe), later writes are dropped, ``broken`` and ``left`` are set, and
    ``on_left`` is called (on a thread of the writer's): a run whose reader left has no one to work for.
    """

    def __init__(self, target: TextIO):
        self.target = target
        self.broken = False
        self.left = False  # the reader closed its end of the pipe
        self.on_left: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self.error: Exception | None = None  # why the target could not be written (``close`` raises it)
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="zero-output", daemon=True)
        self._thread.start()
        self._closed = False
        if (fd := _pipe_of(target)) is not None:  # a reader that leaves is seen at once, not at the next write
            threading.Thread(target=self._watch, args=(fd,), name="zero-output-reader", daemon=True).start()

    def write(self, text: str) -> int:
        if text and not self._closed:
            self._queue.put(text)
        return len(text)

    def flush(self) -> None:
        return None  # the thread flushes after every batch it writes

    def isatty(self) -> bool:
        return self.target.isatty()

    def fileno(self) -> int:
        return self.target.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.target, "encoding", None) or "utf-8"

    def close(self) -> None:
        """Wait until everything written so far has reached the target (or raise why it could not)."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join()
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while True:  # take what else is waiting, and write it with one call
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            end = None in batch
            text = "".join(t for t in batch if t is not None)
            if text and not self.broken:
                try:
                    self.target.write(text)
                    self.target.flush()
                except UnicodeError as e:  # (not a closed file's ValueError: the text, not the reader)
                    self.broken, self.error = True, e
                except BrokenPipeError:
                    self._gone()
                except (ValueError, OSError):
                    self.broken = True  # (closed, or failing: nothing more reaches it)
                except Exception as e:  # noqa: BLE001 (an OutputError of the checked stdout: close raises it)
                    self.broken, self.error = True, e
            if end:
                return

    def _watch(self, fd: int) -> None:
        """Until the pipe's reader closes its end (the kernel reports an error on ours), or the process ends."""
        poll = select.poll()
        poll.register(fd, 0)  # (an error or a hang-up is always reported)
        with contextlib.suppress(OSError):
            while not poll.poll():
                pass
            self._gone()

    def _gone(self) -> None:
        """The reader left: drop the rest, and say so once."""
        with self._lock:
            if self.left:
                return
            self.broken = self.left = True
        if self.on_left is not None:
            with contextlib.suppress(Exception):
                self.on_left()


def _pipe_of(target: TextIO) -> int | None:
    """The descriptor of ``target`` if it is a pipe (or a socket) whose reader may leave."""
    try:
        fd = target.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return None
    return fd if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else None
