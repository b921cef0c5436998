"""Plain progress for ``zero swarm run``: one line per state change, no escape codes."""

from __future__ import annotations

import time
from collections.abc import Mapping

from anyio.streams.memory import MemoryObjectReceiveStream
from rich.console import Console
from rich.text import Text

from zero.agent import (
    ChildFinished,
    ChildStarted,
    Event,
    LandChanged,
    Paused,
    RateLimitWait,
    RetryScheduled,
    TeamMessageSent,
    TeamStarted,
    Usage,
    WarningRaised,
    format_cost,
    waiting_text,
)
from zero.orchestrator import TeamPlan
from zero.orchestrator.control import USER
from zero.orchestrator.view import landing_state
from zero.tools.describe import printable
from zero.tools.worktrees import DiffStat

__all__ = ["PlainProgress"]


class PlainProgress:
    """Prints when the team starts (with its session id), when a member or a Task child starts,
    ends or is skipped, retries, pauses or gets a message from you, and an isolated member's work committed
    and landed (or not)."""

    def __init__(self, plan: TeamPlan, console: Console, *, spent: Mapping[str, Usage] | None = None):
        """``spent``: what sessions spent in earlier runs (a resumed team), so a member's line says its total."""
        self.plan = plan
        self.console = console
        self._spent = dict(spent or {})
        self.started = time.monotonic()
        self._names: dict[str, str] = {}
        self._started: set[str] = set()
        self._width = max((len(n) for n in plan.members), default=8)

    def _line(self, name: str, text: str, style: str = "") -> None:
        stamp = f"[{time.monotonic() - self.started:6.1f}s]"
        self.console.print(Text(printable(f"{stamp} {name:<{self._width}}  {text}"), style=style))

    async def consume(self, events: MemoryObjectReceiveStream[Event]) -> None:
        async with events:
            async for event in events:
                self.write(event)

    def write(self, event: Event) -> None:
        if isinstance(event, TeamStarted):
            self._names.update({m.session_id: m.name for m in event.members})
            self._line(
                self.plan.name,
                f"team started: {len(self.plan.members)} members in {len(self.plan.waves)} waves"
                f" · follow it with: zero swarm watch {event.session_id}",
                "bold",
            )
        elif isinstance(event, ChildStarted):
            parent = self._names.get(event.session_id)
            if event.member is None and parent is not None:
                self._names[event.child_session_id] = f"{parent}>{event.name}"
            name = self._names.get(event.child_session_id, event.name)
            self._started.add(event.child_session_id)
            self._line(name, f"running ({event.specialist})", "cyan")
        elif isinstance(event, ChildFinished):
            name = self._names.get(event.child_session_id, event.child_session_id)
            if event.child_session_id not in self._started:  # it never ran: skipped, or the team stopped first
                self._line(name, f"{event.status}: {event.reason}", "yellow")
                return
            style = "green" if event.status == "completed" else "red"
            usage = self._spent.get(event.child_session_id, Usage()) + event.usage
            self._line(
                name,
                f"{event.status} · {usage.total_tokens:,} tokens · {format_cost(usage)} · "
                f"{event.duration_ms / 1000:.1f}s",
                style,
            )
        elif isinstance(event, RetryScheduled):
            name = self._names.get(event.session_id, event.session_id)
            text = f"retrying in {event.delay_seconds:.1f}s ({event.code}: {event.message[:80]})"
            self._line(name, text, "yellow")
        elif isinstance(event, RateLimitWait):
            self._line(self._names.get(event.session_id, event.session_id), waiting_text(event), "yellow")
        elif isinstance(event, Paused):
            name = self._names.get(event.session_id, event.session_id)
            self._line(name, "paused: waits before its next model call" if event.paused else "continues", "yellow")
        elif isinstance(event, TeamMessageSent) and event.sender == USER:
            self._line(event.to, f"message from you: {event.body[:80]}", "cyan")
        elif isinstance(event, LandChanged) and (event.files or event.state not in ("committed", "nothing_to_land")):
            stat = DiffStat(files=event.files, added=event.added, removed=event.removed)
            style = "red" if event.state in ("conflict", "check_failed") else "green" if event.state == "landed" else ""
            self._line(event.member, f"{event.branch} {stat} · {landing_state(event)}", style)
        elif isinstance(event, WarningRaised):
            name = self._names.get(event.session_id, event.session_id)
            self._line(name, f"warning: {event.message} ({event.code})", "yellow")
