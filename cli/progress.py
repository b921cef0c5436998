"""Progress lines for ``zero exec`` text output: one line per tool call, on stderr."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from zero.agent import RunEvent
from zero.tools.describe import describe_call

__all__ = ["TextProgress"]


class TextProgress:
    """Prints ``→ read_file README.md`` as tools run, and why a call failed."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True, highlight=False)

    async def __call__(self, event: RunEvent) -> None:
        if event.kind == "tool_call":
            self.console.print(Text(f"→ {describe_call(event.call.name, event.call.arguments)}", style="dim"))
        elif event.kind == "tool_result" and event.status != "ok":
            first = event.output.strip().splitlines()[0] if event.output.strip() else event.status
            self.console.print(Text(f"  ✗ {first[:160]}", style="red"))
        elif event.kind == "retry":
            self.console.print(Text(f"  ! {event.message}; retrying in {event.delay:.1f} s", style="yellow"))
