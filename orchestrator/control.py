"""Steering a running team: which members are paused, and the messages the user sent them.

A team's runner holds one ``Controls``; each member's agent gets a ``ControlGuard`` (its Task children
inherit it). Before every model call the guard waits while the member is paused (saying so with a
``pause`` event; it goes before the budget's guard, so a paused member holds no reservation and spends
nothing), and hands the member's own next call the messages sent to it, which the model reads as one user
message, recorded in the member's session. The actions arrive through the run's control socket
(``zero.orchestrator.control_socket``) and are the runner's (``TeamRunner.stop_member``, ``send_member``,
``pause_members``, ``continue_members``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel

from zero.agent import CallPermit, Event, ModelRequest, Paused, Usage
from zero.errors import UsageError

__all__ = ["USER", "ControlGuard", "ControlRefused", "Controls", "Mirror", "user_message"]

USER = "user"
"""The sender of a message from ``zero swarm send``, as the team's log and the views name it."""


class ControlRefused(UsageError):
    """An action the running team cannot take: no such member, or it has ended (exit 2)."""


def user_message(texts: Iterable[str]) -> str:
    """What a member's model reads of the messages the user sent it while it worked."""
    body = "\n\n".join(texts)
    return f"A message from the user who runs this team, sent while you work (zero swarm send):\n\n{body}"


Mirror = Callable[[str, list[str], str], list[Awaitable[object]]]
"""Told each change of a ``Controls``: ``("pause" | "resume" | "post", member names, text)``; what to await until
the change has reached where the members run (``Controls.settled``)."""


@dataclass(kw_only=True)
class Controls:
    """The paused members and each member's undelivered messages, shared by the runner and the guards.
    ``mirror``: told each change (members on other nodes have a ``Controls`` of their own there)."""

    paused: set[str] = field(default_factory=set)
    inbox: dict[str, list[str]] = field(default_factory=dict)
    mirror: Mirror | None = None
    _changed: anyio.Event = field(default_factory=anyio.Event)
    _sent: list[Awaitable[object]] = field(default_factory=list)  # mirrored changes not known to have arrived

    def pause(self, names: Iterable[str]) -> None:
        names = list(names)
        self.paused.update(names)
        self._mirrored("pause", names, "")

    def resume(self, names: Iterable[str]) -> None:
        names = list(names)
        self.paused.difference_update(names)
        self._changed.set()  # the waiting guards look again
        self._changed = anyio.Event()
        self._mirrored("resume", names, "")

    def post(self, member: str, text: str) -> None:
        if self.mirror is not None:
            self._mirrored("post", [member], text)
            return
        self.inbox.setdefault(member, []).append(text)

    def _mirrored(self, action: str, names: list[str], text: str) -> None:
        if self.mirror is not None:
            self._sent += self.mirror(action, names, text)

    async def settled(self) -> None:
        """Return once every change so far has reached where its members run (at once in one process): the
        user is told "it reads it before its next model call" only when that is so."""
        sent, self._sent = self._sent, []
        for arrival in sent:
            await arrival

    def take(self, member: str) -> list[str]:
        return self.inbox.pop(member, [])

    async def wait_while_paused(self, member: str) -> None:
        while member in self.paused:
            await self._changed.wait()


class ControlGuard:
    """The call guard of one member (and its Task children): waits while it is paused; hands its own calls
    the user's messages."""

    def __init__(self, controls: Controls, member: str, session_id: str, emit: Callable[[Event], None]):
        self.controls = controls
        self.member = member
        self.session_id = session_id
        self.emit = emit

    async def before_call(self, request: ModelRequest, run_usage: Usage) -> CallPermit | None:
        await anyio.lowlevel.checkpoint()  # a stop that came during a tool that never yielded: no call after it
        caller = request.metadata.get("session_id", self.session_id)  # the member, or one of its Task children
        if self.member in self.controls.paused:
            self.emit(Paused(session_id=caller, paused=True))
            await self.controls.wait_while_paused(self.member)
            self.emit(Paused(session_id=caller, paused=False))
        if caller == self.session_id and (texts := self.controls.take(self.member)):
            return CallPermit(note=user_message(texts))
        return None

    async def before_retry(self, permit: CallPermit | None) -> None:
        return None

    async def after_call(self, permit: CallPermit | None, usage: Usage | None) -> None:
        return None
