"""A recorded run as a script of the scripted provider (``zero sessions export ID --as-script``), and where a
replay of it went another way (``zero replay``).

Every model call of every session of the run (its members, its ``Task`` children at any depth) becomes a
turn that answers as the call answered then, with the usage it recorded, matched by what tells the sessions
apart: the system prompt up to the workspace's path (a member's name is in it, a path is not: the replay may
run elsewhere), the first user message (and a later run's own prompt) and the call's number. Each turn also
holds what its tool calls returned, and the session it answered by its place in the run (a member's name,
then the id of each ``Task`` call down to it), so a replay is compared session by session, call by call,
whatever order its concurrent members ran in.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from zero.agent import (
    ChildStarted,
    Compacted,
    ErrorRaised,
    Event,
    Message,
    MessageAdded,
    RetryScheduled,
    RunStarted,
    TeamStarted,
    ToolFinished,
    UsageUpdated,
    compact_history,
)
from zero.agent.output_schema import typed_prompt
from zero.agent.prompts import CONTINUED
from zero.agent.providers.scripted import (
    Script,
    ScriptError,
    ScriptMatch,
    ScriptRecording,
    ScriptResult,
    ScriptSession,
    ScriptToolCall,
    ScriptTurn,
    ScriptUsage,
    turn_number,
)
from zero.errors import UsageError
from zero.sessions.lineage import SessionNode, session_tree
from zero.sessions.store import SessionStore

__all__ = [
    "NO_TURN",
    "Divergence",
    "RecordedSession",
    "answered",
    "counted",
    "divergences",
    "export_script",
    "moved",
    "recorded_sessions",
]

SESSION_ID = re.compile(r"\b[A-Za-z0-9-]+_\d{14}_[0-9a-f]{12}\b")
"""A session id as Zero makes them: it differs in every run, so a placeholder stands for it."""

RETRIED = {
    "rate_limited": "rate_limit",
    "overloaded": "overloaded",
    "timeout": "timeout",
    "connection_error": "connection",
    "stream_dropped": "stream_dropped",
}
"""A recorded retry's error code, and the kind of scripted error that fails the call again (so a retries budget
replays too)."""

_CONTINUED = CONTINUED | {typed_prompt(c) for c in CONTINUED}
"""A resume's prompt, going on with the task a stopped run left (a typed member's with its note)."""

FAILED = {**RETRIED, "auth_error": "auth", "bad_request": "bad_request", "context_too_long": "context_too_long"}
"""The error code a run ended on, and the kind of scripted error that ends it the same way in its replay."""

NO_TURN = "no scripted turn matches"
"""How the scripted provider's error for a call its script does not have begins."""


@dataclass(kw_only=True)
class RecordedSession:
    """One session of a run as its log says: its place, its model calls as turns, how it ended."""

    path: str
    label: str
    session_id: str
    cwd: str
    status: str
    turns: list[ScriptTurn] = field(default_factory=list)
    error: str = ""  # the message of the error that ended its run, if any


def recorded_sessions(store: SessionStore, session_id: str) -> list[RecordedSession]:
    """``session_id`` and every session below it, each with its model calls, parents first."""
    return list(_walk(store, session_tree(store, session_id), "", _root_label(store, session_id)))


def _root_label(store: SessionStore, session_id: str) -> str:
    meta = store.metadata(session_id)
    if meta.session_kind == "team":
        return f"team {meta.team_name}"
    return meta.member_name or meta.agent_name or meta.specialist or "zero"


def _walk(
    store: SessionStore, node: SessionNode, path: str, label: str, places: tuple[str, ...] = ()
) -> Iterator[RecordedSession]:
    meta = node.meta
    events = [e.event for e in store.events(meta.session_id)]
    ran = [e.cwd for e in events if isinstance(e, RunStarted) and e.cwd]  # (a worktree, for a member in one)
    cwd = ran[-1] if ran else meta.cwd
    session = RecordedSession(path=path, label=label, session_id=meta.session_id, cwd=cwd, status=meta.status)
    session.turns, session.error = _turns(events, path, (meta.cwd, *places))
    yield session
    started: dict[str, ChildStarted] = {}
    for event in events:
        if isinstance(event, ChildStarted):
            started.setdefault(event.child_session_id, event)
    steps: dict[str, int] = {}
    for child in node.children:
        start = started.get(child.meta.session_id)
        member = start.member if start is not None else ""
        if start is None and child.meta.session_kind == "member":  # (one that never started has no child_start)
            member = child.meta.member_name
        if member:
            yield from _walk(store, child, member, member, (*places, meta.cwd))
            continue
        step = start.tool_call_id if start is not None and start.tool_call_id else child.meta.session_id
        steps[step] = steps.get(step, 0) + 1
        if steps[step] > 1:  # a later run's call of the same id (a script numbers each run's calls from 1)
            step += f"#{steps[step]}"
        name = child.meta.specialist or child.meta.agent_name or "child"
        if start is not None and start.description:  # (what tells two children of one specialist apart)
            name += f" ({' '.join(start.description.split())[:40]})"
        yield from _walk(store, child, f"{path}/{step}" if path else step, f"{label} > {name}", (*places, meta.cwd))


def _turns(events: Sequence[Event], path: str, places: Sequence[str]) -> tuple[list[ScriptTurn], str]:
    """The model calls of one session's log, as turns (with their usage and tool results), and the message of
    the error that ended its last run; ``places``: the workspaces of the session and those above it."""
    messages: list[Message] = []
    turns: list[ScriptTurn] = []
    results: dict[str, ScriptResult] = {}
    unspent: ScriptUsage | None = None
    error = ""
    ended: ScriptTurn | None = None  # the call a run ended on, failing: a turn unless a resume went on past it

    def close() -> None:  # the last turn's results, in call order; a call with none ended with the run
        if turns:
            last = turns[-1]
            last.results = [
                results.get(c.id or "", ScriptResult(name=c.name, status="missing")) for c in last.tool_calls
            ]

    for event in events:
        if isinstance(event, MessageAdded) and event.role == "user" and event.content in _CONTINUED:
            ended = None  # (the call it failed on is made again by the resume, as the replay's next call)
            continue  # a team's (or a node's) resume goes on with the task: a replay runs the two as one run
        if isinstance(event, MessageAdded) and ended is not None:  # a run on a new prompt: the failure stays
            close()
            results = {}
            turns.append(ended)
            ended = None
        if isinstance(event, MessageAdded):
            if event.role == "assistant":
                close()
                results = {}
                calls = [
                    ScriptToolCall(name=c.name, arguments=_placeholders(c.arguments, messages), id=c.id)
                    for c in event.tool_calls
                ]
                turns.append(
                    ScriptTurn(match=_match(messages, places), text=event.content, tool_calls=calls, session=path)
                )
                if unspent is not None:
                    turns[-1].usage, unspent = unspent, None
            messages.append(event.message)
        elif isinstance(event, ToolFinished):
            results[event.tool_call_id] = ScriptResult(name=event.name, status=event.status, output=event.output)
            messages.append(Message(role="tool", content=event.output, tool_call_id=event.tool_call_id))
        elif isinstance(event, UsageUpdated):
            spent = ScriptUsage(
                prompt_tokens=event.prompt_tokens,
                completion_tokens=event.completion_tokens,
                cached_tokens=event.cached_tokens,
            )
            if turns and turns[-1].usage is None:
                turns[-1].usage = spent
            else:  # spent before its answer came (a call that failed, then was tried again)
                unspent = spent if unspent is None else _add(unspent, spent)
        elif isinstance(event, RetryScheduled) and event.code in RETRIED:
            close()
            results = {}
            again = ScriptError(kind=RETRIED[event.code], message=event.message, retry_after=0)  # (tried at once)
            turns.append(ScriptTurn(match=_match(messages, places), error=again, session=path))
        elif isinstance(event, Compacted):
            messages[:] = compact_history(messages, event.summary)
        elif isinstance(event, ErrorRaised):
            error = event.message
            if event.code in FAILED:  # a model call failed and ended the run: its replay fails it the same way
                failure = ScriptError(kind=FAILED[event.code], message=event.message, retry_after=0)
                ended = ScriptTurn(match=_match(messages, places), error=failure, session=path)
        elif isinstance(event, RunStarted):
            error = ""
    close()
    if ended is not None:
        turns.append(ended)
    if all(t.match.prompt == t.match.user for t in turns):  # one run: its prompt is its first user message
        for turn in turns:
            turn.match.prompt = None
    return turns, error


def _add(a: ScriptUsage, b: ScriptUsage) -> ScriptUsage:
    return ScriptUsage(
        prompt_tokens=a.prompt_tokens + b.prompt_tokens,
        completion_tokens=a.completion_tokens + b.completion_tokens,
        cached_tokens=a.cached_tokens + b.cached_tokens,
    )


def _match(messages: Sequence[Message], places: Sequence[str]) -> ScriptMatch:
    system = next((m.content for m in messages if m.role == "system"), "")
    user = next((m.content for m in messages if m.role == "user"), "")
    prompt = next((m.content for m in reversed(messages) if m.role == "user"), "")
    return ScriptMatch(
        system=_before(system, (*places, WORKSPACE)),
        user=_before(user, places),
        prompt=_before(prompt, places),
        turn=turn_number(messages),
    )


WORKSPACE = "Workspace: "
"""Where Zero's system prompts name the agent's folder (a member's worktree has a new path in every run)."""


def _before(text: str, marks: Sequence[str]) -> str | None:
    """``text`` up to the first of ``marks`` (the workspace's path: a replay elsewhere has another), or None
    if that leaves nothing."""
    cut = min((at for mark in marks if mark and (at := text.find(mark)) >= 0), default=len(text))
    return text[:cut] or None


_KEY_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*): (\S+)", re.MULTILINE)


def _placeholders(value: Any, messages: Sequence[Message]) -> Any:
    """``value`` with each session id an earlier tool result gave (``task_id: child_...``) as ``{{key}}``, which
    the scripted provider fills from the replay's own tool result: a replay's sessions have ids of their own."""
    if isinstance(value, dict):
        return {k: _placeholders(v, messages) for k, v in value.items()}
    if isinstance(value, list):
        return [_placeholders(v, messages) for v in value]
    if not isinstance(value, str) or not SESSION_ID.fullmatch(value):
        return value
    keys = dict.fromkeys(k for m in reversed(messages) if m.role == "tool" for k, _ in _KEY_LINE.findall(m.content))
    for key in keys:
        if _latest(key, messages) == value:
            return f"{{{{{key}}}}}"
    return value


def _latest(key: str, messages: Sequence[Message]) -> str | None:
    """What the scripted provider fills ``{{key}}`` with: the latest tool result's first ``key: value`` line."""
    line = re.compile(rf"^{re.escape(key)}: (\S+)", re.MULTILINE)
    for m in reversed(messages):
        if m.role == "tool" and (found := line.search(m.content)):
            return found.group(1)
    return None


def moved(script: Script, workspace: str) -> Script:
    """``script`` with the recorded workspace's path in its tool calls' arguments (``read_file /home/me/app/x``,
    ``cd /home/me/app``) as ``workspace``'s: a replay elsewhere works on its own folder's files, never on the
    recorded folder's. The recorded workspace only rewrites; where the replay runs is ``workspace``."""
    assert script.recording is not None
    old = script.recording.workspace.rstrip("/")
    if not old or old == workspace.rstrip("/"):
        return script
    at = re.compile(re.escape(old) + r"(?![\w.-])")  # the path itself, not /home/me/app2

    def rewrite(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: rewrite(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rewrite(v) for v in value]
        return at.sub(lambda _: workspace, value) if isinstance(value, str) else value

    turns = [
        t.model_copy(
            update={"tool_calls": [c.model_copy(update={"arguments": rewrite(c.arguments)}) for c in t.tool_calls]}
        )
        for t in script.turns
    ]
    return script.model_copy(update={"turns": turns})


def export_script(store: SessionStore, session_id: str) -> Script:
    """The run under ``session_id`` (it and every session below it) as a script that replays it offline.
    ``UsageError`` if it is still running."""
    meta = store.metadata(session_id)
    if not meta.finished:
        raise UsageError(f"session {session_id} is still {meta.status}: export or replay it when it has ended")
    sessions = recorded_sessions(store, session_id)
    events = [e.event for e in store.events(session_id)]
    team = next((e for e in events if isinstance(e, TeamStarted)), None)
    reused = [s.label for s in sessions if s.path and "/" not in s.path and store.metadata(s.session_id).reused_from]
    if reused:  # (their outputs came from other runs, whose calls are not in this one: a replay runs every member)
        raise UsageError(
            f"{session_id} took the output of {', '.join(sorted(reused))} from earlier runs (swarm run --reuse), so it "
            "cannot be replayed: replay the runs that made them, or run the team again without --reuse and replay that"
        )
    prompts: list[str] = []
    starting = False
    for event in events:  # an agent's prompts: the first user message of each of its runs
        if isinstance(event, RunStarted):
            starting = True
        elif starting and isinstance(event, MessageAdded) and event.role == "user":
            prompts.append(event.content)
            starting = False
    # A turn matches by substrings: a session whose strings another's contain must come after it, or its turns
    # would answer that one's calls too. Longer first does it; each session's calls stay in their order.
    ordered = sorted(
        sessions, key=lambda s: -max((len(t.match.system or "") + len(t.match.user or "") for t in s.turns), default=0)
    )
    turns = [t for s in ordered for t in s.turns]
    recording = ScriptRecording(
        session_id=session_id,
        kind="team" if meta.session_kind == "team" else "agent",
        session_kind=meta.session_kind,
        workspace=meta.cwd,
        model=meta.model_id or (team.model if team else ""),
        prompts=prompts,
        team=team.spec if team else {},
        team_file=team.file if team else "",
        sessions=[
            ScriptSession(path=s.path, id=s.session_id, label=s.label, status=s.status, cwd=s.cwd) for s in sessions
        ],
    )
    return Script(recording=recording, turns=turns)


# -- where a replay diverged -------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Divergence:
    """One place where a replay did not do what its recording did."""

    kind: Literal["result", "answer", "extra_call", "missing_call", "status", "session"]
    session: str  # what the report calls the session (a member's name, ``b > explorer`` for its Task child)
    session_id: str  # the replay's session (the recording's, for a session the replay never ran)
    call: int  # the tool call's number in the session (result), else the model call's
    message: str
    tool: str = ""
    diff: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "session": self.session,
            "sessionId": self.session_id,
            "call": self.call,
            "tool": self.tool or None,
            "message": self.message,
            "diff": self.diff or None,
        }


def divergences(recording: Script, replay: Sequence[RecordedSession]) -> list[Divergence]:
    """Where the ``replay``'s sessions went another way than ``recording`` says, session by session (by their
    place in the run), in the recording's order."""
    assert recording.recording is not None
    recorded = {s.path: s for s in recording.recording.sessions}
    calls: dict[str, list[ScriptTurn]] = {path: [] for path in recorded}
    for turn in answered(recording.turns):
        calls.setdefault(turn.session, []).append(turn)
    replayed = {s.path: s for s in replay}
    tops = (recorded[""].cwd if "" in recorded else "", replayed[""].cwd if "" in replayed else "")
    found: list[Divergence] = []
    for path, was in recorded.items():
        now = replayed.get(path)
        if now is None:
            if calls[path]:
                found.append(
                    Divergence(
                        kind="missing_call",
                        session=was.label,
                        session_id=was.id,
                        call=1,
                        message=f"{was.label} never ran: its {counted(len(calls[path]), 'recorded model call')} "
                        "were never made",
                    )
                )
            continue
        found += _compare(was, calls[path], now, tops)
    for path, now in replayed.items():
        if path not in recorded:
            found.append(
                Divergence(
                    kind="session",
                    session=now.label,
                    session_id=now.session_id,
                    call=1,
                    message=f"{now.label} is a session the recording does not have",
                )
            )
    return found


def _compare(
    was: ScriptSession, then: list[ScriptTurn], now: RecordedSession, tops: tuple[str, str]
) -> list[Divergence]:
    """``tops``: the workspaces of the recording and of the replay (a member's own folder may be a worktree)."""
    found: list[Divergence] = []

    def say(kind: Any, call: int, message: str, tool: str = "", diff: str = "") -> None:
        where = {"session": now.label, "session_id": now.session_id}
        found.append(Divergence(kind=kind, call=call, message=message, tool=tool, diff=diff, **where))

    number = 0  # the tool call's number in the session
    made = answered(now.turns)
    for index, (old, new) in enumerate(zip(then, made, strict=False), 1):
        if [c.name for c in old.tool_calls] != [c.name for c in new.tool_calls] or old.text != new.text:
            say("answer", index, f"{now.label}: model call {index} was answered with another turn than recorded")
        for before, after in zip(old.results, new.results, strict=False):
            number += 1
            a, b = _normal(before.output, was.cwd, tops[0]), _normal(after.output, now.cwd, tops[1])
            if before.status == "missing":
                say(
                    "result",
                    number,
                    f"{now.label}: call {number} ({after.name}) has no recorded result (the recorded run ended "
                    "before it did)",
                    after.name,
                )
            elif before.status != after.status or a != b:
                status = f" ({before.status} then, {after.status} now)" if before.status != after.status else ""
                say(
                    "result",
                    number,
                    f"{now.label}: call {number} ({after.name}) returned another result{status}",
                    after.name,
                    _diff(a, b),
                )
    if now.error.startswith(NO_TURN):
        say("extra_call", len(made) + 1, f"{now.label}: model call {len(made) + 1} is not in the recording")
    elif len(made) > len(then):
        say("extra_call", len(then) + 1, f"{now.label}: model call {len(then) + 1} is not in the recording")
    if len(made) < len(then):
        first, last = len(made) + 1, len(then)
        calls = f"call {first}" if first == last else f"calls {first}-{last}"
        say("missing_call", first, f"{now.label}: recorded model {calls} never made")
    if was.status and now.status != was.status and not found:
        say("status", 0, f"{now.label} ended {now.status} (recorded: {was.status})")
    return found


_TIME = re.compile(r"\b(duration|elapsed): \d+(?:\.\d+)? s\b")
"""How long a child took, in a Task result: a replay takes its own time."""


def answered(turns: Sequence[ScriptTurn]) -> list[ScriptTurn]:
    """The turns that answer a call (not those that fail it, as a recorded retry's failed attempt)."""
    return [t for t in turns if t.error is None]


def _normal(text: str, *cwds: str) -> str:
    """A tool result as it compares: the session's folders (its worktree, the run's workspace), the ids of
    sessions (new in every run) and a child's time replaced by placeholders."""
    for cwd in sorted({c for c in cwds if c}, key=len, reverse=True):  # (a folder inside another first)
        text = text.replace(cwd, "<workspace>")
    return _TIME.sub(r"\1: <time>", SESSION_ID.sub("<session>", text))


def _diff(then: str, now: str, lines: int = 8, width: int = 160) -> str:
    """A short unified diff: the recording's lines (``-``) and the replay's (``+``)."""
    body = [
        line[:width]
        for line in difflib.unified_diff(then.splitlines(), now.splitlines(), "recorded", "replayed", n=0, lineterm="")
        if not line.startswith(("---", "+++", "@@"))
    ]
    if len(body) > lines:
        body = [*body[:lines], f"... ({len(body) - lines} more lines differ)"]
    return "\n".join(body)


def counted(n: int, thing: str) -> str:
    """``3 model calls``, ``1 session``."""
    return f"{n:,} {thing}{'' if n == 1 else 's'}"
