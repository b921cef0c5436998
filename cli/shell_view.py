"""What the interactive shell shows of a turn as it happens.

The model's text streams into a live region (rendered as Markdown) and is printed for good when the
message completes; each tool call becomes one line, its result summarised on the next (an error in
full); each ``Task`` child is a live sub-tree under the turn (the team tree's renderer) while it runs,
and one line with its status, duration, tokens, cost and session id when it ends.
"""

from __future__ import annotations

from typing import assert_never

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.text import Text

from zero.agent import (
    AssistantText,
    BudgetTripped,
    ChildFinished,
    ChildStarted,
    Compacted,
    ErrorRaised,
    Event,
    LandChanged,
    MessageAdded,
    ModelStreaming,
    Paused,
    PermissionDecided,
    PermissionRequested,
    RateLimitWait,
    Reasoning,
    RetryScheduled,
    RunFinished,
    RunStarted,
    StatusChanged,
    TeamFinished,
    TeamMessageSent,
    TeamStarted,
    ToolCallStarted,
    ToolFinished,
    UsageUpdated,
    WarningRaised,
    format_cost,
    waiting_text,
)
from zero.orchestrator.view import TeamTree, TreeNode, render_tree
from zero.tools.describe import describe_call, printable

__all__ = ["TurnView"]

TICK = 0.25  # seconds between redraws of running children (their clocks)


class TurnView:
    """Draws one turn of the session ``session_id`` from its events (and its children's)."""

    def __init__(self, console: Console, session_id: str):
        self.console = console
        self.session_id = session_id
        self.text = ""
        self.names: dict[str, str] = {}  # child session id -> its specialist's name
        self.tree = TeamTree(TreeNode(session_id=session_id, name="delegated", kind="root", status="running"))
        self.live = self._live()
        self.done = anyio.Event()  # the turn's last event is shown
        self.errors = 0  # errors shown (the shell does not say them again)

    async def consume(self, events: MemoryObjectReceiveStream[Event]) -> None:
        """Show the turn's events until its run ends; while a child runs, its clock and spinner move on
        between events too."""
        self.live.start()
        try:
            async with events, anyio.create_task_group() as tg:
                tg.start_soon(self._tick)
                async for event in events:
                    self.apply(event)
                    if isinstance(event, RunFinished) and event.session_id == self.session_id:
                        break
                tg.cancel_scope.cancel()
        finally:
            self.live.stop()
            self.done.set()

    async def _tick(self) -> None:
        while True:
            await anyio.sleep(TICK)
            if self._children_running():
                self.live.update(self._render())

    def pause(self) -> None:
        """Stop drawing while the user answers a question (an approval)."""
        self.live.stop()

    def resume(self) -> None:
        # A new live region below what was printed meanwhile (a restarted one would draw over it).
        self.live = self._live()
        self.live.start()

    def _live(self) -> Live:
        live = Live(console=self.console, transient=True, auto_refresh=True, refresh_per_second=8)
        live.update(self._render())
        return live

    def apply(self, event: Event) -> None:
        self.tree.apply(event)
        if event.session_id != self.session_id:  # a child's: its sub-tree shows it
            self.live.update(self._render())
            return
        print_ = self.live.console.print
        match event:
            case AssistantText():
                self.text += event.delta
            case MessageAdded(role="assistant"):
                if event.content.strip():
                    print_(Markdown(printable(event.content)))
                self.text = ""
            case ToolCallStarted() if event.name != "Task":
                print_(Text(f"→ {describe_call(event.name, event.arguments, width=100)}", style="dim"))
            case ToolFinished() if event.name != "Task":
                print_(_result_line(event))
            case ChildStarted():
                self.names[event.child_session_id] = event.name
                label = f": {printable(event.description)}" if event.description else ""
                print_(Text(f"⇢ {event.name}{label}", style="cyan"))
            case ChildFinished():
                name = self.names.get(event.child_session_id, event.specialist)
                style = "green" if event.status == "completed" else "red"
                usage = event.usage
                line = (
                    f"⇠ {name} {event.status} · {event.duration_ms / 1000:.1f} s · {usage.total_tokens:,} tokens "
                    f"· {format_cost(usage)} · {event.child_session_id}"
                )
                shown = Text(line + (f" ({printable(event.reason)})" if event.reason else ""), style=style)
                if event.branch_note:  # in the same print: the live tree is never drawn between the two lines
                    shown.append(f"\n  {printable(event.branch_note)}", style="cyan")
                print_(shown)
            case RetryScheduled():
                print_(Text(f"↻ {event.code}: retrying in {event.delay_seconds:.0f} s", style="yellow"))
            case RateLimitWait():
                print_(Text(f"… {waiting_text(event)}", style="yellow"))
            case WarningRaised():
                print_(Text(f"! {printable(event.message)}", style="yellow"))
            case ErrorRaised():
                self.errors += 1
                print_(Text(f"✗ {event.code}: {printable(event.message)}", style="red"))
            case (  # not shown in the turn (a user's message, a Task call: its child's lines say it)
                MessageAdded()
                | ToolCallStarted()
                | ToolFinished()
                | RunStarted()
                | Reasoning()
                | ModelStreaming()
                | PermissionRequested()
                | PermissionDecided()
                | UsageUpdated()
                | Paused()
                | Compacted()
                | RunFinished()
                | StatusChanged()
                | TeamStarted()
                | TeamMessageSent()
                | BudgetTripped()
                | LandChanged()
                | TeamFinished()
            ):
                pass
            case _:
                assert_never(event)
        self.live.update(self._render())

    def _render(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self.text:
            parts.append(Markdown(printable(self.text)))
        if self._children_running():
            parts.append(render_tree(self.tree))
        return Group(*parts)

    def _children_running(self) -> bool:
        return any(n.status == "running" for sid, n in self.tree.nodes.items() if sid != self.session_id)


def _result_line(event: ToolFinished) -> Text:
    lines = event.output.splitlines()
    if event.status == "ok":
        first = printable(lines[0][:100]) if lines else "(no output)"
        more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
        changed = f" · changed {', '.join(event.changed_files)}" if event.changed_files else ""
        return Text(f"  ← {first}{more}{changed}", style="dim")
    return Text(f"  ← {event.status}: {printable(event.output)}", style="red")  # errors in full
