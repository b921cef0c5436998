"""Progress lines for ``zero exec`` text output: one line per tool call and child agent, on stderr."""

from __future__ import annotations

from anyio.streams.memory import MemoryObjectReceiveStream
from rich.console import Console
from rich.text import Text

from zero.agent import ChildFinished, ChildStarted, Event, RetryScheduled, ToolCallStarted, ToolFinished
from zero.specialists import format_cost
from zero.tools.describe import describe_call

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
        name = self._names.get(event.session_id)
        prefix = f"  [{name}] " if name else ""
        if isinstance(event, ChildStarted):
            self._names[event.child_session_id] = event.name
            label = f": {event.description}" if event.description else ""
            self.console.print(Text(f"⇢ {event.name}{label}", style="cyan"))
        elif isinstance(event, ChildFinished):
            child = self._names.get(event.child_session_id, event.child_session_id)
            style = "green" if event.status == "completed" else "red"
            self.console.print(
                Text(
                    f"⇠ {child} {event.status} · {event.duration_ms / 1000:.1f} s · {event.usage.total_tokens} tokens"
                    f" · cost {format_cost(event.usage.cost_usd)}",
                    style=style,
                )
            )
        elif isinstance(event, ToolCallStarted):
            self.console.print(Text(f"{prefix}→ {describe_call(event.name, event.arguments)}", style="dim"))
        elif isinstance(event, ToolFinished) and event.status != "ok":
            first = event.output.strip().splitlines()[0] if event.output.strip() else event.status
            self.console.print(Text(f"{prefix}  ✗ {first[:160]}", style="red"))
        elif isinstance(event, RetryScheduled):
            text = f"{prefix}  ! {event.message}; retrying in {event.delay_seconds:.1f} s"
            self.console.print(Text(text, style="yellow"))
