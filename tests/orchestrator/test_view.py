"""The team tree renderer against reviewed snapshots (UPDATE_SNAPSHOTS=1 rewrites them)."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

from rich.console import Console

from zero.agent import (
    AssistantText,
    ChildFinished,
    ChildStarted,
    ModelStreaming,
    RetryScheduled,
    StatusChanged,
    ToolCallStarted,
    Usage,
    UsageUpdated,
)
from zero.orchestrator.view import STALL_SECONDS, BudgetLine, TeamTree, TreeNode, render_tree

SNAPSHOTS = Path(__file__).parent / "snapshots"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def team(clock: Clock) -> TeamTree:
    tree = TeamTree(
        TreeNode(session_id="team_1", name="release-review", kind="team", status="running", started=clock.now), clock
    )
    for sid, name, spec, deps in [
        ("m_map", "mapper", "explorer", []),
        ("m_rev", "reviewer", "code-review", ["mapper"]),
        ("m_test", "tester", "tester", ["mapper"]),
        ("m_rep", "reporter", "planner", ["reviewer", "tester"]),
    ]:
        tree.add(
            TreeNode(
                session_id=sid,
                name=name,
                kind="member",
                specialist=spec,
                model="gpt-4.1-mini",
                parent="team_1",
                waiting_for=deps,
            )
        )
    return tree


def usage(sid: str, prompt: int, completion: int, cost: float) -> UsageUpdated:
    return UsageUpdated.of(
        sid,
        "gpt-4.1-mini",
        Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=0, cost_usd=cost, calls=1),
    )


def call(sid: str, name: str, **args: object) -> ToolCallStarted:
    return ToolCallStarted(session_id=sid, id="c1", name=name, arguments=dict(args))


PARENTS = {"child_1": "m_rev"}


def start(sid: str, member: str, spec: str) -> ChildStarted:
    parent = PARENTS.get(sid, "team_1")
    team_member = member if parent == "team_1" else None
    return ChildStarted(session_id=parent, child_session_id=sid, specialist=spec, agent_name=member, member=team_member)


def end(sid: str, status: str, usage: Usage, ms: int) -> ChildFinished:
    parent = PARENTS.get(sid, "team_1")
    return ChildFinished(session_id=parent, child_session_id=sid, status=status, usage=usage, duration_ms=ms)  # type: ignore[arg-type]


def running(clock: Clock) -> TeamTree:
    tree = team(clock)
    tree.apply(start("m_map", "mapper", "explorer"))
    clock.now += 4
    tree.apply(usage("m_map", 1800, 60, 0.0008))
    tree.apply(
        end(
            "m_map",
            "completed",
            Usage(prompt_tokens=1800, completion_tokens=60, cached_tokens=0, cost_usd=0.0008, calls=1),
            4000,
        )
    )
    tree.apply(start("m_rev", "reviewer", "code-review"))
    tree.apply(start("m_test", "tester", "tester"))
    clock.now += 2
    tree.apply(usage("m_rev", 2400, 90, 0.0011))
    tree.apply(call("m_rev", "grep", pattern="TODO", path="src/"))
    tree.apply(start("child_1", "explorer", "explorer"))
    tree.apply(usage("child_1", 900, 40, 0.0004))
    tree.apply(call("child_1", "read_file", path="src/app.py"))
    tree.apply(RetryScheduled(session_id="m_test", attempt=1, delay_seconds=4.0, code="rate_limited", message="429"))
    tree.nodes["m_test"].last_event = clock.now - 130  # silent for a while: stalled
    clock.now += 1.5
    return tree


def budget(tokens: int, cost: float, turns: int, seconds: float) -> list[BudgetLine]:
    return [
        BudgetLine(label="tokens", used=tokens, allowed=20_000, text=f"{tokens:,} / 20,000"),
        BudgetLine(label="cost", used=cost, allowed=0.01, text=f"${cost:.4f} / $0.0100"),
        BudgetLine(label="turns", used=turns, allowed=10, text=f"{turns} / 10 model calls"),
        BudgetLine(label="time", used=seconds, allowed=60, text=f"{seconds:.0f}s / 60s"),
    ]


def render(tree: TeamTree, lines: list[BudgetLine], max_lines: int | None = None) -> str:
    out = io.StringIO()
    Console(file=out, width=100).print(render_tree(tree, budget=lines, max_lines=max_lines))
    return out.getvalue()


def check(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("UPDATE_SNAPSHOTS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name} snapshot differs; review and rerun with UPDATE_SNAPSHOTS=1"


def test_a_running_team() -> None:
    clock = Clock()
    tree = running(clock)
    check("running", render(tree, budget(5_200, 0.0023, 4, 7.5)))


def test_a_finished_team() -> None:
    clock = Clock()
    tree = running(clock)
    tree.apply(
        end(
            "child_1",
            "completed",
            Usage(prompt_tokens=900, completion_tokens=40, cached_tokens=0, cost_usd=0.0004, calls=1),
            1500,
        )
    )
    tree.apply(AssistantText(session_id="m_rev", delta="Two findings."))
    tree.apply(
        end(
            "m_rev",
            "completed",
            Usage(prompt_tokens=3300, completion_tokens=130, cached_tokens=0, cost_usd=0.0015, calls=2),
            3500,
        )
    )
    tree.apply(usage("m_test", 1500, 50, 0.0007))
    tree.apply(
        end(
            "m_test",
            "completed",
            Usage(prompt_tokens=1500, completion_tokens=50, cached_tokens=0, cost_usd=0.0007, calls=1),
            3600,
        )
    )
    tree.apply(start("m_rep", "reporter", "planner"))
    clock.now += 3
    tree.apply(usage("m_rep", 2000, 300, 0.0013))
    tree.apply(
        end(
            "m_rep",
            "completed",
            Usage(prompt_tokens=2000, completion_tokens=300, cached_tokens=0, cost_usd=0.0013, calls=1),
            3000,
        )
    )
    tree.root.status, tree.root.finished = "completed", clock.now
    check("finished", render(tree, budget(8_540, 0.0047, 6, 12.0)))


def test_a_team_whose_budget_ran_out() -> None:
    clock = Clock()
    tree = running(clock)
    reason = "team budget exhausted: tokens limit reached: 19,800 tokens used of 20,000 tokens"
    for sid in ("child_1", "m_rev", "m_test"):
        tree.apply(end(sid, "budget_exhausted", tree.nodes[sid].usage, 2000))
        tree.nodes[sid].reason = reason if sid != "child_1" else ""
    tree.apply(
        StatusChanged(session_id="m_rep", status="budget_exhausted", reason="the team budget ran out before it started")
    )
    tree.root.status, tree.root.finished = "budget_exhausted", clock.now
    check("budget_exhausted", render(tree, budget(19_800, 0.0089, 9, 9.5)))


def test_a_budget_bar_keeps_its_unused_part_in_a_picture() -> None:
    """rich's bar draws its unused part only as a colour: ``sessions tree --svg`` showed a quarter-full bar
    as a short line with nothing after it."""
    console = Console(file=io.StringIO(), record=True, width=100)
    console.print(render_tree(running(Clock()), budget=budget(5_000, 0.0023, 4, 7.5)))
    svg = console.export_svg()
    assert "━" * 6 + "<" in svg and ">" + "─" * 18 + "<" in svg  # tokens: 25 % of 24 cells used, 18 left


def test_finished_siblings_fold_when_the_screen_is_full() -> None:
    clock = Clock()
    tree = TeamTree(TreeNode(session_id="t", name="big", kind="team", status="running", started=clock.now), clock)
    for i in range(40):
        tree.add(
            TreeNode(
                session_id=f"m{i}",
                name=f"m{i:02d}",
                kind="member",
                specialist="explorer",
                parent="t",
                status="completed" if i < 30 else "running",
                started=clock.now,
            )
        )
    tree.nodes["m3"].status = "failed"
    text = render(tree, [], max_lines=20)
    assert "… 30 finished (29 completed, 1 failed)" in text
    assert "m35" in text and "m05" not in text
    assert len(text.splitlines()) <= 20
    tight = render(tree, [], max_lines=12)
    assert "… 5 more (5 running)" in tight and len(tight.splitlines()) <= 12


def test_a_tree_read_from_disk_measures_silence_in_the_events_own_time() -> None:
    """Events from a log carry the wall-clock time they were written: a member that spoke a second
    ago is running, not "stalled for 50 years"."""
    now = time.time()
    tree = TeamTree(TreeNode(session_id="team_1", name="t", kind="team", status="running"), clock=time.time)
    tree.apply(start("m_map", "mapper", "explorer"), at=now - 1)
    tree.apply(usage("m_map", 10, 5, 0.0), at=now - 1)
    assert tree.display_status(tree.nodes["m_map"], time.time()) == "running"
    tree.apply(call("m_map", "grep", pattern="x"), at=now - STALL_SECONDS - 5)
    assert tree.display_status(tree.nodes["m_map"], time.time()) == "stalled"


def test_a_member_that_streams_is_not_stalled_live_or_from_its_log() -> None:
    """Text deltas are not stored, and a tool call's arguments are no event at all: the streaming
    events a long call sends now and then are what says it is alive, in the log too."""
    now = time.time()
    tree = TeamTree(TreeNode(session_id="team_1", name="t", kind="team", status="running"), clock=time.time)
    tree.apply(start("m_map", "mapper", "explorer"), at=now - STALL_SECONDS - 50)
    tree.apply(ModelStreaming(session_id="m_map", received=12_000), at=now - 20)
    node = tree.nodes["m_map"]
    assert tree.display_status(node, time.time()) == "running" and node.activity == "writing..."
