"""Stopping one member of a running team in-process: its dependents follow on_failure, and one that
waits for its dependency never starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.teams import CHAIN, member, run_team

from zero.agent import ChildFinished, Event, Paused, ScriptToolCall, ToolCallStarted
from zero.orchestrator import TeamRunner

pytestmark = pytest.mark.anyio

LOOK = ScriptToolCall(name="list_directory", arguments={})


def ends(events: list[Event]) -> list[tuple[str | None, str]]:
    return [(e.member, e.status) for e in events if isinstance(e, ChildFinished)]


async def test_a_stopped_member_stops_the_team_under_on_failure_stop(workspace: Path, tmp_path: Path) -> None:
    def stop_the_writer(runner: TeamRunner, event: Event) -> None:
        if isinstance(event, ToolCallStarted) and event.session_id == runner.members["writer"].session_id:
            runner.stop_member("writer")

    body = CHAIN.replace('name = "chain"', 'name = "chain"\n[scheduler]\non_failure = "stop"')
    turns = [member("writer", "writing", LOOK), member("other", "never said", delay=30)]
    result, _, _, events = await run_team(workspace, tmp_path, body, turns, on_event=stop_the_writer)
    states = {m.name: (m.status, m.reason, m.output) for m in result.members}
    assert states == {
        "writer": ("cancelled", "stopped by the user", "writing"),
        "reader": ("cancelled", 'the team stopped after a failure (on_failure = "stop")', ""),
        "other": ("cancelled", "", ""),  # stopped in its model call
    }
    assert result.status == "cancelled" and result.exit_code == 1


async def test_a_member_waiting_for_its_dependency_is_stopped_at_once_and_never_starts(
    workspace: Path, tmp_path: Path
) -> None:
    answers: list[str] = []

    def stop_the_reader(runner: TeamRunner, event: Event) -> None:
        if isinstance(event, ToolCallStarted) and event.session_id == runner.members["writer"].session_id:
            answers.append(runner.stop_member("reader"))

    turns = [
        member("writer", "writing", LOOK, turn=1),
        member("writer", "written", turn=2),
        member("other", "other done"),
    ]
    result, _, provider, events = await run_team(workspace, tmp_path, CHAIN, turns, on_event=stop_the_reader)
    assert answers == ["stopping reader: it ends cancelled, keeping its output so far"]
    assert {m.name: (m.status, m.reason) for m in result.members} == {
        "writer": ("completed", ""),
        "reader": ("cancelled", "stopped by the user"),
        "other": ("completed", ""),
    }
    assert ends(events).index(("reader", "cancelled")) < ends(events).index(("writer", "completed"))
    assert not any('You are "reader"' in r.messages[0].content for r in provider.calls)


async def test_pause_every_member_then_continue_one_then_the_rest(workspace: Path, tmp_path: Path) -> None:
    answers: list[str] = []
    looking: set[str] = set()
    paused: list[tuple[str, bool]] = []

    def steer(runner: TeamRunner, event: Event) -> None:
        names = {s.session_id: s.name for s in runner.members.values()}
        if isinstance(event, ToolCallStarted) and event.session_id in names:
            looking.add(names[event.session_id])
            if looking == {"writer", "other"}:  # both are in a tool: each pauses before its next call
                answers.append(runner.pause_members(None))
        elif isinstance(event, Paused):
            paused.append((names[event.session_id], event.paused))
            if paused == [("writer", True), ("other", True)] or paused == [("other", True), ("writer", True)]:
                answers.append(runner.continue_members("other"))
        elif isinstance(event, ChildFinished) and event.member == "other":
            answers.append(runner.continue_members(None))

    turns = [
        member("writer", "writing", LOOK, turn=1),
        member("writer", "written", turn=2),
        member("other", "looking", LOOK, turn=1),
        member("other", "other done", turn=2),
        member("reader", "read"),
    ]
    result, _, _, events = await run_team(workspace, tmp_path, CHAIN, turns, on_event=steer)
    assert answers == [
        "paused writer, reader, other: each waits before its next model call (zero swarm continue goes on)",
        "continuing other",
        "continuing reader, writer",  # the reader, yet to start, was paused too
    ]
    assert sorted(paused) == [("other", False), ("other", True), ("writer", False), ("writer", True)]
    assert paused.index(("writer", False)) > paused.index(("other", False))
    assert [m for m, _ in ends(events)] == ["other", "writer", "reader"]
    assert {m.status for m in result.members} == {"completed"}


async def test_a_request_nested_too_deep_to_parse_is_answered_as_a_bad_request() -> None:
    from typing import Any, cast

    from zero.orchestrator.control_socket import _answer

    answer = await _answer(cast(Any, None), b"[" * 60_000)  # (refused before the run is asked anything)
    assert answer["ok"] is False and answer["error"].startswith("a request is one JSON object a line: ")
