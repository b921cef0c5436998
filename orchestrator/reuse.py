"""Which members of a team a run may take from an earlier run of it (``zero swarm run --reuse TEAM_ID``):
each member whose inputs are unchanged, unless a member it depends on runs again.

A member's inputs are its prompt after placeholders (the first message its session recorded), its
specialist, model and the rest of its settings (``member_inputs``, recorded in ``team_start``), and what
its read-only tool calls saw: each is made again on the workspace as it is now and must answer what it
answered then. A member that wrote files, ran commands or delegated is never reused: its work cannot be
replayed by reading.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zero.agent import MessageAdded, ToolCallStarted, ToolFinished
from zero.agent.output_schema import SUBMIT_RESULT, typed_prompt
from zero.errors import ToolError
from zero.orchestrator.plan import MemberPlan, TeamPlan, member_prompt, placeholder, typed_result
from zero.orchestrator.resume import RecordedTeam, reused_origin
from zero.sessions import SessionStore
from zero.tools import Tool, ToolContext, Workspace, budget_output, builtin_tools
from zero.tools.budget import DEFAULT_MAX_CHARS  # what a tool result keeps, as the agent loop cuts it

__all__ = ["REPLAYED", "Reuse", "member_inputs", "plan_reuse"]

REPLAYED = frozenset({"read_file", "list_directory", "glob", "grep", "update_plan"})
"""The tool calls a reused member may have made: each is made again, and must answer as it did."""


@dataclass(frozen=True, kw_only=True)
class Reuse:
    """What ``--reuse`` decided for one member: taken from ``session_id`` (its output, ``turns``), or run,
    and why."""

    name: str
    reused: bool
    reason: str
    session_id: str = ""  # the session its output comes from (the first run that made it)
    output: str = ""
    turns: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "reused": self.reused, "reason": self.reason, "from": self.session_id or None}


_WHERE = frozenset({"location", "path", "fingerprint", "trusted", "narrowed", "bases", "inherited"})
"""A resolved specialist's fields that say where it came from, not what it does."""


def member_inputs(plan: MemberPlan, specialists: dict[int, dict[str, Any]] | None = None) -> str:
    """A digest of what a member is besides its prompt: its specialist manifest as resolved (every key of
    it), model, provider and the team file's settings for it but its prompt, dependencies and budget.
    ``specialists``: the manifests taken apart so far, by the identity of the specialist (a team's members
    share a few, and taking one apart costs more than the rest of the digest)."""
    taken = {} if specialists is None else specialists
    specialist = taken.get(id(plan.specialist))
    if specialist is None:
        specialist = {k: v for k, v in dataclasses.asdict(plan.specialist).items() if k not in _WHERE}
        taken[id(plan.specialist)] = specialist
    data = {
        "specialist": specialist,
        "member": plan.spec.model_dump(mode="json", exclude={"name", "prompt", "depends_on", "budget"}),
        "run": [plan.provider, plan.model, plan.permission_mode, plan.max_turns, plan.max_output_tokens],
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:32]


async def plan_reuse(
    plan: TeamPlan,
    recorded: RecordedTeam,
    store: SessionStore,
    workspace: Workspace,
    redactor: Callable[[str], str],
) -> dict[str, Reuse]:
    """Each member's verdict on reusing its work in ``recorded``, dependencies first."""
    verdicts: dict[str, Reuse] = {}

    def output(name: str, keys: tuple[str, ...]) -> str:
        text = verdicts[name].output
        return placeholder(name, text, typed_result(plan.members[name], text), keys)

    for wave in plan.waves:
        for name in wave:
            m = plan.members[name]
            verdicts[name] = await _verdict(plan, m, recorded, store, workspace, redactor, verdicts, output)
    return {name: verdicts[name] for name in plan.members}


async def _verdict(
    plan: TeamPlan,
    m: MemberPlan,
    recorded: RecordedTeam,
    store: SessionStore,
    workspace: Workspace,
    redactor: Callable[[str], str],
    verdicts: dict[str, Reuse],
    output: Callable[[str, tuple[str, ...]], str],
) -> Reuse:
    def runs(reason: str) -> Reuse:
        return Reuse(name=m.name, reused=False, reason=reason)

    record = recorded.members.get(m.name)
    if record is None:
        return runs(f"it is not a member of {recorded.session_id}")
    if record.status != "completed":
        return runs(f"it ended {record.status} in {recorded.session_id}")
    again = [d for d in m.spec.depends_on if not verdicts[d].reused]
    if again:
        return runs(
            f"its dependency {again[0]} runs again"
            if len(again) == 1
            else f"its dependencies {', '.join(again)} run again"
        )
    if record.inputs != member_inputs(m):
        return runs("its specialist, model or settings changed")
    origin = reused_origin(store, record.session_id)
    events = [e.event for e in store.events(origin)]
    first = next((e.content for e in events if isinstance(e, MessageAdded) and e.role == "user"), None)
    try:
        prompt = member_prompt(plan, m, output)
    except LookupError as e:  # a field of a dependency's typed result it names is not there
        return runs(str(e))
    if first != (prompt if m.output_schema is None else typed_prompt(prompt)):
        return runs("its prompt changed")
    changed = await _changed_read(events, workspace, redactor)
    if changed is not None:
        return runs(changed)
    return Reuse(
        name=m.name,
        reused=True,
        reason=f"its inputs are unchanged since {recorded.session_id}",
        session_id=origin,
        output=record.output,
        turns=record.turns,
    )


async def _changed_read(events: list[Any], workspace: Workspace, redactor: Callable[[str], str]) -> str | None:
    """Why the member's tool calls rule its reuse out (one that cannot be replayed, or answers otherwise
    now), or None: each answers as it did."""
    results = {e.tool_call_id: e for e in events if isinstance(e, ToolFinished)}
    tools: dict[str, Tool] = {t.name: t for t in builtin_tools()}
    ctx = ToolContext(workspace=workspace)  # one for the member's calls, in order (update_plan's plan)
    for call in (e for e in events if isinstance(e, ToolCallStarted)):
        if call.name == SUBMIT_RESULT:  # its answer follows from its arguments and the schema, which are inputs
            continue
        shown = f"{call.name} {json.dumps(call.arguments, ensure_ascii=False)}"
        if call.name not in REPLAYED or call.side_effect != "read":
            return f"it called {call.name}, which a reuse cannot replay"
        result = results.get(call.id)
        if result is None or result.status == "denied":
            continue
        try:
            made = await tools[call.name].call(call.arguments, ctx)
            status, text = ("error" if made.is_error else "ok"), made.text
        except ToolError as e:
            status, text = "error", f"Error: {e}"
        if (status, budget_output(redactor(text), DEFAULT_MAX_CHARS)[0]) != (result.status, result.output):
            return f"what it read changed: {shown}"
    return None
