"""A stdio MCP server's transport, reading what it answers with a cap (the SDK's reads any line whole).

A server that answers with a line over ``LINE_CAP`` (a 50 MB tool result) would take the client's memory
and, while the line is joined chunk by chunk, its time. Here such a line is read through, keeping its first
and last ``KEEP`` bytes only, and becomes the answer a tool result trimmed to its head and tail would be:
the same request id, the text it began and ended with, and a note of how much was left out (an error
result: what the server meant is not all there). The server's other answers go on arriving as they come.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import mcp_types
from anyio.abc import ByteReceiveStream, Process
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from zero.agent.mcpconfig import GRACE_SECONDS, HOST_ENDING, HURRY_SECONDS

__all__ = ["KEEP", "LINE_CAP", "stdio_transport"]

LINE_CAP = 4 * 1024 * 1024  # bytes of one message read whole
KEEP = 64 * 1024  # of a longer one: its first and last bytes
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
_TEXT = re.compile(rb'"text"\s*:\s*"')


@asynccontextmanager
async def stdio_transport(
    command: str,
    args: list[str],
    env: dict[str, str],
    cwd: str | None,
    errlog: Any,
    exited: Callable[[int], None] = lambda code: None,
) -> AsyncIterator[tuple[Any, Any]]:
    """The server's process, and the streams of messages to and from it, until the block ends; then the
    server is stopped as the MCP spec says (stdin closed, a grace period, then its process group killed).
    A server whose output ends by itself (it exited) is given to ``exited`` with its exit code before the
    client learns that the connection closed, so what failed can be said first."""
    process = await anyio.open_process(
        [command, *args], env=get_default_environment() | env, cwd=cwd, stderr=errlog, start_new_session=True
    )
    to_client, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_server, from_client = anyio.create_memory_object_stream[SessionMessage](0)

    async def read() -> None:
        assert process.stdout is not None
        async with to_client:
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                async for line in lines(process.stdout):
                    await to_client.send(_message(line))
            with anyio.move_on_after(1):  # (a server that only closed its stdout is not waited for longer)
                exited(await process.wait())

    async def write() -> None:
        assert process.stdin is not None
        async with from_client:
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                async for message in from_client:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        tg.start_soon(write)
        try:
            yield from_server, to_server
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
            tg.cancel_scope.cancel()


async def lines(stream: ByteReceiveStream) -> AsyncIterator[bytes]:
    """The lines of ``stream``; one longer than ``LINE_CAP`` as its first and last ``KEEP`` bytes joined by a
    marker holding the count of bytes left out (``\\0CUT n\\0``), read through without holding it."""
    buffer = bytearray()
    head: bytes | None = None  # of a line over the cap: its start, and how much of it went by
    dropped = 0
    with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        async for chunk in stream:
            start = len(buffer)
            buffer += chunk
            while (end := buffer.find(b"\n", start)) >= 0:
                line = bytes(buffer[:end])
                del buffer[: end + 1]
                start = 0
                if head is not None:
                    line = head + b"\0CUT %d\0" % (dropped + max(0, len(line) - KEEP)) + line[-KEEP:]
                    head, dropped = None, 0
                yield line
            if head is None and len(buffer) > LINE_CAP:
                head, dropped = bytes(buffer[:KEEP]), 0
                del buffer[:KEEP]
            if head is not None and len(buffer) > KEEP:
                dropped += len(buffer) - KEEP
                del buffer[: len(buffer) - KEEP]
    if buffer.strip():
        yield bytes(buffer)


def _message(line: bytes) -> SessionMessage | Exception:
    if b"\0CUT " in line:
        return _trimmed(line)
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as e:
        return e


def _trimmed(line: bytes) -> SessionMessage | Exception:
    """The answer a line over the cap stood for: its request's id, and a result of the text it began and
    ended with (the middle left out, as tool output is trimmed)."""
    head, _, rest = line.partition(b"\0CUT ")
    count, _, tail = rest.partition(b"\0")
    found = _ID.search(head) or next(reversed(list(_ID.finditer(tail))), None)
    if found is None:
        return ValueError(f"the MCP server sent a message of over {LINE_CAP:,} bytes with no request id")
    request_id = json.loads(found.group(1))
    start = _TEXT.search(head)
    first = _string_start(head[start.end() :]) if start else ""
    last = _string_end(tail)
    note = (
        f"[the MCP server's answer was over {LINE_CAP:,} bytes: Zero read its first and last {KEEP:,}, and "
        f"{int(count):,} bytes between them are left out]\n"
    )
    # An error: what the server meant is not all here (and its structured content, if any, is not).
    text = note + first + "\n[...]\n" + last
    result = {"content": [{"type": "text", "text": text}], "isError": True, "resultType": "complete"}
    return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_python(
        {"jsonrpc": "2.0", "id": request_id, "result": result}
    ))  # fmt: skip


def _string_start(data: bytes) -> str:
    """The text of a JSON string that begins ``data`` (cut off where ``data`` ends)."""
    text = data.decode("utf-8", "ignore")
    for end in range(len(text), max(-1, len(text) - 12), -1):  # back off a cut escape (\\uXXXX at most)
        try:
            value = json.loads('"' + text[:end].split('"', 1)[0] + '"')
            return str(value)
        except ValueError:
            continue
    return ""


def _string_end(data: bytes) -> str:
    """The text of the end of a JSON string that ``data`` begins inside of, up to its closing quote."""
    text = data.decode("utf-8", "ignore")
    close = re.search(r'(?<!\\)"\s*[,}]', text)
    if close is None:
        return ""
    piece = text[: close.start()]
    for begin in range(0, min(len(piece), 12)):  # skip a cut escape at the start
        try:
            return str(json.loads('"' + piece[begin:] + '"'))
        except ValueError:
            continue
    return ""


async def _stop(process: Process) -> None:
    """Close the server's stdin, give it its grace to exit, then end its process group."""
    assert process.stdin is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    ending = HOST_ENDING.get()
    grace = HURRY_SECONDS if ending is not None and ending.is_set() else GRACE_SECONDS
    with anyio.move_on_after(grace):
        await process.wait()
    if process.returncode is None:
        await terminate_posix_process_tree(process, grace)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.aclose()
