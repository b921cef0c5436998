"""Progress lines for ``zero exec`` text output: one line per tool call and child agent, on stderr."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from zero.agent import RunEvent
from zero.specialists import format_cost
from zero.tools.describe import describe_call

__all__ = ["TextProgress"]


class TextProgress:
    """Prints ``→ read_file README.md`` as tools run, which specialists start and end, and failures."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True, highlight=False)
        self._names: dict[str, str] = {}

    def _prefix(self, session_id: str) -> str:
        name = self._names.get(session_id)
        return f"  [{name}] " if name else ""

    async def __call__(self, event: RunEvent) -> None:
        prefix = self._prefix(event.session_id)
        if event.kind == "subagent_started":
            self._names[event.session_id] = event.agent_name
            label = f": {event.description}" if event.description else ""
            self.console.print(Text(f"⇢ {event.agent_name}{label}", style="cyan"))
        elif event.kind == "subagent_finished":
            name = self._names.get(event.session_id, event.session_id)
            style = "green" if event.status == "completed" else "red"
            self.console.print(
                Text(
                    f"⇠ {name} {event.status} · {event.duration_ms / 1000:.1f} s · {event.usage.total_tokens} tokens"
                    f" · cost {format_cost(event.usage.cost_usd)}",
                    style=style,
                )
            )
        elif event.kind == "tool_call":
            self.console.print(Text(f"{prefix}→ {describe_call(event.call.name, event.call.arguments)}", style="dim"))
        elif event.kind == "tool_result" and event.status != "ok":
            first = event.output.strip().splitlines()[0] if event.output.strip() else event.status
            self.console.print(Text(f"{prefix}  ✗ {first[:160]}", style="red"))
        elif event.kind == "retry":
            self.console.print(Text(f"{prefix}  ! {event.message}; retrying in {event.delay:.1f} s", style="yellow"))
