"""The run tree: one hub routing each event to its session's listeners then up the tree, and one stop."""

from __future__ import annotations

import anyio
import pytest

from zero.agent import Event, MessageAdded
from zero.errors import SessionError
from zero.sessions import Listener, RunNode, RunTree, SessionMetadata

pytestmark = pytest.mark.anyio


def said(session_id: str, text: str = "hi") -> MessageAdded:
    return MessageAdded(session_id=session_id, role="assistant", content=text)


def cancelled(node: RunNode) -> bool:
    return node.scope.cancel_called


def team_tree() -> RunTree:
    """A team, a member below it, that member's Task child, and a second member."""
    tree = RunTree()
    team = tree.add("team", kind="team", title="t", team_name="t")
    member = tree.add("m1", kind="member", under=team, title="t: a", member_name="a")
    tree.add("c1", kind="child", under=member, title="map")
    tree.add("m2", kind="member", under=team, member_name="b")
    return tree


async def test_a_node_sits_below_its_parent_on_its_root() -> None:
    tree = team_tree()
    child = tree.nodes["c1"]
    assert (child.parent_session_id, child.root_session_id, child.depth, child.kind) == ("m1", "team", 2, "child")
    assert child.team_name == "t" and tree.nodes["m1"].member_name == "a"
    assert [n.session_id for n in tree.nodes["team"].walk()] == ["team", "m1", "c1", "m2"]
    resumed = RunTree().recorded(
        SessionMetadata(session_id="c9", session_kind="child", parent_session_id="m1", root_session_id="team", depth=2)
    )
    assert (resumed.parent, resumed.parent_session_id, resumed.root_session_id, resumed.depth) == (
        None,
        "m1",
        "team",
        2,
    )


async def test_an_event_reaches_its_own_session_first_then_every_node_above_it_once() -> None:
    tree = team_tree()
    heard: list[tuple[str, str]] = []

    def hears(who: str) -> Listener:
        return lambda event: heard.append((who, event.session_id))

    for sid in ("team", "m1", "c1", "m2"):
        tree.attach(tree.nodes[sid], hears(f"own:{sid}"))
        tree.listen(hears(f"under:{sid}"), under=tree.nodes[sid])
    tree.listen(hears("everyone"))
    tree.emit(said("c1"))
    assert heard == [
        ("own:c1", "c1"),
        ("under:c1", "c1"),
        ("under:m1", "c1"),
        ("under:team", "c1"),
        ("everyone", "c1"),
    ]
    heard.clear()
    tree.emit(said("elsewhere"))  # no node of this run: only who hears everything
    assert heard == [("everyone", "elsewhere")]


async def test_a_subscriber_hears_its_subtree_until_its_node_closes() -> None:
    tree = team_tree()
    member = tree.nodes["m1"]
    stream = tree.subscribe(member)
    for sid in ("c1", "m2", "m1", "team"):
        tree.emit(said(sid))
    tree.close(member)
    tree.emit(said("m1", "after"))
    async with stream:
        got: list[Event] = [e async for e in stream]
    assert [e.session_id for e in got] == ["c1", "m1"]
    async with tree.subscribe(member) as late:  # its node is closed: it ends at once
        assert [e async for e in late] == []


async def test_a_closed_node_still_records_and_its_id_may_run_again() -> None:
    tree = team_tree()
    member = tree.nodes["m1"]
    heard: list[Event] = []
    tree.attach(member, heard.append)
    with pytest.raises(SessionError, match="session m1 is running already"):
        tree.add("m1", under=tree.nodes["team"])
    tree.close(member)
    tree.emit(said("m1", "its final status"))  # (a session stopped before it ran is given one after it closed)
    again = tree.add("m1", kind="member", under=tree.nodes["team"])
    assert [e.content for e in heard if isinstance(e, MessageAdded)] == ["its final status"]
    assert tree.nodes["m1"] is again and [n.session_id for n in tree.nodes["team"].children] == ["m2", "m1"]


async def test_stop_marks_a_subtree_cancels_its_runs_and_a_new_node_below_stops_too() -> None:
    tree = team_tree()
    member, other = tree.nodes["m1"], tree.nodes["m2"]
    tree.stop("budget_exhausted", under=tree.nodes["team"], cancel=False)  # marked: they go on for now
    assert {n.session_id: tree.why(n) for n in tree.nodes.values()} == dict.fromkeys(
        ("team", "m1", "c1", "m2"), "budget_exhausted"
    )
    assert not cancelled(member)
    tree.stop("interrupted", under=member)
    assert tree.why(member) == tree.why(tree.nodes["c1"]) == "interrupted" and tree.why(other) == "budget_exhausted"
    assert cancelled(member) and cancelled(tree.nodes["c1"]) and not cancelled(other)
    late = tree.add("c2", kind="child", under=member)
    assert tree.why(late) == "interrupted"
    assert tree.why(RunTree().add("alone")) == "cancelled"  # nothing stopped it: a parent's stop
    with member.scope:  # its run, cancelled before it began, ends at once
        await anyio.sleep(5)
        pytest.fail("the cancelled scope did not stop the run")
