"""Team messaging: ``send_message(to, body)`` and ``read_inbox()`` for members.

Every message is a durable ``team_message`` event of the team session; the inbox of
a member is what was sent to it (or to everyone) that it has not read yet.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import anyio.to_thread
from pydantic import Field

from zero.agent import TeamMessageSent
from zero.errors import ToolError
from zero.sessions import SessionStore
from zero.tools import ArgsModel, BuiltinTool, ToolContext, ToolOutput

__all__ = ["Mailbox", "ReadInbox", "SendMessage"]

MAX_BODY = 8_000
MAX_SENT = 50
EVERYONE = "all"


@dataclass(kw_only=True)
class _Message:
    id: int
    sender: str
    to: str
    body: str


@dataclass(kw_only=True)
class Mailbox:
    store: SessionStore
    team_session_id: str
    members: list[str]
    _messages: list[_Message] = field(default_factory=list)
    _read: dict[str, int] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def send(self, sender: str, to: str, body: str) -> str:
        if to != EVERYONE and to not in self.members:
            others = ", ".join(m for m in self.members if m != sender)
            raise ToolError(f"there is no member named {to!r}; send to one of: {others}, or {EVERYONE!r}")
        if to == sender:
            raise ToolError("you cannot send a message to yourself")
        if sum(m.sender == sender for m in self._messages) >= MAX_SENT:
            raise ToolError(f"you have sent {MAX_SENT} messages, the most a member may send in one run")
        number = await self.record(sender, to, body)
        self._messages.append(_Message(id=number, sender=sender, to=to, body=body))
        return f"Message {number} delivered to {to}."

    async def record(self, sender: str, to: str, body: str) -> int:
        """Put a message in the team's log (its number); a member's, or the user's (``zero swarm send``, which
        reaches the member before its next model call instead of through ``read_inbox``)."""
        if len(body) > MAX_BODY:
            raise ToolError(f"the message is {len(body)} characters; the limit is {MAX_BODY}. Shorten it.")
        number = next(self._ids)
        event = TeamMessageSent(session_id=self.team_session_id, id=number, sender=sender, to=to, body=body)
        await anyio.to_thread.run_sync(self.store.append, self.team_session_id, [event])
        return number

    def read(self, member: str) -> str:
        start = self._read.get(member, 0)
        mine = [m for m in self._messages if m.id > start and m.sender != member and m.to in (member, EVERYONE)]
        if self._messages:
            self._read[member] = self._messages[-1].id
        if not mine:
            return "No new messages."
        return "\n\n".join(
            f"[{m.id}] from {m.sender}{' (to all)' if m.to == EVERYONE else ''}:\n{m.body}" for m in mine
        )


class SendArgs(ArgsModel):
    to: str = Field(description=f"The member to send to, or {EVERYONE!r} for every member.")
    body: str = Field(min_length=1, description="The message.")


class SendMessage(BuiltinTool[SendArgs]):
    """Talking to teammates changes nothing in the workspace, so it counts as ``read``."""

    name = "send_message"
    description = "Send a message to another member of your team (they read it with read_inbox)."
    side_effect = "read"
    args = SendArgs

    def __init__(self, mailbox: Mailbox, member: str):
        self.mailbox = mailbox
        self.member = member

    async def run(self, args: SendArgs, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(text=await self.mailbox.send(self.member, args.to, args.body))


class InboxArgs(ArgsModel):
    pass


class ReadInbox(BuiltinTool[InboxArgs]):
    name = "read_inbox"
    description = "Read the messages other members of your team sent you since you last looked."
    side_effect = "read"
    args = InboxArgs

    def __init__(self, mailbox: Mailbox, member: str):
        self.mailbox = mailbox
        self.member = member

    async def run(self, args: InboxArgs, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(text=self.mailbox.read(self.member))
