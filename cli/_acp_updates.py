"""What an editor is shown over ACP: a session's events as session updates, its history replayed, a prompt
read from content blocks, and the answers a permission request offers.

A root tool call is shown when it starts: ``pending`` while it waits for the user's approval (the request
follows it), ``in_progress`` once it runs, then ``completed`` or ``failed``. A child's activity is shown in
the content of the ``Task`` call that started it (a grandchild's in its ancestor's).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, assert_never, get_args

from acp import (
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import PermissionOption

from zero.agent import (
    AssistantText,
    BudgetTripped,
    ChildFinished,
    ChildStarted,
    Compacted,
    ErrorRaised,
    Event,
    LandChanged,
    Message,
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
)
from zero.cli.approvals import Preview, SessionRule, call_text, preview_of
from zero.tools import PermissionMode, SideEffect, Workspace, decide, redact
from zero.tools.describe import describe_call

__all__ = ["Shown", "options", "prompt_text", "replayed", "shown"]

_KINDS = {
    "read_file": "read",
    "list_directory": "read",
    "glob": "search",
    "grep": "search",
    "write_file": "edit",
    "edit_file": "edit",
    "bash": "execute",
    "Task": "think",
    "TaskOutput": "think",
    "TaskStop": "think",
    "CreateSpecialist": "edit",
    "update_plan": "think",
}
_SIDE_EFFECTS: tuple[SideEffect, ...] = get_args(SideEffect)


@dataclass(kw_only=True)
class Shown:
    """How one session is shown to its editor: its root's calls, and which ``Task`` call shows each child."""

    root: str
    workspace: Workspace
    mode: PermissionMode  # the root agent's: a call it will ask about is pending until answered
    redact: Callable[[str], str] = redact  # the session's: what an edit's preview masks
    task_calls: dict[str, str] = field(default_factory=dict)  # child session id -> the Task call showing it
    names: dict[str, str] = field(default_factory=dict)  # child session id -> its specialist

    def track(self, event: Event) -> None:
        """Learn which call shows a child as it starts (it listens to the run tree: at once, before a child asks)."""
        if isinstance(event, ChildStarted):
            own = event.session_id == self.root
            self.task_calls[event.child_session_id] = (
                event.tool_call_id if own else self.task_calls.get(event.session_id, "")
            )
            self.names[event.child_session_id] = event.name

    def call_of(self, session_id: str, call_id: str) -> str:
        """The root's call that shows a call of ``session_id`` (its own, or the Task call of a child's)."""
        return call_id if session_id == self.root else self.task_calls.get(session_id, call_id)

    def update(self, event: Event) -> Any:  # noqa: C901 - one branch a kind
        """The session update that shows ``event``, or None."""
        if event.session_id != self.root:
            call = self.task_calls.get(event.session_id)
            if call is None or not isinstance(event, ToolCallStarted):
                return None
            name = self.names.get(event.session_id, "specialist")
            line = f"{name}: {describe_call(event.name, event.arguments, width=100)}"
            return update_tool_call(call, status="in_progress", content=[tool_content(text_block(line))])
        match event:
            case AssistantText():
                return update_agent_message_text(event.delta)
            case Reasoning():
                return update_agent_thought_text(event.delta)
            case ToolCallStarted():
                asks = self._asks(event.side_effect)
                edit = preview_of(event.name, event.arguments, self.workspace, self.redact)
                return start_tool_call(
                    event.id,
                    describe_call(event.name, event.arguments, width=100),
                    kind=_kind(event.name),  # type: ignore[arg-type]
                    status="pending" if asks else "in_progress",
                    content=shown(event.name, event.arguments, edit) if asks or event.name == "bash" else diff(edit),
                    raw_input=event.arguments,
                )
            case PermissionDecided() if event.granted:
                return update_tool_call(event.id, status="in_progress")
            case ToolFinished() if event.name != "update_plan":
                return update_tool_call(
                    event.tool_call_id,
                    status="completed" if event.status == "ok" else "failed",
                    content=[tool_content(text_block(event.output))],
                )
            case ChildStarted():
                label = f"{event.name} started" + (f": {event.description}" if event.description else "")
                return update_tool_call(
                    event.tool_call_id, status="in_progress", content=[tool_content(text_block(label))]
                )
            case ChildFinished() if event.child_session_id in self.task_calls:
                usage = event.usage
                line = (
                    f"{event.specialist} {event.status} · {event.duration_ms / 1000:.1f} s · {usage.total_tokens:,} "
                    f"tokens · {format_cost(usage)} · session {event.child_session_id}"
                ) + (f" · {event.branch_note}" if event.branch_note else "")
                call = self.task_calls[event.child_session_id]
                return update_tool_call(call, content=[tool_content(text_block(line))])
            case (  # the rest is not shown to the editor
                PermissionDecided()
                | ToolFinished()
                | ChildFinished()
                | RunStarted()
                | MessageAdded()
                | ModelStreaming()
                | PermissionRequested()
                | UsageUpdated()
                | RetryScheduled()
                | RateLimitWait()
                | Paused()
                | WarningRaised()
                | Compacted()
                | ErrorRaised()
                | RunFinished()
                | StatusChanged()
                | TeamStarted()
                | TeamMessageSent()
                | BudgetTripped()
                | LandChanged()
                | TeamFinished()
            ):
                return None
            case _:
                assert_never(event)

    def _asks(self, side_effect: str) -> bool:
        return side_effect in _SIDE_EFFECTS and decide(self.mode, side_effect) == "prompt"


def replayed(history: list[Message]) -> list[Any]:
    """A conversation as the editor shows it: messages, and each tool call with its result (the results
    that follow its message: ids need not be unique across a conversation's model calls)."""
    updates: list[Any] = []
    for at, message in enumerate(history):
        if message.role == "user":
            updates.append(update_user_message_text(message.content))
        elif message.role == "assistant":
            if message.content:
                updates.append(update_agent_message_text(message.content))
            following = history[at + 1 : at + 1 + len(message.tool_calls)]
            results = {m.tool_call_id: m for m in following if m.role == "tool"}
            for call in message.tool_calls:
                result = results.get(call.id)
                updates.append(
                    start_tool_call(
                        call.id,
                        describe_call(call.name, call.arguments, width=100),
                        kind=_kind(call.name),  # type: ignore[arg-type]
                        status="failed" if result is None or result.is_error else "completed",
                        raw_input=call.arguments,
                        content=[tool_content(text_block(result.content))] if result is not None else None,
                    )
                )
    return updates


def options(rule: SessionRule | None) -> list[PermissionOption]:
    """The answers an editor offers: allow once, allow for the session (saying what that covers), reject."""
    always = (
        [PermissionOption(option_id="allow_always", name=f"Allow {rule.label} for this session", kind="allow_always")]
        if rule is not None
        else []
    )
    return [
        PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
        *always,
        PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
    ]


def prompt_text(blocks: list[Any]) -> str:
    """The prompt as one message: text, links to resources, and embedded resources' text."""
    parts = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            parts.append(f"[resource: {block.name} {block.uri}]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(
                f'<file path="{resource.uri}">\n{text}\n</file>'
                if text is not None
                else f"[binary resource {resource.uri}]"
            )
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} attached: {getattr(block, 'mime_type', '')}, not shown to this model]")
    return "\n\n".join(parts)


def shown(name: str, arguments: dict[str, Any], edit: Preview | None) -> list[Any]:
    """A call as the editor shows it for approval, whole (its title is cut): an edit as its diff, a command as
    it runs and any other call's arguments, escaped as the shell shows them, in a Markdown code block (its
    fence longer than any run of backticks in it, so nothing in it is read as Markdown)."""
    if edit is not None:
        return diff(edit) or []
    text = call_text(name, arguments)
    fence = "`" * max(3, 1 + max(map(len, re.findall("`+", text)), default=0))
    return [tool_content(text_block(f"{fence}{'sh' if name == 'bash' else 'json'}\n{text}\n{fence}"))]


def diff(edit: Preview | None) -> list[Any] | None:
    """An edit as the editor shows it: a diff of the file (the texts before and after, which the editor
    compares), or why there is none."""
    if edit is None:
        return None
    if edit.after is None:
        return [tool_content(text_block(f"{edit.path}: {edit.note}"))]
    return [tool_diff_content(edit.file, edit.after, edit.before)]


def _kind(name: str) -> str:
    return _KINDS.get(name, "fetch" if name.startswith("mcp__") else "other")
