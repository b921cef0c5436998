"""Running a team file on a script of model turns, in-process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from zero.agent import Event, PriceTable, ScriptedProvider, ScriptMatch, ScriptToolCall, ScriptTurn
from zero.orchestrator import TeamResult, TeamRunner, build_plan
from zero.sessions import FileSessionStore
from zero.specialists import AgentContext, SpecialistRegistry
from zero.tools import Workspace

CHAIN = """
name = "chain"
[[members]]
name = "writer"
specialist = "explorer"
prompt = "Write."
[[members]]
name = "reader"
specialist = "explorer"
depends_on = ["writer"]
prompt = "Read {{ writer.output }}"
[[members]]
name = "other"
specialist = "explorer"
prompt = "Other."
"""
"""A writer whose output a reader takes, and one more member on its own."""


def member(name: str, text: str = "", *calls: ScriptToolCall, turn: int | None = None, **kw: Any) -> ScriptTurn:
    return ScriptTurn(match=ScriptMatch(system=f'You are "{name}"', turn=turn), text=text, tool_calls=list(calls), **kw)


def team_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "team.toml"
    path.write_text(body)
    return path


async def run_team(
    workspace: Path,
    tmp_path: Path,
    body: str,
    turns: list[ScriptTurn],
    *,
    context: dict[str, Any] | None = None,
    on_event: Callable[[TeamRunner, Event], None] | None = None,
    **plan_kw: Any,
) -> tuple[TeamResult, TeamRunner, ScriptedProvider, list[Event]]:
    """Run a team file on a script; ``context`` sets fields of the ``AgentContext``; ``on_event`` hears each
    event as it is emitted, with the runner (to steer it)."""
    provider = ScriptedProvider(turns)
    prices = PriceTable.builtin()
    registry = SpecialistRegistry.load(workspace)
    plan = build_plan(
        team_file(tmp_path, body),
        registry,
        provider="scripted",
        model="gpt-4.1-mini",
        permission_mode="auto",
        prices=prices,
        workspace=workspace,
        **plan_kw,
    )
    ctx = AgentContext(
        store=FileSessionStore(tmp_path / "sessions"),
        registry=registry,
        workspace=Workspace([workspace]),
        provider=provider,
        model="gpt-4.1-mini",
        providers=lambda name: provider,
        prices=prices,
        **(context or {}),
    )
    runner = TeamRunner(plan, ctx, retry_delay=0.001)
    events: list[Event] = []
    runner.listen(events.append)
    if on_event is not None:
        runner.listen(lambda event: on_event(runner, event))
    result = await runner.run()
    return result, runner, provider, events
