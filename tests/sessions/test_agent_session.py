"""AgentSession: the one object that runs an agent, on any store: open new, resume, fork, send, cancel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from support.mounts import fill, tmpfs

from zero.agent import (
    Compacted,
    Event,
    MessageAdded,
    ScriptedProvider,
    ScriptMatch,
    ScriptToolCall,
    ScriptTurn,
    StatusChanged,
    WarningRaised,
)
from zero.errors import SessionWriteError, UsageError
from zero.sessions import (
    AgentSession,
    FileSessionStore,
    MemorySessionStore,
    SessionMetadata,
    SessionStore,
    fork_session,
    messages_from_events,
    subtree_usage,
)
from zero.specialists import AgentContext, SpecialistRegistry, open_agent, resume_agent
from zero.tools import Workspace

pytestmark = pytest.mark.anyio


def context(workspace: Path, store: SessionStore, turns: list[ScriptTurn]) -> AgentContext:
    provider = ScriptedProvider(turns)
    return AgentContext(
        store=store,
        registry=SpecialistRegistry.load(workspace),
        workspace=Workspace([workspace]),
        provider=provider,
        model="scripted",
        providers=lambda name: provider,
    )


def said(last: str, text: str, *calls: ScriptToolCall) -> ScriptTurn:
    return ScriptTurn(match=ScriptMatch(last=last), text=text, tool_calls=list(calls))


async def test_a_session_in_memory_runs_delegates_and_resumes(workspace: Path) -> None:
    """Embedding Zero with nothing on disk: the memory store keeps the same rules as the file store."""
    store = MemorySessionStore()
    ctx = context(
        workspace,
        store,
        [
            said(
                "What is the answer?",
                "Asking.",
                ScriptToolCall(name="Task", arguments={"name": "explorer", "prompt": "Find it."}),
            ),
            said("Find it.", "It is 42."),
            said("It is 42.", "The answer is 42."),
            said("And doubled?", "84."),
        ],
    )
    session = await open_agent(ctx, title="answer", system_prompt="You are Zero.", permission_mode="auto", max_turns=5)
    seen: list[Event] = []
    async with anyio.create_task_group() as tg:

        async def read(events: Any) -> None:
            async with events:
                async for event in events:
                    seen.append(event)

        tg.start_soon(read, session.events())
        async with session:
            result = await session.send("What is the answer?")
    assert result.status == "completed" and result.output == "The answer is 42."
    assert {e.session_id for e in seen} == {
        session.session_id,
        next(e.child_session_id for e in seen if e.kind == "child_start"),
    }
    meta = store.metadata(session.session_id)
    assert meta.status == "completed" and meta.children_usage.calls == 1 and meta.usage.calls == 2
    assert session.run_usage.total_tokens == (meta.usage.to_usage() + meta.children_usage.to_usage()).total_tokens
    assert session.run_usage == subtree_usage(store, session.session_id)
    # resumed: a second run on the same session sees the whole history
    again = await resume_agent(ctx, session.session_id, permission_mode="auto", max_turns=5)
    async with again:
        assert (await again.send("And doubled?")).output == "84."
    provider = ctx.provider
    assert isinstance(provider, ScriptedProvider)
    history = [m.content for m in provider.calls[-1].messages if m.role in ("user", "assistant")]
    assert history == ["What is the answer?", "Asking.", "The answer is 42.", "And doubled?"]
    assert [e.event.kind for e in store.events(session.session_id)].count("run_start") == 2


async def test_a_session_stopped_before_its_first_message_resumes_from_its_system_prompt(workspace: Path) -> None:
    """Its node died before it wrote a message (the driver recorded it ``interrupted``): resumed, it starts as
    a new one would, not "no conversation to resume"."""
    store = MemorySessionStore()
    ctx = context(workspace, store, [said("Do the task.", "Done.")])
    session = await open_agent(ctx, title="t", system_prompt="You are Zero.", permission_mode="auto", max_turns=3)
    async with session:
        pass  # closed before it ran: pending
    store.submit(session.session_id, [StatusChanged(session_id=session.session_id, status="interrupted")])
    again = await resume_agent(ctx, session.session_id, permission_mode="auto", max_turns=3)
    async with again:
        assert (await again.send("Do the task.")).output == "Done."
    history = messages_from_events(e.event for e in store.events(session.session_id))
    assert [(m.role, m.content) for m in history] == [
        ("system", history[0].content),  # (its agent's own prompt: the first run records it)
        ("user", "Do the task."),
        ("assistant", "Done."),
    ]


async def test_fork_at_an_event_keeps_the_history_up_to_it(workspace: Path) -> None:
    store = MemorySessionStore()
    ctx = context(workspace, store, [said("one", "first"), said("two", "second"), said("other", "forked")])
    session = await open_agent(ctx, title="t", system_prompt="sys", permission_mode="auto", max_turns=3)
    async with session:
        await session.send("one")
        await session.send("two")
    first_answer = next(
        e.sequence for e in store.events(session.session_id) if e.event.kind == "message" and e.event.content == "first"
    )
    fork = await AgentSession.fork(store, session.session_id, session.agent.config, at_sequence=first_answer)
    async with fork:
        assert (await fork.send("other")).output == "forked"
    meta = store.metadata(fork.session_id)
    assert meta.session_kind == "fork" and meta.forked_from == session.session_id
    assert meta.forked_at_sequence == first_answer and meta.usage.calls == 1  # its own spending only
    history = messages_from_events(e.event for e in store.events(fork.session_id))
    assert [m.content for m in history][1:] == ["one", "first", "other", "forked"]
    assert history[0].role == "system" and history[0].content.startswith("sys")
    with pytest.raises(UsageError, match="has no event 999"):
        await AgentSession.fork(store, session.session_id, session.agent.config, at_sequence=999)


async def test_cancel_ends_the_run_with_the_status_given_even_before_it_started(workspace: Path) -> None:
    store = MemorySessionStore()
    slow = ScriptTurn(text="thinking", delay=30, times=0)
    ctx = context(workspace, store, [slow])
    session = await open_agent(ctx, title="t", system_prompt="sys", permission_mode="auto", max_turns=3)
    session.cancel("interrupted")  # Ctrl-C before the run began
    async with session:
        result = await session.send("go")
        assert result.status == "interrupted"
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.send, "again")
            await anyio.sleep(0.05)
            session.cancel()  # a parent's stop
        assert session.result is not None and session.result.status == "cancelled"
    assert [e.event.status for e in store.events(session.session_id) if e.event.kind == "run_end"] == [
        "interrupted",
        "cancelled",
    ]


async def test_a_session_whose_writes_stopped_makes_no_more_model_calls(workspace: Path, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "256k") as disk:
        store = FileSessionStore(disk / "sessions")
        ctx = context(workspace, store, [said("go on", "never asked for")])
        session = await open_agent(ctx, title="t", system_prompt="You are Zero.", permission_mode="auto", max_turns=5)
        fill(disk, leave=0)
        store.submit(session.session_id, [WarningRaised(session_id=session.session_id, code="x", message="x" * 9000)])
        with pytest.raises(SessionWriteError):
            store.written(session.session_id)
        async with session:
            result = await session.send("go on")
        assert result.status == "failed" and result.error_code == "session_write_error"
        assert result.error is not None and result.error.startswith("cannot write the session: disk full (")
        provider = ctx.provider
        assert isinstance(provider, ScriptedProvider) and provider.calls == []


def test_a_fork_of_a_compacted_session_keeps_its_summary_and_a_team_is_not_forked() -> None:
    """The fork copied messages and tools but not the compaction: what it said it held (the summary) and what
    it wrote (the whole old conversation, which a resume sent again) disagreed. Forking a team said "no
    conversation up to event None"."""
    store = MemorySessionStore()
    sid = "zero_20261206000000_00000000000a"
    store.create(SessionMetadata(session_id=sid, root_session_id=sid, created_at="2020-01-01T00:00:00.000Z"))
    long = "word " * 3000
    store.append(
        sid,
        [
            MessageAdded(session_id=sid, role="system", content="sys"),
            MessageAdded(session_id=sid, role="user", content="read big"),
            MessageAdded(session_id=sid, role="assistant", content=long),
            Compacted(session_id=sid, summary="It read a big file.", replaced=2),
            MessageAdded(session_id=sid, role="user", content="go on"),
        ],
    )
    meta, history = fork_session(store, sid)
    assert meta.created_at > "2026"  # made now, not when its origin was
    forked = messages_from_events(e.event for e in store.events(meta.session_id))
    assert [m.content for m in forked] == [m.content for m in history]
    assert long not in [m.content for m in forked] and "go on" in forked[-1].content
    team = "team_20261206000000_00000000000b"
    store.create(SessionMetadata(session_id=team, session_kind="team", root_session_id=team))
    with pytest.raises(UsageError, match="is a team run, which has no conversation of its own: fork one of its"):
        fork_session(store, team)
