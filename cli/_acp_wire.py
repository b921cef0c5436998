"""The wire of ``zero acp``: newline-delimited JSON-RPC on stdio, strict about what it is sent.

A line that is not JSON gets a parse error, a batch (a JSON array) gets an error for each request in it
(ACP speaks one message a line), and anything else that is not a JSON-RPC object gets an invalid-request
error: each is answered and the connection goes on, where the SDK's own reader would log a traceback or
stop. The SDK's log lines reach stderr as one line each, their tracebacks only with ``--debug``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import selectors
import stat
import sys
import threading
from typing import Any, Protocol

import anyio

__all__ = ["LIMIT", "Wire", "quiet_logs", "stdio"]

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
LIMIT = 64 * 1024 * 1024  # one message: an embedded file can be large, but not this large


class Output(Protocol):
    """Where the wire writes: a ``StreamWriter`` or ``_FileOutput``."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


async def stdio() -> tuple[asyncio.StreamReader, Output]:
    """The process's stdin and stdout as streams, whatever they are: the event loop watches a pipe, a socket or
    a terminal; a regular file or ``/dev/null`` (``zero acp < requests.jsonl > replies.jsonl``), which it cannot
    watch, is read on a thread and written as it comes (the SDK's ``stdio_streams`` crashed on a file and hung on
    ``/dev/null``)."""
    loop = asyncio.get_running_loop()  # (a closed stdin is /dev/null by now, and a closed stdout refused: cli.main)
    reader = asyncio.StreamReader(limit=LIMIT)
    if _watchable(sys.stdin.fileno(), selectors.EVENT_READ):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    else:
        threading.Thread(target=_feed, args=(sys.stdin.fileno(), reader, loop), daemon=True).start()
    if not _watchable(sys.stdout.fileno(), selectors.EVENT_WRITE):
        return reader, _FileOutput(sys.stdout.fileno())
    transport, protocol = await loop.connect_write_pipe(_Drained, sys.stdout)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


def _watchable(fd: int, events: int) -> bool:
    """Whether the event loop can watch ``fd`` (epoll refuses a regular file and ``/dev/null``)."""
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        with selectors.DefaultSelector() as selector:
            selector.register(fd, events)
    except (OSError, ValueError):
        return False
    return True


def _feed(fd: int, reader: asyncio.StreamReader, loop: asyncio.AbstractEventLoop) -> None:
    """Read ``fd`` to its end into ``reader`` (on a thread: a read of a file does not wait for a writer)."""
    try:
        while chunk := os.read(fd, 1 << 16):
            loop.call_soon_threadsafe(reader.feed_data, chunk)
        loop.call_soon_threadsafe(reader.feed_eof)
    except OSError as e:
        loop.call_soon_threadsafe(reader.set_exception, e)
    except RuntimeError:  # the loop closed: the process is ending
        pass


class _Drained(asyncio.streams.FlowControlMixin):
    """The protocol of stdout's pipe: what ``StreamWriter.drain`` waits on."""


class _FileOutput:
    """stdout when it is a regular file or a device: each write written whole at once (a file takes it without
    waiting)."""

    def __init__(self, fd: int):
        self.fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None


class Wire:
    """A JSON-RPC message transport (the SDK's ``Transport``) over the process's stdin and stdout."""

    def __init__(self, reader: asyncio.StreamReader, writer: Output):
        self._reader = reader
        self._writer = writer
        self._sending = anyio.Lock()
        self._asked: set[Any] = set()  # the ids of the requests received and not answered yet
        self._all_answered: anyio.Event | None = None

    async def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        async with self._sending:  # one message a line: writes never interleave
            self._writer.write(data)
            await self._writer.drain()
        if "method" not in message and self._asked:
            self._asked.discard(message.get("id"))
            if not self._asked and self._all_answered is not None:
                self._all_answered.set()

    async def answered(self) -> None:
        """Until every request received has had its answer."""
        while self._asked:
            self._all_answered = anyio.Event()
            await self._all_answered.wait()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._line()
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError as e:
                await self._refuse(None, PARSE_ERROR, f"Parse error: not JSON ({e})")
                continue
            except RecursionError:
                await self._refuse(None, PARSE_ERROR, "Parse error: nested too deeply to read")
                continue
            if isinstance(message, dict) and (
                isinstance(message.get("method"), str)
                or ("id" in message and ("result" in message or "error" in message))
            ):
                if "id" in message and "method" in message:
                    self._asked.add(message["id"])
                return message  # a request, a notification, or the answer to one of ours
            if isinstance(message, dict):
                why = "Invalid Request: a message needs a method (a request), or a result or an error (an answer)"
                await self._refuse(message.get("id"), INVALID_REQUEST, why)
                continue
            if isinstance(message, list):
                ids = [m["id"] for m in message if isinstance(m, dict) and "method" in m and "id" in m]
                why = "Invalid Request: batches are not supported; send one JSON-RPC message a line"
                for request_id in ids or [None]:
                    await self._refuse(request_id, INVALID_REQUEST, why)
                continue
            await self._refuse(None, INVALID_REQUEST, "Invalid Request: a message is a JSON-RPC object")

    async def close(self) -> None:
        self._writer.close()

    async def _line(self) -> bytes | None:
        """The next line (None at the end); one over the size limit is skipped with an error."""
        try:
            line = await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as e:
            return e.partial or None
        except asyncio.LimitOverrunError:
            while True:  # drop the rest of the oversized line
                try:
                    await self._reader.readuntil(b"\n")
                    break
                except asyncio.LimitOverrunError as e:
                    await self._reader.readexactly(e.consumed)
                except asyncio.IncompleteReadError:
                    return None
            await self._refuse(None, INVALID_REQUEST, f"Invalid Request: a message over {LIMIT:,} bytes")
            return b""
        return line

    async def _refuse(self, request_id: Any, code: int, message: str) -> None:
        await self.send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


class _OneLine(logging.Formatter):
    """A log record as one line: what went wrong, never the traceback (that is for ``--debug``)."""

    def format(self, record: logging.LogRecord) -> str:
        reason = f": {record.exc_info[1]}" if record.exc_info and record.exc_info[1] else ""
        return f"zero acp: {record.getMessage()}{reason}"


def quiet_logs(debug: bool) -> None:
    """Send the SDK's log records to stderr: one line each, or in full with ``--debug``."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("zero acp: %(message)s") if debug else _OneLine())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
