"""The team runner: scheduling, failure policies, retries, the shared budget, messaging."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.teams import CHAIN, member, run_team, team_file

from zero.agent import PriceTable, ScriptedProvider, ScriptToolCall, ScriptTurn
from zero.agent.providers.scripted import ScriptError, ScriptUsage
from zero.orchestrator import TeamBudget, TeamRunner, build_plan
from zero.sessions import FileSessionStore, session_tree
from zero.specialists import AgentContext, SpecialistRegistry
from zero.tools import Workspace

pytestmark = pytest.mark.anyio


DIAMOND = """
name = "diamond"
goal = "Find the answer."
[[members]]
name = "a"
specialist = "explorer"
prompt = "Start."
[[members]]
name = "b"
specialist = "explorer"
depends_on = ["a"]
prompt = "Left, from: {{ a.output }}"
[[members]]
name = "c"
specialist = "explorer"
depends_on = ["a"]
prompt = "Right, from: {{ a.output }}"
[[members]]
name = "d"
specialist = "explorer"
depends_on = ["b", "c"]
prompt = "Join {{ b.output }} and {{ c.output }} for {{ goal }}"
"""


async def test_a_diamond_runs_in_waves_and_passes_outputs_on(workspace: Path, tmp_path: Path) -> None:
    result, runner, provider, events = await run_team(
        workspace,
        tmp_path,
        DIAMOND,
        [
            member("a", "A-OUT"),
            member("b", "B-OUT", delay=0.05),
            member("c", "C-OUT", delay=0.05),
            member("d", "D-OUT"),
        ],
    )
    assert result.status == "completed"
    order = [e.member for e in events if e.kind == "child_start"]
    assert order[0] == "a" and order[-1] == "d"
    lifecycle = [(e.kind, e.member) for e in events if e.kind in ("child_start", "child_end")]
    assert lifecycle.index(("child_start", "c")) < lifecycle.index(("child_end", "b"))  # b, c overlap
    d_prompt = [c for c in provider.calls if 'You are "d"' in c.messages[0].content][0].messages[1].content
    assert d_prompt == "Team goal:\nFind the answer.\n\nYour task:\nJoin B-OUT and C-OUT for Find the answer."
    store = runner.store
    team = store.metadata(runner.session_id)
    assert team.session_kind == "team" and team.status == "completed"
    kids = [m for m in store.list() if m.parent_session_id == runner.session_id]
    assert sorted(k.member_name for k in kids) == ["a", "b", "c", "d"]
    assert all(k.session_kind == "member" and k.root_session_id == runner.session_id for k in kids)
    assert team.children_usage.total_tokens == sum(k.usage.total_tokens for k in kids)
    assert session_tree(store, runner.session_id).subtree_usage == result.usage


async def test_a_large_teams_prompts_name_dependencies_first_and_count_the_rest(
    workspace: Path, tmp_path: Path
) -> None:
    names = [f"m{i}" for i in range(30)]
    body = 'name = "big"\n' + "".join(
        f'[[members]]\nname = "{n}"\nspecialist = "explorer"\nprompt = "go"\n'
        + ('depends_on = ["m28", "m5"]\n' if n == "m29" else "")
        for n in names
    )
    result, _, provider, _ = await run_team(workspace, tmp_path, body, [member(n, "done") for n in names])
    assert result.status == "completed"
    system = {c.messages[0].content.split('You are "')[1].split('"')[0]: c.messages[0].content for c in provider.calls}
    named = ", ".join(["m28", "m5", *[f"m{i}" for i in range(19) if i != 5]])
    assert f"The other members are: {named}, and 9 more; use send_message" in system["m29"]
    assert f"The other members are: {', '.join(f'm{i}' for i in range(1, 21))}, and 9 more;" in system["m0"]


FAILING = """
name = "failing"
[scheduler]
retries = {retries}
on_failure = "{policy}"
[[members]]
name = "flaky"
specialist = "explorer"
prompt = "x"
[[members]]
name = "after"
specialist = "explorer"
depends_on = ["flaky"]
prompt = "y"
[[members]]
name = "alone"
specialist = "explorer"
prompt = "z"
"""


@pytest.mark.parametrize(("retries", "status"), [(2, "completed"), (0, "failed")])
async def test_retries_of_a_retryable_error(workspace: Path, tmp_path: Path, retries: int, status: str) -> None:
    result, _, _, _ = await run_team(
        workspace,
        tmp_path,
        FAILING.format(retries=retries, policy="continue"),
        [
            member("flaky", error=ScriptError(kind="overloaded", retry_after=0.001), times=2),
            member("flaky", "fine"),
            member("after", "after ok"),
            member("alone", "alone ok"),
        ],
    )
    by = {m.name: m for m in result.members}
    assert by["flaky"].status == status and by["alone"].status == "completed"
    if status == "failed":
        assert by["after"].status == "skipped" and by["after"].reason == "dependency 'flaky' ended failed"
        assert result.status == "failed"
    else:
        assert by["after"].status == "completed" and result.status == "completed"


async def test_on_failure_stop_cancels_the_rest(workspace: Path, tmp_path: Path) -> None:
    result, _, _, _ = await run_team(
        workspace,
        tmp_path,
        FAILING.format(retries=0, policy="stop"),
        [
            member("flaky", error=ScriptError(kind="auth")),
            member("alone", "", delay=30),
        ],
    )
    by = {m.name: m.status for m in result.members}
    assert by == {"flaky": "failed", "after": "cancelled", "alone": "cancelled"}


LOOPERS = """
name = "loopers"
[budget]
{budget}
[scheduler]
max_concurrency = 3
[[members]]
name = "one"
specialist = "explorer"
prompt = "loop"
[[members]]
name = "two"
specialist = "explorer"
prompt = "loop"
[[members]]
name = "three"
specialist = "explorer"
prompt = "loop"
"""


def loopers(**kw: Any) -> list[ScriptTurn]:
    look = ScriptToolCall(name="list_directory")
    return [
        member(n, "still working", look, times=0, usage=ScriptUsage(prompt_tokens=3000, completion_tokens=1000), **kw)
        for n in ("one", "two", "three")
    ]


async def test_a_token_budget_stops_every_member_with_no_overshoot(workspace: Path, tmp_path: Path) -> None:
    result, runner, provider, events = await run_team(
        workspace, tmp_path, LOOPERS.format(budget="tokens = 60_000"), loopers()
    )
    assert result.status == "budget_exhausted"
    assert [m.status for m in result.members] == ["budget_exhausted"] * 3
    assert result.trip is not None and result.trip.limit == "tokens"
    assert str(result.trip).startswith("tokens limit reached:")
    calls = len(provider.calls)
    assert runner.ledger.used.tokens == calls * 4000 <= 60_000  # every call that started was paid for, within the limit
    assert calls >= 11  # and the budget was used, not refused early: 15 calls of 4,000 fit, each reserving ~4,900
    assert all(m.output == "still working" for m in result.members)  # partial output kept
    member_sessions = [runner.store.metadata(m.session_id) for m in result.members]
    assert all(s.status == "budget_exhausted" for s in member_sessions)


async def test_a_cost_budget_trips_the_same_way(workspace: Path, tmp_path: Path) -> None:
    # gpt-4.1-mini: 3,000 prompt + 1,000 completion tokens cost $0.0028 a call
    result, runner, provider, _ = await run_team(
        workspace, tmp_path, LOOPERS.format(budget="cost_usd = 0.03"), loopers()
    )
    assert result.status == "budget_exhausted" and result.trip is not None and result.trip.limit == "cost_usd"
    # three members in flight reserve ~$0.0045 each: the trip comes once used + held no longer fit
    assert runner.ledger.used.cost_usd <= 0.03 and len(provider.calls) >= 6
    assert [m.status for m in result.members] == ["budget_exhausted"] * 3


async def test_a_wall_clock_budget_stops_running_members(workspace: Path, tmp_path: Path) -> None:
    result, _, _, _ = await run_team(
        workspace, tmp_path, LOOPERS.format(budget="wall_seconds = 0.5"), loopers(delay=0.2)
    )
    assert result.status == "budget_exhausted" and result.trip is not None and result.trip.limit == "wall_seconds"
    assert [m.status for m in result.members] == ["budget_exhausted"] * 3
    assert result.duration < 2


async def test_members_are_warned_at_80_percent(workspace: Path, tmp_path: Path) -> None:
    # 20 turns: the three members (in lockstep) still have calls to make after 80 % is reached
    _, _, provider, _ = await run_team(workspace, tmp_path, LOOPERS.format(budget="turns = 20"), loopers())
    notes = [m.content for c in provider.calls for m in c.messages if m.content.startswith("[Zero] The team has used")]
    assert notes and "of its turns budget. Wrap up now" in notes[0]


async def test_members_message_each_other_durably(workspace: Path, tmp_path: Path) -> None:
    body = """
name = "chat"
[[members]]
name = "writer"
specialist = "explorer"
prompt = "send"
[[members]]
name = "reader"
specialist = "explorer"
depends_on = ["writer"]
prompt = "read"
"""
    result, runner, provider, _ = await run_team(
        workspace,
        tmp_path,
        body,
        [
            member(
                "writer",
                "",
                ScriptToolCall(name="send_message", arguments={"to": "reader", "body": "hello there"}),
                ScriptToolCall(name="send_message", arguments={"to": "nobody", "body": "x"}),
                turn=1,
            ),
            member("writer", "sent", turn=2),
            member("reader", "", ScriptToolCall(name="read_inbox"), turn=1),
            member("reader", "got it", turn=2),
        ],
    )
    assert result.status == "completed"
    tool_results = [m.content for c in provider.calls for m in c.messages if m.role == "tool"]
    assert "Message 1 delivered to reader." in tool_results
    assert any(r.startswith("Error: there is no member named 'nobody'; send to one of: reader") for r in tool_results)
    assert "[1] from writer:\nhello there" in tool_results
    log = [e.event for e in runner.store.events(runner.session_id)]
    sent = [(e.id, e.sender, e.to, e.body) for e in log if e.kind == "team_message"]
    assert sent == [(1, "writer", "reader", "hello there")]
    raw = (tmp_path / "sessions" / runner.session_id / "events.jsonl").read_text()
    assert '"payload":{"id":1,"from":"writer","to":"reader","body":"hello there"}' in raw


async def test_member_grants_are_carved_out_of_the_team_budget(workspace: Path, tmp_path: Path) -> None:
    body = LOOPERS.format(budget="tokens = 200_000").replace(
        'name = "one"\n', 'name = "one"\nbudget = { tokens = 12_000 }\n'
    )
    turns = loopers()
    turns[1] = member("two", "two done")
    turns[2] = member("three", "three done")
    result, _, _, _ = await run_team(workspace, tmp_path, body, turns)
    by = {m.name: m for m in result.members}
    assert by["one"].status == "budget_exhausted" and "member 'one' budget exhausted" in by["one"].reason
    assert by["one"].usage.total_tokens <= 12_000
    assert by["two"].status == by["three"].status == "completed"
    assert result.status == "budget_exhausted"


async def test_budget_overrides_replace_the_file(workspace: Path, tmp_path: Path) -> None:
    result, _, _, _ = await run_team(
        workspace, tmp_path, LOOPERS.format(budget="tokens = 1_000_000"), loopers(), budget=TeamBudget(tokens=20_000)
    )
    assert result.trip is not None and result.trip.allowed == 20_000


class Broken:
    """A provider with a bug: it raises what no provider should."""

    name = "broken"

    async def stream(self, request: Any) -> Any:
        nothing: tuple[Any, ...] = ()
        for event in nothing:
            yield event
        raise KeyError("choices")

    async def aclose(self) -> None:
        return None


BUGGY = """
name = "buggy"
[[members]]
name = "victim"
specialist = "explorer"
provider = "broken"
prompt = "x"
[[members]]
name = "after"
specialist = "explorer"
depends_on = ["victim"]
prompt = "y"
[[members]]
name = "bystander"
specialist = "explorer"
prompt = "z"
"""


async def test_a_member_that_hits_a_bug_fails_alone_and_the_team_goes_on(workspace: Path, tmp_path: Path) -> None:
    provider = ScriptedProvider([member("bystander", "fine")])
    registry = SpecialistRegistry.load(workspace)
    plan = build_plan(
        team_file(tmp_path, BUGGY),
        registry,
        provider="scripted",
        model="gpt-4.1-mini",
        permission_mode="auto",
        prices=PriceTable.builtin(),
    )
    store = FileSessionStore(tmp_path / "sessions")
    ctx = AgentContext(
        store=store,
        registry=registry,
        workspace=Workspace([workspace]),
        provider=provider,
        model="gpt-4.1-mini",
        providers=lambda name: Broken() if name == "broken" else provider,
    )
    result = await TeamRunner(plan, ctx).run()
    by = {m.name: m for m in result.members}
    assert by["victim"].status == "failed" and "internal error (a bug in Zero" in by["victim"].reason
    assert "KeyError: 'choices'" in by["victim"].reason
    assert by["after"].status == "skipped" and by["bystander"].status == "completed"
    assert result.status == "failed"
    log = [e.event for e in store.events(by["victim"].session_id)]
    error = next(e for e in log if e.kind == "error")
    assert error.kind == "error" and "Traceback" in error.detail and "KeyError" in error.detail
    assert log[-1].kind == "run_end" and log[-1].status == "failed"
    for state in result.members:  # every session ends with a final status
        assert store.metadata(state.session_id).status == state.status


CAPPED = member("writer", "cut short", finish="length")


@pytest.mark.parametrize(
    ("other", "ended", "status", "error_code", "exit_code"),
    [
        (member("other", "fine"), "completed", "output_capped", "output_capped", 4),  # capped + skipped: was 1
        (member("other", error=ScriptError(kind="auth")), "failed", "failed", "auth_error", 3),  # was 1
        (
            member("other", "", ScriptToolCall(name="list_directory"), times=0),
            "max_turns",
            "output_capped",
            "output_capped",
            4,
        ),
    ],
)
async def test_a_team_ends_as_its_worst_member_by_the_exit_code(
    workspace: Path,
    tmp_path: Path,
    other: ScriptTurn,
    ended: str,
    status: str,
    error_code: str | None,
    exit_code: int,
) -> None:
    body = CHAIN.replace('prompt = "Other."', 'prompt = "Other."\nmax_turns = 2')
    result, _, _, events = await run_team(workspace, tmp_path, body, [CAPPED, other])
    by = {m.name: m.status for m in result.members}
    assert by == {"writer": "output_capped", "reader": "skipped", "other": ended}
    assert (result.status, result.error_code, result.exit_code) == (status, error_code, exit_code)
    end = events[-1]
    assert end.kind == "team_end" and (end.status, end.error_code) == (status, error_code)
