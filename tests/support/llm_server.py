"""A loopback HTTP server that speaks the OpenAI and Anthropic streaming wire formats.

Tests queue replies (or give a function choosing one per request); the real SDK
clients talk to it over real HTTP. A reply can fail with a status, or stream some
events and then cut the connection mid-way.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    events: list[tuple[str | None, str]] = field(default_factory=list)  # (SSE event name, data)
    body: dict[str, Any] | None = None  # a JSON (error) body instead of a stream
    headers: dict[str, str] = field(default_factory=dict)
    cut_after: int | None = None  # close the connection after this many events
    delay: float = 0.0
    batch: int = 1  # events a write (a benchmark's long stream is sent in big writes, so the server keeps up)
    pace: float = 0.0  # seconds between writes (a server that streams slowly)
    hold: threading.Event | None = None  # answer once this is set (a call under way while a test acts)


Responder = Callable[[dict[str, Any]], Reply]


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024  # hundreds of clients connect at once in the benchmark

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a killed process resets its connections, idle or mid-answer) ends its
        connection quietly; any other error of a handler is printed, as the standard library does."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class LLMServer:
    def __init__(self, responder: Responder | None = None, *, backlog: int = _Server.request_queue_size):
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.responder = responder
        self.hung_up = threading.Event()  # a client closed its connection while its stream was written
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = self.rfile.read(length)
                if len(body) < length:  # the client went away mid-request (a process killed): not a request
                    self.close_connection = True
                    return
                request = json.loads(body or b"{}")
                request["_path"] = self.path
                request["_headers"] = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.requests.append(request)
                    if server.responder is not None:
                        reply = server.responder(request)
                    elif server.replies:
                        reply = server.replies.popleft()
                    else:
                        reply = Reply(500, body={"error": {"message": "no reply queued", "type": "server_error"}})
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.hold is not None:
                    reply.hold.wait(timeout=60)
                if reply.body is not None or reply.status != 200:
                    data = json.dumps(reply.body or {}).encode()
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self._stream(reply)
                except (BrokenPipeError, ConnectionResetError):
                    server.hung_up.set()
                    self.close_connection = True

            def _stream(self, reply: Reply) -> None:
                for start in range(0, len(reply.events), reply.batch):
                    if reply.cut_after is not None and start >= reply.cut_after:
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    if reply.pace and start:
                        time.sleep(reply.pace)
                    frames = reply.events[start : start + reply.batch]
                    raw = "".join((f"event: {n}\n" if n else "") + f"data: {p}\n\n" for n, p in frames).encode()
                    self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        # the queue of connections not yet taken: a fan-out larger than it overflows it, as a busy server's
        self._server = type("_Queued", (_Server,), {"request_queue_size": backlog})(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def enqueue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def __enter__(self) -> LLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


# -- OpenAI chat completions chunks ---------------------------------------------


def _chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: dict[str, Any] | None = None) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4.1-mini",
            "choices": choices,
            "usage": usage,
        }
    )


def openai_reply(
    text: str = "",
    tool_calls: list[tuple[str, str, dict[str, Any]]] = (),  # type: ignore[assignment]
    usage: tuple[int, int] = (10, 5),
    cached: int = 0,
    pieces: int = 3,
) -> Reply:
    """A streamed completion: text in a few deltas, tool arguments split over several chunks."""
    events: list[tuple[str | None, str]] = [(None, _chunk({"role": "assistant", "content": ""}))]
    for part in _split(text, pieces):
        events.append((None, _chunk({"content": part})))
    for index, (call_id, name, args) in enumerate(tool_calls):
        raw = json.dumps(args)
        events.append(
            (
                None,
                _chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call_id,
                                "type": "function",
                                "function": {"name": name, "arguments": ""},
                            }
                        ]
                    }
                ),
            )
        )
        for part in _split(raw, pieces):
            events.append((None, _chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})))
    events.append((None, _chunk({}, "tool_calls" if tool_calls else "stop")))
    events.append(
        (
            None,
            _chunk(
                None,
                usage={
                    "prompt_tokens": usage[0],
                    "completion_tokens": usage[1],
                    "total_tokens": sum(usage),
                    "prompt_tokens_details": {"cached_tokens": cached},
                },
            ),
        )
    )
    events.append((None, "[DONE]"))
    return Reply(events=events)


# -- Anthropic messages events ---------------------------------------------------


def anthropic_reply(
    text: str = "",
    tool_calls: list[tuple[str, str, dict[str, Any]]] = (),  # type: ignore[assignment]
    usage: tuple[int, int] = (10, 5),
    cached: int = 0,
    pieces: int = 3,
) -> Reply:
    def ev(name: str, payload: dict[str, Any]) -> tuple[str | None, str]:
        return name, json.dumps({"type": name, **payload})

    events = [
        ev(
            "message_start",
            {
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "claude-sonnet-4-6",
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": usage[0] - cached,
                        "output_tokens": 1,
                        "cache_read_input_tokens": cached,
                        "cache_creation_input_tokens": 0,
                    },
                }
            },
        ),
        ev("ping", {}),
    ]
    index = 0
    if text:
        events.append(ev("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}))
        for part in _split(text, pieces):
            events.append(ev("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": part}}))
        events.append(ev("content_block_stop", {"index": 0}))
        index = 1
    for offset, (call_id, name, args) in enumerate(tool_calls):
        i = index + offset
        events.append(
            ev(
                "content_block_start",
                {"index": i, "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}},
            )
        )
        for part in _split(json.dumps(args), pieces):
            events.append(
                ev("content_block_delta", {"index": i, "delta": {"type": "input_json_delta", "partial_json": part}})
            )
        events.append(ev("content_block_stop", {"index": i}))
    events.append(
        ev(
            "message_delta",
            {
                "delta": {"stop_reason": "tool_use" if tool_calls else "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": usage[1]},
            },
        )
    )
    events.append(ev("message_stop", {}))
    return Reply(events=events)


def _split(text: str, pieces: int) -> Iterator[str]:
    if not text:
        return
    size = max(1, -(-len(text) // pieces))
    for i in range(0, len(text), size):
        yield text[i : i + size]


def error_reply(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, body={"type": "error", "error": {"message": message, "type": kind}}, headers=headers or {})


@contextlib.contextmanager
def unanswered() -> Iterator[str]:
    """The URL of a port that never takes a connection: it listens, but its queue is full (two
    connections wait in it, never accepted), so the kernel drops a new one's SYN and a connect times out."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        waiting = [socket.socket() for _ in range(3)]
        try:
            for s in waiting:
                s.setblocking(False)
                s.connect_ex(listener.getsockname())
            yield f"http://127.0.0.1:{listener.getsockname()[1]}"
        finally:
            for s in waiting:
                s.close()
