"""The control socket of a running team: how ``zero swarm stop``, ``send``, ``pause`` and ``continue`` reach it.

While a team runs, its process listens on ``$ZERO_HOME/control/<team id>.sock``: the folder is the user's
alone (0700, made so again if it was not), the socket too (0600), and a peer of another uid is refused
anyway (``SO_PEERCRED``: root, or a folder whose mode was changed, gets no further). The socket appears
whole (bound and listening under a temporary name, then renamed), so a client that finds no listener
behind a path knows the run that made it was killed, and removes it.

The protocol is one JSON object a line each way, any number of requests a connection: a request
``{"action": "stop" | "send" | "pause" | "continue", "member": NAME or null, "text": "..."}`` (``text``:
``send``'s), an answer ``{"ok": true, "message": "..."}`` or ``{"ok": false, "error": "..."}``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import struct
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from zero.errors import UsageError, ZeroError
from zero.orchestrator.control import ControlRefused
from zero.orchestrator.runner import TeamRunner
from zero.sessions import SessionStore

__all__ = ["ControlUnavailable", "control_path", "request", "serve_control"]

MAX_LINE = 64 * 1024  # a request's bytes: a message is at most 8,000 characters
ANSWER_SECONDS = 10.0
_PATH_MAX = 107  # a unix socket's path, in bytes (sun_path); a longer one is reached through its folder


class ControlUnavailable(UsageError):
    """No run answers on the team's socket: it ended, was killed, or never listened (exit 2)."""

    def __init__(self, message: str, *, killed: bool = False):
        super().__init__(message)
        self.killed = killed  # a socket was there, with nothing listening behind it


def control_path(home: Path, team_id: str) -> Path:
    return home / "control" / f"{team_id}.sock"


def _private_folder(folder: Path) -> None:
    """``folder`` exists, is a real folder of this user, and only this user may enter it."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ZeroError(f"{folder} is not a folder of this user: the team cannot be controlled from elsewhere")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(folder, 0o700)


@contextlib.contextmanager
def _reachable(path: Path) -> Iterator[str]:
    """``path`` as a socket address: itself, or, when too long for one, through an open handle on its folder."""
    if len(os.fsencode(path)) <= _PATH_MAX:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _peer_uid(stream: SocketStream) -> int:
    raw: socket.socket = stream.extra(SocketAttribute.raw_socket)
    creds = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


@contextlib.asynccontextmanager
async def serve_control(runner: TeamRunner, home: Path) -> AsyncIterator[Path]:
    """Listen for ``runner``'s control requests while the block runs; the socket is gone after it."""
    path = control_path(home, runner.session_id)
    _private_folder(path.parent)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a killed run's, of this team (a resumed run takes its place)
    fresh = path.with_name(f".{path.name}.{os.getpid()}")
    with _reachable(fresh) as address:
        listener = await anyio.create_unix_listener(address, mode=0o600)
    try:
        os.rename(fresh, path)
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, lambda stream: _connection(runner, stream))
            try:
                yield path
            finally:
                tg.cancel_scope.cancel()
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        with anyio.CancelScope(shield=True):
            await listener.aclose()


async def _connection(runner: TeamRunner, stream: SocketStream) -> None:
    async with stream:
        if _peer_uid(stream) != os.getuid():
            error = "refused: this team's run belongs to another user"
            await stream.send(json.dumps({"ok": False, "error": error}).encode() + b"\n")
            return
        lines = BufferedByteReceiveStream(stream)
        while True:
            try:
                line = await lines.receive_until(b"\n", MAX_LINE)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                return
            except anyio.DelimiterNotFound:
                await stream.send(json.dumps({"ok": False, "error": f"a request is at most {MAX_LINE} bytes"}).encode())
                return
            answer = await _answer(runner, line)
            try:
                await stream.send(json.dumps(answer, ensure_ascii=False).encode() + b"\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return


async def _answer(runner: TeamRunner, line: bytes) -> dict[str, Any]:
    try:
        asked = json.loads(line)
        if not isinstance(asked, dict):
            raise ValueError("not an object")
    except (ValueError, RecursionError) as e:  # (a line nested too deep to parse is no request either)
        return {"ok": False, "error": f"a request is one JSON object a line: {e}"}
    action, member, text = asked.get("action"), asked.get("member"), asked.get("text")
    if member is not None and not isinstance(member, str):
        return {"ok": False, "error": "member is a member's name, or null"}
    try:
        match action:
            case "stop" if member:
                message = runner.stop_member(member)
            case "send" if member and isinstance(text, str):
                message = await runner.send_member(member, text)
            case "pause":
                message = runner.pause_members(member)
            case "continue":
                message = runner.continue_members(member)
            case _:
                return {"ok": False, "error": f"not a request: {json.dumps(asked)[:200]}"}
    except ControlRefused as e:
        return {"ok": False, "error": str(e)}
    await runner.controls.settled()  # (members on other nodes: told before the user is)
    return {"ok": True, "message": message}


def request(
    store: SessionStore, home: Path, team_id: str, action: str, member: str | None = None, text: str | None = None
) -> str:
    """Ask the run of ``team_id`` to take ``action``; its answer (``ControlRefused`` if it refused,
    ``ControlUnavailable`` if no run listens, saying how the team ended or how to run it again: a socket a
    killed run left is removed)."""
    try:
        return _request(home, team_id, action, member, text)
    except ControlUnavailable as e:
        resume = f"; zero swarm resume {team_id} runs it again"
        if e.killed:
            raise ControlUnavailable(f"{e}{resume}") from None
        meta = store.metadata(team_id)  # (a run that died is repaired to interrupted on the way)
        if meta.status == "interrupted" or not (meta.finished or store.held(team_id)):
            raise ControlUnavailable(f"{e} (it was interrupted){resume}") from None
        if meta.finished:
            raise ControlUnavailable(f"{e}: it ended {meta.status}") from None
        raise


def _request(home: Path, team_id: str, action: str, member: str | None, text: str | None) -> str:
    path = control_path(home, team_id)
    line = json.dumps({"action": action, "member": member, "text": text}, ensure_ascii=False).encode() + b"\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(ANSWER_SECONDS)
        try:
            with _reachable(path) as address:
                client.connect(address)
        except (FileNotFoundError, NotADirectoryError):
            raise ControlUnavailable(f"the team {team_id} is not running") from None
        except ConnectionRefusedError:  # the socket of a run that was killed: nothing listens behind it
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            raise ControlUnavailable(f"the team {team_id} is not running (its run was killed)", killed=True) from None
        except PermissionError:
            raise ControlRefused(f"refused: {path} belongs to another user") from None
        try:
            with contextlib.suppress(BrokenPipeError):  # a refusal may come before the request went
                client.sendall(line)
            answer = client.makefile("rb").readline(MAX_LINE)
        except TimeoutError:
            raise ControlUnavailable(f"the team {team_id} did not answer in {ANSWER_SECONDS:g} s") from None
    try:
        told = json.loads(answer)
    except (ValueError, RecursionError):
        told = None
    if not isinstance(told, dict):
        raise ControlUnavailable(f"the team {team_id} ended before it answered")
    if not told.get("ok"):
        raise ControlRefused(str(told.get("error")))
    return str(told.get("message"))
