"""The on-disk shape of a session: ``metadata.json`` (camelCase, as upstream) and the records of
``events.jsonl``; and how the metadata follows from the events.

The metadata is a summary of the log: ``apply_event`` folds each event into it (status, usage,
the children's usage), so it can always be rebuilt from the log alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from pydantic import BaseModel, ConfigDict, Field, field_serializer
from pydantic.alias_generators import to_camel

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
    Status,
    StatusChanged,
    TeamFinished,
    TeamMessageSent,
    TeamStarted,
    ToolCallStarted,
    ToolFinished,
    Usage,
    UsageUpdated,
    WarningRaised,
    event_payload,
)
from zero.agent.status import TERMINAL

__all__ = ["SessionKind", "SessionMetadata", "StoredEvent", "UsageTotals", "apply_event", "now_iso", "record_of"]

SessionKind = Literal["", "child", "team", "member", "fork"]


def now_iso() -> str:
    """The time now in UTC, to the millisecond: ``2026-12-02T22:38:59.039Z``. Every event's batch is stamped, so
    the text of the second is kept (a third of ``datetime.isoformat``'s cost)."""
    global _second
    whole, micro = divmod(round(time.time() * 1_000_000), 1_000_000)  # (to the microsecond, as datetime rounds)
    second, text = _second
    if second != whole:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
        _second = (whole, text)  # (one assignment: threads stamping at once see a whole pair)
    return f"{text}.{micro // 1000:03d}Z"


_second = (-1, "")


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class UsageTotals(_Camel):
    """Tokens and cost, as ``Usage`` sums them (``unpriced``: part of the cost is unknown)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = 0.0
    calls: int = 0
    unpriced: bool = False
    estimated: bool = False

    @classmethod
    def nothing(cls, *, priced: bool = True) -> UsageTotals:
        """What a session spent before its first call: nothing, at a cost that is unknown if its model has no
        price (unknown stays unknown: an unpriced session never shows $0, calls or not)."""
        return cls() if priced else cls(cost_usd=None, unpriced=True)

    @classmethod
    def of(cls, usage: Usage) -> UsageTotals:
        return cls(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
            cached_tokens=usage.cached_tokens,
            cost_usd=usage.cost_usd,
            calls=usage.calls,
            unpriced=usage.partly_unpriced,
            estimated=usage.estimated,
        )

    @field_serializer("cost_usd")
    def _cost(self, cost: float | None) -> float | None:
        # Far finer than any view shows, and never a sum of rounded costs: the totals a session keeps
        # (summed call by call) and the ledger's (summed as calls are booked) agree to the last cent shown.
        return None if cost is None else round(cost, 10)

    @property
    def partly_unpriced(self) -> bool:
        return self.unpriced or self.cost_usd is None

    def to_usage(self) -> Usage:
        cost = self.cost_usd  # (rounded as it is written: see _cost)
        return Usage(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cached_tokens=self.cached_tokens,
            cost_usd=None if cost is None else round(cost, 10),
            calls=self.calls,
            unpriced=self.unpriced,
            estimated=self.estimated,
        )

    def add(self, usage: Usage) -> None:
        """Add ``usage`` in place, as ``self.to_usage() + usage`` sums (on every event of a log that spends:
        straight to the fields, not through a dump, two ``Usage`` and a new model)."""
        fields, cost = self.__dict__, self.cost_usd
        unpriced = self.unpriced or cost is None or usage.partly_unpriced
        known = (0.0 if cost is None else round(cost, 10)) + (usage.cost_usd or 0.0)
        prompt, completion = self.prompt_tokens + usage.prompt_tokens, self.completion_tokens + usage.completion_tokens
        fields["prompt_tokens"], fields["completion_tokens"], fields["total_tokens"] = (
            prompt,
            completion,
            prompt + completion,
        )
        fields["cached_tokens"] = self.cached_tokens + usage.cached_tokens
        fields["cost_usd"] = None if unpriced and not known else known
        fields["calls"], fields["unpriced"] = self.calls + usage.calls, unpriced
        fields["estimated"] = self.estimated or usage.estimated
        self.__pydantic_fields_set__.update(_TOTALS)


_TOTALS = frozenset(UsageTotals.model_fields)


class SessionMetadata(_Camel):
    """``usage`` is the session's own; ``children_usage`` what the ``child_end`` events of its log say its
    children spent (a view totals a subtree from the children's own logs instead: ``rollup.Rollup``)."""

    session_id: str
    session_kind: SessionKind = ""
    title: str = ""
    cwd: str = ""
    provider: str = ""
    model_id: str = ""
    parent_session_id: str = ""
    root_session_id: str = ""
    agent_name: str = ""
    specialist: str = ""
    team_name: str = ""
    member_name: str = ""
    depth: int = Field(0, ge=0)
    status: Status = "pending"
    created_at: str = Field(default_factory=now_iso)
    updated_at: str = Field(default_factory=now_iso)
    event_count: int = 0
    last_event_type: str = ""
    usage: UsageTotals = Field(default_factory=UsageTotals)
    children_usage: UsageTotals = Field(default_factory=UsageTotals)
    forked_from: str | None = None
    forked_at_sequence: int | None = None
    reused_from: str | None = None  # a team member's session whose output it took (``zero swarm run --reuse``)
    replay_of: str | None = None  # the recorded run a top-level session or team replays (``zero replay``)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json", exclude_none=True)

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL


def apply_event(meta: SessionMetadata, event: Event) -> None:
    """Fold one event of the session's log into its metadata."""
    match event:
        case RunStarted():
            meta.status = "running"
            meta.provider = event.provider or meta.provider
            meta.model_id = event.model or meta.model_id
        case UsageUpdated():
            meta.usage.add(event.usage)
        case RunFinished():
            meta.status = event.status
            if event.usage.partly_unpriced:  # a run of an unpriced model costs "unknown", calls or not
                meta.usage.add(Usage(cost_usd=None))
        case StatusChanged() | TeamFinished():
            meta.status = event.status
        case TeamStarted():
            meta.status = "running"
        case ChildFinished():
            meta.children_usage.add(event.usage)
        case MessageAdded(role="user") if not meta.title:  # a session opened untitled: its first prompt names it
            meta.title = " ".join(event.content.split("<file path=", 1)[0].split())[:80]
        case (
            MessageAdded()
            | ModelStreaming()
            | AssistantText()
            | Reasoning()
            | ToolCallStarted()
            | PermissionRequested()
            | PermissionDecided()
            | ToolFinished()
            | RetryScheduled()
            | RateLimitWait()
            | Paused()
            | WarningRaised()
            | Compacted()
            | ErrorRaised()
            | ChildStarted()
            | TeamMessageSent()
            | BudgetTripped()
            | LandChanged()
        ):
            pass
        case _:
            assert_never(event)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredEvent:
    """An event as its session's log holds it: its place in the log and when it was written."""

    sequence: int
    created_at: str
    event: Event


def record_of(session_id: str, sequence: int, created_at: str, event: Event) -> dict[str, Any]:
    """The log record of an event: ``{id, sessionId, sequence, type, createdAt, payload}``."""
    return {
        "id": f"{session_id}:{sequence}",
        "sessionId": session_id,
        "sequence": sequence,
        "type": event.kind,
        "createdAt": created_at,
        "payload": event_payload(event),
    }
