"""Plain progress for ``zero swarm run``: one line per state change, no escape codes."""

from __future__ import annotations

import time

from rich.console import Console
from rich.text import Text

from zero.agent import RunEvent
from zero.orchestrator import TeamRunner
from zero.specialists import format_cost

__all__ = ["PlainProgress"]


class PlainProgress:
    """Prints when a member or a Task child starts, ends or is skipped, and retries."""

    def __init__(self, runner: TeamRunner, console: Console):
        self.runner = runner
        self.console = console
        self.started = time.monotonic()
        self._names = {s.session_id: s.name for s in runner.members.values()}
        self._width = max((len(n) for n in runner.members), default=8)

    def _line(self, name: str, text: str, style: str = "") -> None:
        stamp = f"[{time.monotonic() - self.started:6.1f}s]"
        self.console.print(Text(f"{stamp} {name:<{self._width}}  {text}", style=style))

    async def __call__(self, event: RunEvent) -> None:
        if event.kind == "run_started" and event.session_id == self.runner.session_id:
            plan = self.runner.plan
            self._line(plan.name, f"team started: {len(plan.members)} members in {len(plan.waves)} waves", "bold")
        elif event.kind == "subagent_started":
            parent = self._names.get(event.parent_session_id)
            if event.member is None and parent is not None:
                self._names[event.session_id] = f"{parent}>{event.agent_name}"
            name = self._names.get(event.session_id, event.agent_name)
            self._line(name, f"running ({event.specialist})", "cyan")
        elif event.kind == "subagent_finished":
            name = self._names.get(event.session_id, event.session_id)
            style = "green" if event.status == "completed" else "red"
            self._line(
                name,
                f"{event.status} · {event.usage.total_tokens} tokens · "
                f"{format_cost(event.usage.cost_usd)} · {event.duration_ms / 1000:.1f}s",
                style,
            )
        elif event.kind == "status_changed":
            name = self._names.get(event.session_id, event.session_id)
            self._line(name, f"{event.status}: {event.reason}", "yellow")
        elif event.kind == "retry":
            name = self._names.get(event.session_id, event.session_id)
            self._line(name, f"retrying in {event.delay:.1f}s ({event.code}: {event.message[:80]})", "yellow")
