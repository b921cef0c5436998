"""One event union: what an agent emits is what the log stores, what stream-json maps, what replay
reads back and what the tree draws, and logs written before the union still load."""

from __future__ import annotations

import io
import json
import shutil
import typing
from pathlib import Path

import pytest

from zero.agent import (
    COMPACTED_PREFIX,
    AssistantText,
    BudgetTripped,
    ChildFinished,
    ChildStarted,
    Compacted,
    ErrorRaised,
    Event,
    LandChanged,
    Message,
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
    StatusChanged,
    TeamFinished,
    TeamMember,
    TeamMessageSent,
    TeamStarted,
    ToolCall,
    ToolCallStarted,
    ToolFinished,
    Usage,
    UsageUpdated,
    WarningRaised,
    decode_event,
    event_payload,
)
from zero.cli.streamjson import StreamJsonWriter
from zero.orchestrator.live import tree_from_store
from zero.orchestrator.view import TeamTree, TreeNode
from zero.sessions import (
    FileSessionStore,
    MemorySessionStore,
    SessionMetadata,
    SessionRecorder,
    SessionStore,
    messages_from_events,
    session_tree,
)

FIXTURE = Path(__file__).parent / "fixtures" / "v1" / "sessions"
T, M, C = "team_1", "member_1", "child_1"


def every_kind() -> dict[str, list[Event]]:
    """A team run that holds one event of every kind, by the session whose log holds it."""
    usage = Usage(prompt_tokens=300, completion_tokens=20, cached_tokens=0, cost_usd=0.0002, calls=1)
    call = ToolCall(id="call_1", name="Task", arguments={"name": "explorer", "prompt": "Map src."})
    return {
        T: [
            TeamStarted(
                session_id=T,
                team="demo",
                goal="Find it.",
                file="team.toml",
                budget={"tokens": 10_000},
                members=(TeamMember(name="mapper", session_id=M, specialist="worker", model="gpt-4.1-mini"),),
                cwd="/repo",
                provider="openai",
                model="gpt-4.1-mini",
            ),
            ChildStarted(
                session_id=T,
                child_session_id=M,
                specialist="worker",
                agent_name="mapper",
                member="mapper",
                mode="member",
            ),
            TeamMessageSent(session_id=T, id=1, sender="mapper", to="all", body="hello"),
            BudgetTripped(session_id=T, limit="tokens", used=9_000, allowed=10_000, requested=2_000, message="tokens"),
            LandChanged(
                session_id=T,
                member="mapper",
                state="conflict",
                branch="zero/1/mapper",
                files=2,
                added=12,
                removed=3,
                conflicts=("src/a.py",),
            ),
            ChildFinished(
                session_id=T,
                child_session_id=M,
                member="mapper",
                status="completed",
                usage=usage + usage,
                duration_ms=9,
            ),
            TeamFinished(session_id=T, status="completed", duration_ms=10, usage=usage + usage),
        ],
        M: [
            RunStarted(session_id=M, provider="openai", model="gpt-4.1-mini", cwd="/repo"),
            MessageAdded(session_id=M, role="system", content="You map code."),
            MessageAdded(session_id=M, role="user", content="Map the repo."),
            Reasoning(session_id=M, delta="I should delegate."),
            ModelStreaming(session_id=M, received=18),
            AssistantText(session_id=M, delta="Delegating."),
            MessageAdded(session_id=M, role="assistant", content="Delegating.", tool_calls=(call,)),
            UsageUpdated.of(M, "gpt-4.1-mini", usage),
            ToolCallStarted(session_id=M, id="call_1", name="Task", arguments=call.arguments),
            PermissionRequested(
                session_id=M, id="call_1", name="Task", side_effect="read", permission_mode="ask", reason="why"
            ),
            PermissionDecided(session_id=M, id="call_1", name="Task", granted=True, reason="approved"),
            ChildStarted(
                session_id=M, child_session_id=C, specialist="explorer", agent_name="explorer", tool_call_id="call_1"
            ),
            ChildFinished(session_id=M, child_session_id=C, specialist="explorer", status="failed", usage=usage),
            ToolFinished(session_id=M, tool_call_id="call_1", name="Task", status="error", output="child failed"),
            RetryScheduled(session_id=M, attempt=1, delay_seconds=0.5, code="overloaded", message="529"),
            RateLimitWait(session_id=M, reason="rate limit: requests per minute", wait_seconds=1.5),
            Paused(session_id=M, paused=True),
            Paused(session_id=M, paused=False),
            WarningRaised(session_id=M, code="output_capped", message="cut at 20 tokens"),
            Compacted(session_id=M, summary="We read README.md; the answer is 42.", replaced=6),
            MessageAdded(session_id=M, role="assistant", content="Mapped."),
            UsageUpdated.of(
                M,
                "gpt-4.1-mini",
                Usage(prompt_tokens=400, completion_tokens=10, cached_tokens=100, cost_usd=None, calls=1),
            ),
            RunFinished(session_id=M, status="completed", turns=2, duration_ms=8, usage=usage, output="Mapped."),
        ],
        C: [
            RunStarted(session_id=C, provider="openai", model="gpt-4.1-mini", cwd="/repo"),
            MessageAdded(session_id=C, role="system", content="You explore."),
            MessageAdded(session_id=C, role="user", content="Map src."),
            UsageUpdated.of(C, "gpt-4.1-mini", usage),
            ErrorRaised(session_id=C, code="auth_error", message="bad key"),
            RunFinished(session_id=C, status="failed", turns=1, usage=usage),
        ],
        "skipped_1": [StatusChanged(session_id="skipped_1", status="skipped", reason="dependency 'x' ended failed")],
    }


def emitted() -> list[Event]:
    """The events in the order a run emits them: a child's own events between its start and end."""
    logs = every_kind()
    team, member = logs[T], logs[M]
    return [
        *team[:2],
        *member[:12],
        *logs[C],
        *member[12:],
        *team[2:],
        *logs["skipped_1"],
    ]


def write(store: SessionStore, logs: dict[str, list[Event]]) -> None:
    """As a run writes them: each session's recorder takes every event, as it is emitted."""
    recorders = []
    for sid in logs:
        kind = {T: "team", M: "member", C: "child"}.get(sid, "member")
        parent = {M: T, C: M, "skipped_1": T}.get(sid, "")
        store.create(SessionMetadata(session_id=sid, session_kind=kind, parent_session_id=parent, root_session_id=T))
        recorders.append(SessionRecorder(store, sid))
    for event in emitted():
        for recorder in recorders:
            recorder(event)
    store.flush()


def test_the_samples_cover_every_kind_of_event() -> None:
    kinds = {cls.__dataclass_fields__["kind"].default for cls in typing.get_args(Event)}
    sampled = {e.kind for events in every_kind().values() for e in events}
    assert sampled == kinds, f"add a sample of {kinds - sampled} here and wherever events are mapped"


@pytest.mark.parametrize("store_kind", ["file", "memory"])
def test_every_kind_round_trips_through_the_log(tmp_path: Path, store_kind: str) -> None:
    store: SessionStore = FileSessionStore(tmp_path / "sessions") if store_kind == "file" else MemorySessionStore()
    logs = every_kind()
    write(store, logs)
    for sid, events in logs.items():
        stored = [e for e in events if e.kind not in ("text", "reasoning")]  # deltas are shown, not stored
        assert [s.event for s in store.events(sid)] == stored
        assert [s.sequence for s in store.events(sid)] == list(range(1, len(stored) + 1))
    if isinstance(store, FileSessionStore):  # on disk every key is camelCase, as upstream's (and old) logs are
        keys: set[str] = set()

        def collect(value: object) -> None:
            if isinstance(value, dict):
                keys.update(value)
                for item in value.values():
                    collect(item)
            elif isinstance(value, list):
                for item in value:
                    collect(item)

        for sid in logs:
            collect([json.loads(line) for line in (store.path(sid) / "events.jsonl").read_text().splitlines()])
        assert {"toolCallId", "childSessionId", "promptTokens", "durationMs", "from"} <= keys
        assert not [k for k in keys if "_" in k]
    for events in logs.values():  # deltas have a record shape too, for whoever writes them
        for event in events:
            assert decode_event(event.kind, event.session_id, json.loads(json.dumps(event_payload(event)))) == event
    # the metadata is the log's summary: status, own usage and the children's, all from the events
    member = store.metadata(M)
    assert member.status == "completed" and member.usage.calls == 2 and member.usage.unpriced
    assert member.children_usage.total_tokens == 320
    assert store.metadata(T).children_usage.total_tokens == 640 and store.metadata("skipped_1").status == "skipped"


def test_stream_json_replay_and_the_tree_agree_with_what_was_emitted(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path / "sessions")
    write(store, every_kind())
    live = emitted()
    # stream-json: every stored event maps the same whether it comes live or from the log
    from_log = [s.event for sid in (T, M, C, "skipped_1") for s in store.events(sid)]

    def stream(events: list[Event]) -> list[dict[str, object]]:
        out = io.StringIO()
        writer = StreamJsonWriter(out, "run_1", T)
        for event in events:
            writer.write(event)
        return [{k: v for k, v in json.loads(line).items() if k != "runId"} for line in out.getvalue().splitlines()]

    shown = stream([e for e in live if e.kind not in ("text", "reasoning")])
    assert sorted(map(json.dumps, shown)) == sorted(map(json.dumps, stream(from_log)))
    by_type = {line["type"]: line for line in stream(live)}
    assert by_type["run_start"] == {
        "schemaVersion": 2,
        "type": "run_start",
        "sessionId": T,
        "cwd": "/repo",
        "provider": "openai",
        "model": "gpt-4.1-mini",
        "apiModel": "gpt-4.1-mini",
    }
    assert by_type["tool_call"]["args"] == {"name": "explorer", "prompt": "Map src."}
    assert by_type["subagent_start"]["sessionId"] == C and by_type["subagent_start"]["parentSessionId"] == M
    assert by_type["warning"]["code"] in ("retry", "output_capped", "budget_exhausted")
    assert by_type["run_end"] == {"schemaVersion": 2, "type": "run_end", "status": "success", "exitCode": 0}
    # replay: the conversation the member's log records is the one it had: what came before the
    # compaction is its summary now
    assert messages_from_events(s.event for s in store.events(M)) == [
        Message(role="system", content="You map code."),
        Message(role="user", content=COMPACTED_PREFIX + "We read README.md; the answer is 42."),
        Message(role="assistant", content="Mapped."),
    ]
    # the tree: fed live, and read from disk, shows the same statuses, turns, tokens and cost
    tree = TeamTree(TreeNode(session_id=T, name="demo", kind="team", status="running"))
    for event in live:
        tree.apply(event)
    disk = tree_from_store(store, T)
    for sid in (T, M, C):
        a, b = tree.nodes[sid], disk.nodes[sid]
        assert (a.status, a.turns, a.usage, a.parent) == (b.status, b.turns, b.usage, b.parent), sid
    assert tree.subtree_usage(T) == disk.subtree_usage(T)
    assert [line.text for line in tree.budget(now=0)][:1] == [line.text for line in disk.budget(now=0)][:1]


def test_a_session_file_from_before_the_change_still_loads(tmp_path: Path) -> None:
    home = tmp_path / "sessions"
    shutil.copytree(FIXTURE, home)
    store = FileSessionStore(home)
    metas = {m.session_kind or "root": m for m in store.list()}
    assert sorted(metas) == ["child", "member", "root", "team"]
    for meta in store.list():
        events = store.events(meta.session_id)
        assert len(events) == meta.event_count and events[-1].event.kind == meta.last_event_type
    root = metas["root"]
    history = messages_from_events(s.event for s in store.events(root.session_id))
    assert [m.role for m in history] == ["system", "user", "assistant", "tool", "tool", "tool", "assistant"]
    assert history[-1].content == "The answer is 42."
    kinds = {s.event.kind for meta in store.list() for s in store.events(meta.session_id)}
    assert kinds >= {"permission_request", "retry", "error", "child_start", "child_end", "team_start", "team_message"}
    tree = tree_from_store(store, metas["team"].session_id)
    assert sorted((n.name, n.status) for n in tree.nodes.values()) == [
        ("chat", "failed"),
        ("reader", "failed"),
        ("writer", "completed"),
    ]
    team = metas["team"]
    logged = team.usage.to_usage() + team.children_usage.to_usage()
    assert tree.subtree_usage(tree.root_id).total_tokens == logged.total_tokens == 876
    assert session_tree(store, team.session_id).subtree_usage.total_tokens == 876
