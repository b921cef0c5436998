"""Events: everything an agent, a delegation or a team does, as one tagged union of frozen dataclasses.

What an agent emits is what its session log stores (``events.jsonl``: one record per event,
``type`` = ``kind``, ``payload`` = the other fields in camelCase), what stream-json maps,
what replay reads back for a resume, and what every view applies, live or from disk.
``text`` and ``reasoning`` deltas are the only events that are shown but not stored.

Every event names the session it belongs to, so the events of many agents share one stream.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from zero.agent.messages import CAMEL, Message, Role, ToolCall, Usage
from zero.agent.status import RunStatus, Status
from zero.tools import PermissionMode, SideEffect

__all__ = [
    "COMPACTED_PREFIX",
    "STORED",
    "AssistantText",
    "BudgetTripped",
    "ChildFinished",
    "ChildMode",
    "ChildStarted",
    "Compacted",
    "ErrorRaised",
    "Event",
    "LandChanged",
    "MessageAdded",
    "ModelStreaming",
    "Paused",
    "PermissionDecided",
    "PermissionRequested",
    "RateLimitWait",
    "Reasoning",
    "RetryScheduled",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "StatusChanged",
    "TeamFinished",
    "TeamMember",
    "TeamMessageSent",
    "TeamStarted",
    "ToolCallStarted",
    "ToolFinished",
    "UsageUpdated",
    "WarningRaised",
    "compact_history",
    "decode_event",
    "event_payload",
    "waiting_text",
]

# -- one agent's run ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted:
    """A run of an agent began (its first messages follow as ``message`` events)."""

    __pydantic_config__ = CAMEL
    session_id: str
    provider: str
    model: str
    cwd: str
    kind: Literal["run_start"] = "run_start"


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageAdded:
    """A message joined the conversation: the system prompt, a prompt, a note, or the model's answer
    (with the tool calls it asked for). Tool results are ``tool_result`` events."""

    __pydantic_config__ = CAMEL
    session_id: str
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    kind: Literal["message"] = "message"

    @property
    def message(self) -> Message:
        return Message(role=self.role, content=self.content, tool_calls=self.tool_calls)


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantText:
    """A piece of the model's answer as it streams (shown, not stored: the message is)."""

    __pydantic_config__ = CAMEL
    session_id: str
    delta: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True, kw_only=True)
class Reasoning:
    """A piece of the model's reasoning as it streams (shown, not stored)."""

    __pydantic_config__ = CAMEL
    session_id: str
    delta: str
    kind: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelStreaming:
    """A model call is still streaming: said at most every ``AgentConfig.beat_seconds`` while its answer
    arrives (text, reasoning, a tool call's arguments), and stored, so that a view measures silence from
    it, live or from the log (where the deltas are not). ``received``: characters of the call so far."""

    __pydantic_config__ = CAMEL
    session_id: str
    received: int = 0
    kind: Literal["streaming"] = "streaming"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted:
    """A tool call is about to run (or to be refused)."""

    __pydantic_config__ = CAMEL
    session_id: str
    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    side_effect: SideEffect = "read"
    kind: Literal["tool_call"] = "tool_call"

    @property
    def call(self) -> ToolCall:
        return ToolCall(id=self.id, name=self.name, arguments=self.arguments)


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionRequested:
    __pydantic_config__ = CAMEL
    session_id: str
    id: str
    name: str
    side_effect: SideEffect
    permission_mode: PermissionMode
    reason: str
    arguments: dict[str, Any] = field(default_factory=dict)  # the call's, redacted (to show the user)
    kind: Literal["permission_request"] = "permission_request"


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionDecided:
    __pydantic_config__ = CAMEL
    session_id: str
    id: str
    name: str
    granted: bool
    reason: str
    kind: Literal["permission_decision"] = "permission_decision"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFinished:
    """A tool call ended: ``status`` is ``ok``, ``error`` or ``denied``; the output is redacted."""

    __pydantic_config__ = CAMEL
    session_id: str
    tool_call_id: str
    name: str = ""
    status: Literal["ok", "error", "denied"]
    output: str = ""
    truncated: bool = False
    changed_files: tuple[str, ...] = ()
    duration_ms: int = 0
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageUpdated:
    """The usage of one model call, priced (``cost_usd`` is None when the model has no price)."""

    __pydantic_config__ = CAMEL
    session_id: str
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = 0.0
    calls: int = 1
    estimated: bool = False
    kind: Literal["usage"] = "usage"

    @classmethod
    def of(cls, session_id: str, model: str, usage: Usage) -> UsageUpdated:
        return cls(
            session_id=session_id,
            model=model,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_tokens=usage.cached_tokens,
            cost_usd=usage.cost_usd,
            calls=usage.calls,
            estimated=usage.estimated,
        )

    @property
    def usage(self) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cached_tokens=self.cached_tokens,
            cost_usd=self.cost_usd,
            calls=self.calls,
            estimated=self.estimated,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryScheduled:
    __pydantic_config__ = CAMEL
    session_id: str
    attempt: int
    delay_seconds: float
    code: str
    message: str
    kind: Literal["retry"] = "retry"


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimitWait:
    """A model call waits for its provider's rate governor (``zero.agent.governor``): why, and for how long when
    that is known. Not a failure and not a retry: nothing is spent while it waits."""

    __pydantic_config__ = CAMEL
    session_id: str
    reason: str
    wait_seconds: float | None = None
    kind: Literal["rate_limit"] = "rate_limit"


@dataclass(frozen=True, slots=True, kw_only=True)
class Paused:
    """A session waits before its next model call because the user paused it (``zero swarm pause``), or,
    ``paused`` false, goes on (``zero swarm continue``). Nothing is spent while it waits."""

    __pydantic_config__ = CAMEL
    session_id: str
    paused: bool
    kind: Literal["pause"] = "pause"


def waiting_text(event: RateLimitWait) -> str:
    """How views say it: ``waiting: rate limit: requests per minute, resets in 12 s``."""
    when = "" if event.wait_seconds is None else f", resets in {event.wait_seconds:.0f} s"
    return f"waiting: {event.reason}{when}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Compacted:
    """The conversation so far was replaced by a summary (``replaced`` messages, the system prompt
    kept): a resumed or replayed session continues from the summary, as the live one does."""

    __pydantic_config__ = CAMEL
    session_id: str
    summary: str
    replaced: int = 0
    kind: Literal["compaction"] = "compaction"


COMPACTED_PREFIX = "[The conversation so far, summarized to fit the context window]\n\n"
"""How the summary of a compacted conversation reaches the model (as a user message)."""


def compact_history(messages: Sequence[Message], summary: str) -> list[Message]:
    """The conversation after a compaction: its system prompt, then the summary of everything else."""
    return [*(m for m in messages[:1] if m.role == "system"), Message(role="user", content=COMPACTED_PREFIX + summary)]


@dataclass(frozen=True, slots=True, kw_only=True)
class WarningRaised:
    """Something the user should know that did not stop the run."""

    __pydantic_config__ = CAMEL
    session_id: str
    code: str
    message: str
    kind: Literal["warning"] = "warning"


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorRaised:
    """The error that ended a run (``run_end`` follows); ``detail`` holds a traceback for a bug's report."""

    __pydantic_config__ = CAMEL
    session_id: str
    code: str
    message: str
    detail: str = ""
    kind: Literal["error"] = "error"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished:
    """A run ended; ``usage`` is this run's own, ``output`` its (possibly partial) answer."""

    __pydantic_config__ = CAMEL
    session_id: str
    status: RunStatus
    turns: int = 0
    duration_ms: int = 0
    usage: Usage = Usage()
    output: str = ""
    structured_output: Any = None  # a typed run's result (its JSON text is ``output``)
    kind: Literal["run_end"] = "run_end"


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusChanged:
    """A session reached a status without running, e.g. a team member ``skipped``."""

    __pydantic_config__ = CAMEL
    session_id: str
    status: Status
    reason: str = ""
    kind: Literal["status"] = "status"


# -- delegation: events of the parent's session -------------------------------------------------


ChildMode = Literal["foreground", "background", "resume", "member"]
"""How a child runs: a Task in the foreground or the background, a resumed Task, or a team's member."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildStarted:
    """A child agent (a specialist, or a team member) starts a run in its own session."""

    __pydantic_config__ = CAMEL
    session_id: str
    child_session_id: str
    specialist: str = ""
    agent_name: str = ""
    member: str | None = None
    mode: ChildMode = "foreground"
    tool_call_id: str = ""
    description: str = ""
    root_session_id: str = ""
    kind: Literal["child_start"] = "child_start"

    @property
    def name(self) -> str:
        return self.member or self.agent_name or self.specialist


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildFinished:
    """A child's run ended; ``usage`` is what its subtree spent in that run (rolled up into the parent)."""

    __pydantic_config__ = CAMEL
    session_id: str
    child_session_id: str
    status: Status
    usage: Usage = Usage()
    duration_ms: int = 0
    specialist: str = ""
    member: str | None = None
    reason: str | None = None
    branch: str | None = None  # a child in a worktree of its own: the branch its work is on (None: no change)
    diff_stat: str | None = None  # what that branch changed: "+12 −3 in 2 files"
    kind: Literal["child_end"] = "child_end"

    @property
    def branch_note(self) -> str:
        """``branch zero/…/worker (+12 −3 in 2 files)``, as the shell and the editor show a child's work ("":
        it worked in its caller's workspace, or left no change)."""
        return f"branch {self.branch} ({self.diff_stat})" if self.branch else ""


# -- teams: events of the team's session -------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamMember:
    __pydantic_config__ = CAMEL
    name: str
    session_id: str
    specialist: str
    depends_on: tuple[str, ...] = ()
    model: str = ""
    inputs: str = ""  # a digest of its specialist, model and settings, for a later ``--reuse`` to compare


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamStarted:
    """A team run began: its plan, limits and members (each with its session)."""

    __pydantic_config__ = CAMEL
    session_id: str
    team: str
    goal: str = ""
    file: str = ""
    budget: dict[str, float] = field(default_factory=dict)
    members: tuple[TeamMember, ...] = ()
    cwd: str = ""
    provider: str = ""
    model: str = ""
    spec: dict[str, Any] = field(default_factory=dict)  # the resolved team file, to resume from
    resumed: int = 0  # 0 for the first run of the team, then 1, 2, ... for each resume
    kind: Literal["team_start"] = "team_start"


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamMessageSent:
    __pydantic_config__ = CAMEL
    session_id: str
    id: int
    sender: Annotated[str, Field(alias="from")]
    to: str
    body: str
    kind: Literal["team_message"] = "team_message"


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetTripped:
    """The team's shared budget ran out: no model call starts anywhere from now on."""

    __pydantic_config__ = CAMEL
    session_id: str
    limit: str
    used: float
    allowed: float
    requested: float = 0.0
    message: str = ""
    kind: Literal["budget"] = "budget"


@dataclass(frozen=True, slots=True, kw_only=True)
class LandChanged:
    """An isolated member's branch moved on its way back (docs/STREAM_JSON_PROTOCOL.md, ``land``): ``state``
    is ``committed`` when the member ended and its work was committed on ``branch``, then how landing it
    ended (``landed``, ``conflict``, ``check_failed``, ``skipped``, ``nothing_to_land``). ``files``,
    ``added`` and ``removed``: its diff stat; ``conflicts``: the files that did not merge; ``detail``: the
    check's output tail, or why it was skipped."""

    __pydantic_config__ = CAMEL
    session_id: str
    member: str
    state: Literal["committed", "landed", "conflict", "check_failed", "skipped", "nothing_to_land"]
    branch: str = ""
    files: int = 0
    added: int = 0
    removed: int = 0
    conflicts: tuple[str, ...] = ()
    detail: str = ""
    kind: Literal["land"] = "land"


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamFinished:
    __pydantic_config__ = CAMEL
    session_id: str
    status: Status
    duration_ms: int = 0
    usage: Usage = Usage()
    tripped: str | None = None
    reason: str = ""
    error_code: str | None = None  # of the member whose status is the team's (a provider error: exit 3)
    kind: Literal["team_end"] = "team_end"


Event = (
    RunStarted
    | MessageAdded
    | AssistantText
    | Reasoning
    | ModelStreaming
    | ToolCallStarted
    | PermissionRequested
    | PermissionDecided
    | ToolFinished
    | UsageUpdated
    | RetryScheduled
    | RateLimitWait
    | Paused
    | WarningRaised
    | Compacted
    | ErrorRaised
    | RunFinished
    | StatusChanged
    | ChildStarted
    | ChildFinished
    | TeamStarted
    | TeamMessageSent
    | BudgetTripped
    | LandChanged
    | TeamFinished
)

STORED = frozenset(
    {
        "run_start",
        "message",
        "streaming",
        "tool_call",
        "permission_request",
        "permission_decision",
        "tool_result",
        "usage",
        "retry",
        "rate_limit",
        "pause",
        "warning",
        "compaction",
        "error",
        "run_end",
        "status",
        "child_start",
        "child_end",
        "team_start",
        "team_message",
        "budget",
        "land",
        "team_end",
    }
)
"""The kinds a session log keeps (everything but the streaming deltas)."""


@functools.cache
def _events() -> TypeAdapter[Event]:
    """The union's validator and serializer, built on first use (building it costs ~60 ms of start-up
    that commands reading no event, such as ``sessions list``, need not pay)."""
    return TypeAdapter(Annotated[Event, Field(discriminator="kind")])


def event_payload(event: Event) -> dict[str, Any]:
    """The event as a log record's ``payload``: its fields but ``session_id`` and ``kind``, camelCase,
    defaults left out."""
    payload: dict[str, Any] = _events().dump_python(
        event, mode="json", by_alias=True, exclude_defaults=True, exclude={"session_id"}
    )
    return payload


KINDS = frozenset(STORED | {"text", "reasoning"})


def decode_event(kind: str, session_id: str, payload: dict[str, Any]) -> Event | None:
    """The event a log record holds (None for a kind this version does not know, written by a newer
    Zero). Raises ``ValueError`` saying what is wrong with it."""
    if kind not in KINDS:
        return None
    try:
        return _events().validate_python({**payload, "kind": kind, "sessionId": session_id})
    except ValidationError as e:
        problem = e.errors()[0]
        where = ".".join(str(p) for p in problem["loc"][1:]) or "type"
        raise ValueError(f"{kind!r} event: {where}: {problem['msg']}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """How a run ended: its status, its (possibly partial) output, usage and error."""

    status: RunStatus
    output: str
    usage: Usage
    turns: int
    duration_ms: int
    error_code: str | None = None
    error: str | None = None
    structured_output: Any = None
    """A typed run's result, as submitted (``output`` is its JSON text); None for an untyped run."""
