"""The loopback model server the tests talk to: a client that goes away is no error of the server (a test that
kills Zero resets its connections), while an error of the server's own code is still printed."""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Any

import pytest
from support.llm_server import LLMServer, Reply, openai_reply

POST = b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}"


def handled(earlier: set[threading.Thread]) -> None:
    """Wait until every connection a server took since ``earlier`` (the threads then) has been handled to its end
    (a thread of an earlier test's server may still wait on its reply)."""
    deadline = time.monotonic() + 10
    while any("process_request_thread" in t.name for t in set(threading.enumerate()) - earlier):
        assert time.monotonic() < deadline, "the server still handles a connection"
        time.sleep(0.01)


def reset(server: LLMServer, sent: bytes, *, answered: bool = False, asked: bool = False) -> None:
    """Connect, send ``sent``, read the answer (``answered``) or wait until the server has the request
    (``asked``), then reset the connection (as the kernel does for a process killed with its connections open)."""
    before, earlier = len(server.requests), set(threading.enumerate())
    with socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1]))) as client:
        client.sendall(sent)
        deadline = time.monotonic() + 10
        while asked and len(server.requests) == before:
            assert time.monotonic() < deadline, "the server never took the request"
            time.sleep(0.01)
        if answered:
            received = b""
            while not received.endswith(b"0\r\n\r\n"):  # the end of a chunked stream
                received += client.recv(65536)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handled(earlier)


def test_a_client_that_resets_its_connections_is_no_error_of_the_server(capfd: pytest.CaptureFixture[str]) -> None:
    with LLMServer(lambda request: openai_reply("hi")) as server:
        reset(server, POST, answered=True)  # while the server waits for the next request on it
        reset(server, POST[:-2])  # mid-request
    with LLMServer(lambda request: Reply(429, body={"error": {"message": "slow down"}}, delay=0.2)) as server:
        reset(server, POST, asked=True)  # before its answer: the server writes to a reset connection
    assert capfd.readouterr().err == ""


def test_an_error_of_the_servers_own_code_is_still_printed(capfd: pytest.CaptureFixture[str]) -> None:
    def broken(request: dict[str, Any]) -> Reply:
        raise ValueError("a bug of the fake server")

    with LLMServer(broken) as server:
        reset(server, POST, asked=True)
    assert "ValueError: a bug of the fake server" in capfd.readouterr().err
