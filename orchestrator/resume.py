"""What a team's sessions say about its run, to resume it: the team it ran (as recorded when it
started), each member's session and how it ended, and what the run spent against its budget."""

from __future__ import annotations

from dataclasses import dataclass, field

from zero.agent import RunFinished, Status, TeamStarted, Usage
from zero.errors import UsageError
from zero.orchestrator.ledger import Ledger
from zero.orchestrator.team import TeamBudget, TeamFile
from zero.sessions import SessionStore, session_tree
from zero.tools import Owns

__all__ = ["MemberRecord", "RecordedTeam", "charge", "member_owns", "read_team", "reused_origin", "team_ledger"]


@dataclass(frozen=True, kw_only=True)
class MemberRecord:
    session_id: str
    status: Status
    output: str = ""
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    has_history: bool = False  # it ran, so its conversation continues
    inputs: str = ""  # its digest of its specialist, model and settings (zero.orchestrator.reuse.member_inputs)


@dataclass(frozen=True, kw_only=True)
class RecordedTeam:
    session_id: str
    team: TeamFile
    file: str
    budget: TeamBudget
    members: dict[str, MemberRecord]
    spent: Usage  # what every session of the run spent so far
    retries: int
    resumed: int  # how many times it was resumed already


def read_team(store: SessionStore, team_id: str) -> RecordedTeam:
    """The run recorded in team session ``team_id``; ``UsageError`` if it is not a team, or ran with a
    version of Zero that did not record its team."""
    meta = store.metadata(team_id)
    if meta.session_kind != "team":
        raise UsageError(f"session {team_id} is not a team run; resume it with: zero sessions resume {team_id}")
    starts = [e.event for e in store.events(team_id) if isinstance(e.event, TeamStarted)]
    if not starts or not starts[0].spec:
        raise UsageError(f"team session {team_id} did not record its team file, so it cannot be resumed")
    first = starts[0]
    tree = session_tree(store, team_id)
    members = {}
    for member in first.members:
        member_meta = store.metadata(member.session_id)
        events = [e.event for e in store.events(member.session_id)]
        origin = reused_origin(store, member.session_id)  # a reused member's output is its origin's
        worked = events if origin == member.session_id else [e.event for e in store.events(origin)]
        end = next((e for e in reversed(worked) if isinstance(e, RunFinished)), None)
        members[member.name] = MemberRecord(
            session_id=member.session_id,
            status=member_meta.status,
            output=end.output if end is not None else "",
            usage=tree.rollup.subtree(member.session_id),
            turns=member_meta.usage.calls,  # (its model calls in every run, as the tree counts them)
            has_history=any(e.kind == "run_start" for e in events),
            inputs=member.inputs,
        )
    retries = 0
    for node in tree.walk()[1:]:
        retries += sum(1 for e in store.events(node.meta.session_id) if e.event.kind == "retry")
    return RecordedTeam(
        session_id=team_id,
        team=TeamFile.model_validate(first.spec),
        file=first.file,
        budget=TeamBudget.model_validate(first.budget),
        members=members,
        spent=tree.subtree_usage,
        retries=retries,
        resumed=len(starts) - 1,
    )


def reused_origin(store: SessionStore, session_id: str) -> str:
    """The session that did the work of ``session_id``: itself, unless it was reused from an earlier one
    (``zero swarm run --reuse``), then that one's origin."""
    seen = {session_id}
    while (earlier := store.metadata(session_id).reused_from) and earlier not in seen:
        seen.add(earlier)
        session_id = earlier
    return session_id


def charge(ledger: Ledger, recorded: RecordedTeam) -> Ledger:
    """``ledger`` charged with what the recorded run spent (its wall time starts again)."""
    ledger.used.tokens = recorded.spent.total_tokens
    ledger.used.cost_usd = recorded.spent.cost_usd or 0.0
    ledger.used.turns = recorded.spent.calls
    ledger.used.retries = recorded.retries
    return ledger


def team_ledger(store: SessionStore, team_id: str) -> Ledger | None:
    """The ledger a member of team ``team_id`` resumed alone spends from: what the team's budget has left
    (None: a run of a Zero that did not record its team, so no budget to spend from)."""
    try:
        recorded = read_team(store, team_id)
    except UsageError:
        return None
    return charge(Ledger(recorded.budget, name="team"), recorded)


def member_owns(store: SessionStore, team_id: str, member: str) -> Owns | None:
    """The ``owns`` of ``member`` in the team ``team_id`` ran (None: it owned no globs, or the run recorded no
    team), which a member resumed alone still writes within."""
    try:
        recorded = read_team(store, team_id)
    except UsageError:
        return None
    globs = next((m.owns for m in recorded.team.members if m.name == member), None)
    return Owns(globs) if globs else None
