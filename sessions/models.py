"""The on-disk shape of a session's ``metadata.json`` (camelCase, as upstream)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from zero.agent import Usage

__all__ = ["SessionKind", "SessionMetadata", "UsageTotals", "add_children_usage", "now_iso", "set_status"]

SessionKind = Literal["", "child", "team", "member", "fork"]
TERMINAL = frozenset(
    {"completed", "failed", "cancelled", "interrupted", "skipped", "budget_exhausted", "timed_out", "max_turns"}
)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class UsageTotals(_Camel):
    """Tokens and cost; ``cost_usd`` is ``None`` when some model's price is unknown."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = 0.0
    calls: int = 0

    @classmethod
    def of(cls, usage: Usage) -> UsageTotals:
        return cls.model_validate(usage.to_json())

    def to_usage(self) -> Usage:
        return Usage(self.prompt_tokens, self.completion_tokens, self.cached_tokens, self.cost_usd, self.calls)


class SessionMetadata(_Camel):
    """``usage`` is the session's own; ``children_usage`` the rolled-up total of its descendants."""

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
    status: str = "pending"
    created_at: str = Field(default_factory=now_iso)
    updated_at: str = Field(default_factory=now_iso)
    event_count: int = 0
    last_event_type: str = ""
    usage: UsageTotals = Field(default_factory=UsageTotals)
    children_usage: UsageTotals = Field(default_factory=UsageTotals)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")

    @property
    def subtree_usage(self) -> Usage:
        return self.usage.to_usage() + self.children_usage.to_usage()

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL


MetadataChange = Callable[[SessionMetadata], None]


def set_status(status: str) -> MetadataChange:
    """A metadata change for ``SessionStore.append``/``update``: the session's new status."""

    def change(meta: SessionMetadata) -> None:
        meta.status = status

    return change


def add_children_usage(usage: Usage, status: str | None = None) -> MetadataChange:
    """Roll a child's usage up into its parent (once per child run), optionally with a new status."""

    def change(meta: SessionMetadata) -> None:
        meta.children_usage = UsageTotals.of(meta.children_usage.to_usage() + usage)
        if status is not None:
            meta.status = status

    return change
