"""Progress lines for ``zero exec`` text output: one line per tool call and child agent, on stderr."""

from __future__ import annotations

from anyio.streams.memory import MemoryObjectReceiveStream
from rich.console import Console
from rich.text import Text

from zero.agent import (
    ChildFinished,
    ChildStarted,
    Event,
    RateLimitWait,
    RetryScheduled,
    ToolCallStarted,
    ToolFinished,
    WarningRaised,
    format_cost,
    waiting_text,
)
from zero.tools.describe import describe_call, printable

__all__ = ["TextProgress"]


class TextProgress:
    """Prints ``→ read_file README.md`` as tools run, which specialists start and end, and failures."""

    def __init__(self, console: Console):
        self.console = console
        self._names: dict[str, str] = {}

    async def consume(self, events: MemoryObjectReceiveStream[Event]) -> None:
        async with events:
            async for event in events:
                self.write(event)

    def write(self, event: Event) -> None:
        self._write(event)

    def _print(self, text: str, style: str) -> None:
        self.console.print(Text(printable(text), style=style))

    def _write(self, event: Event) -> None:
        name = self._names.get(event.session_id)
        prefix = f"  [{name}] " if name else ""
        if isinstance(event, ChildStarted):
            self._names[event.child_session_id] = event.name
            label = f": {event.description}" if event.description else ""
            self._print(f"⇢ {event.name}{label}", "cyan")
        elif isinstance(event, ChildFinished):
            child = self._names.get(event.child_session_id, event.child_session_id)
            style = "green" if event.status == "completed" else "red"
            self._print(
                f"⇠ {child} {event.status} · {event.duration_ms / 1000:.1f} s · {event.usage.total_tokens:,} tokens"
                f" · cost {format_cost(event.usage)}",
                style,
            )
        elif isinstance(event, ToolCallStarted):
            self._print(f"{prefix}→ {describe_call(event.name, event.arguments)}", "dim")
        elif isinstance(event, ToolFinished) and event.status != "ok":
            first = event.output.strip().splitlines()[0] if event.output.strip() else event.status
            self._print(f"{prefix}  ✗ {first[:160]}", "red")
        elif isinstance(event, RetryScheduled):
            text = f"{prefix}  ! {event.message}; retrying in {event.delay_seconds:.1f} s"
            self._print(text, "yellow")
        elif isinstance(event, RateLimitWait):
            self._print(f"{prefix}  … {waiting_text(event)}", "yellow")
        elif isinstance(event, WarningRaised):
            self._print(f"{prefix}! warning: {event.message} ({event.code})", "yellow")
