"""The sessions an editor gets over ACP: what ``session/list`` offers (and where), how a session is titled,
and what loading or resuming one that never ran, or one whose files are damaged, gives."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from acp import text_block
from support.acp import Editor, agent, refused
from support.cli import write_script, zero

from zero.agent import MessageAdded, StatusChanged
from zero.sessions import FileSessionStore

pytestmark = pytest.mark.anyio

SCRIPT = """
[[turns]]
match = { last = "Read the README" }
tool_calls = [{ name = "read_file", arguments = { path = "README.md" } }]
[[turns]]
match = { last = "The answer is 42" }
text = "It says 42."
[[turns]]
match = { last = "And now?" }
text = "Still here."
times = 0
[[turns]]
match = { last = "to fix the login" }
text = "On it."
"""
SECRET = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
TITLE = "Use [REDACTED] to fix the login and tell me when it is done"  # the prompt's words, redacted


def store() -> FileSessionStore:
    return FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")


async def test_a_session_never_prompted_is_pending_and_loads_and_resumes_empty(workspace: Path, tmp_path: Path) -> None:
    """It used to be listed, then refused by load and resume after a restart ("has no conversation to
    resume"), and read as ``interrupted``."""
    script = write_script(tmp_path / "s.toml", SCRIPT)
    async with agent(Editor(), script) as conn:
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        other = (await conn.new_session(cwd=str(workspace))).session_id
    assert store().metadata(sid).status == "pending"  # read after its process ended: never ran, not interrupted
    assert json.loads((store().path(sid) / "metadata.json").read_text())["status"] == "pending"
    editor = Editor()
    async with agent(editor, script) as conn:
        listed = await conn.list_sessions(cwd=str(workspace))
        assert sorted((s.session_id, s.title) for s in listed.sessions) == sorted([(sid, None), (other, None)])
        await conn.load_session(cwd=str(workspace), session_id=sid)
        assert editor.updates == []  # an empty conversation: nothing to replay
        await conn.resume_session(cwd=str(workspace), session_id=sid)
        done = await conn.prompt(session_id=sid, prompt=[text_block("Read the README")])
        assert done.stop_reason == "end_turn"
        await conn.resume_session(cwd=str(workspace), session_id=other)  # resumed without a load first
        assert (await conn.prompt(session_id=other, prompt=[text_block("And now?")])).stop_reason == "end_turn"
    first, _, system = (e.event for e in store().events(sid)[:3])
    assert isinstance(first, StatusChanged) and (first.status, first.reason) == ("pending", "closed before it ever ran")
    assert isinstance(system, MessageAdded) and system.role == "system"  # the system prompt, recorded once
    assert "You are Zero" in system.content
    assert [store().metadata(s).status for s in (sid, other)] == ["completed", "completed"]


async def test_loading_a_session_this_connection_holds_shows_it_again(workspace: Path, tmp_path: Path) -> None:
    """It was refused ("is open already"): the editor asked to see it again, and may go on with it."""
    script = write_script(tmp_path / "s.toml", SCRIPT)
    editor = Editor()
    async with agent(editor, script) as conn:
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        assert (await conn.prompt(session_id=sid, prompt=[text_block("Read the README")])).stop_reason == "end_turn"
        editor.updates.clear()
        await conn.load_session(cwd=str(workspace), session_id=sid)
        shown = [u.session_update for _, u in editor.updates]
        assert shown == ["user_message_chunk", "tool_call", "agent_message_chunk"]  # the conversation, replayed
        await conn.resume_session(cwd=str(workspace), session_id=sid)  # (acknowledged)
        assert (await conn.prompt(session_id=sid, prompt=[text_block("And now?")])).stop_reason == "end_turn"
    assert store().metadata(sid).status == "completed"
    assert [m.content for m in (e.event for e in store().events(sid)) if isinstance(m, MessageAdded)][-2:] == [
        "And now?",
        "Still here.",
    ]


async def test_a_session_is_titled_by_its_first_prompt(workspace: Path, tmp_path: Path) -> None:
    """Every session used to be titled "ACP session"; the title is stored redacted, as the prompt is."""
    script = write_script(tmp_path / "s.toml", SCRIPT)
    editor = Editor()
    async with agent(editor, script) as conn:
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        prompt = f"\n  Use {SECRET} to fix the login  \nand tell me when it is done"
        await conn.prompt(session_id=sid, prompt=[text_block(prompt)])
        await conn.prompt(session_id=sid, prompt=[text_block("And now?")])  # the first prompt's title stays
        titles = [u.title for _, u in editor.updates if u.session_update == "session_info_update"]
        assert titles == [TITLE]
        listed = await conn.list_sessions(cwd=str(workspace))
        assert [s.title for s in listed.sessions] == [TITLE]
    assert store().metadata(sid).title == TITLE
    assert SECRET not in (store().path(sid) / "metadata.json").read_text()
    listed_by_cli = zero("sessions", "list")
    assert TITLE in listed_by_cli.stdout


async def test_a_list_without_cwd_shows_only_the_workspaces_this_client_opened(workspace: Path, tmp_path: Path) -> None:
    """It used to list every workspace's sessions, whatever the client had opened."""
    script = write_script(tmp_path / "s.toml", SCRIPT)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    async with agent(Editor(), script) as conn:
        here = (await conn.new_session(cwd=str(workspace))).session_id
        there = (await conn.new_session(cwd=str(elsewhere))).session_id
        both = {s.session_id for s in (await conn.list_sessions()).sessions}
        assert both == {here, there}  # this client opened both workspaces
    async with agent(Editor(), script) as conn:
        assert (await conn.list_sessions()).sessions == []  # none opened yet: none listed
        assert [s.session_id for s in (await conn.list_sessions(cwd=str(elsewhere))).sessions] == [there]
        assert (await conn.list_sessions()).sessions == []  # listing a workspace does not open it
        new = (await conn.new_session(cwd=str(workspace))).session_id
        assert {s.session_id for s in (await conn.list_sessions()).sessions} == {here, new}


async def test_a_damaged_session_gets_one_error_everywhere_and_is_not_listed(workspace: Path, tmp_path: Path) -> None:
    """A damaged log used to get three answers (load "Resource not found", resume "not found" or "cannot be
    read") and stay listed."""
    script = write_script(tmp_path / "s.toml", SCRIPT)
    async with agent(Editor(), script) as conn:
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("Read the README")])
        kept = (await conn.new_session(cwd=str(workspace))).session_id
    folder = store().path(sid)
    log, meta = folder / "events.jsonl", folder / "metadata.json"
    history, metadata = log.read_text(), meta.read_text()
    lines = history.splitlines()
    damages = {
        "a bad line": (log, "\n".join([lines[0], "[1, 2]", *lines[2:]]) + "\n", "line 2 is not a valid event"),
        "a log cut short": (
            log,
            lines[0] + "\n",
            f"holds only 1 event where the session's metadata counts {len(lines)}",
        ),
        "an emptied log": (log, "", f"holds no events where the session's metadata counts {len(lines)}"),
        "damaged metadata": (meta, "{not json", "metadata.json is damaged"),
    }
    async with agent(Editor(), script) as conn:
        for damage, (path, text, why) in damages.items():
            path.write_text(text)
            answers = {
                await refused(method(cwd=str(workspace), session_id=sid))
                for method in (conn.load_session, conn.resume_session, conn.fork_session)
            }
            assert len(answers) == 1, (damage, answers)  # the same error from each
            answer = answers.pop()
            assert answer.startswith(f"session {sid} is damaged and cannot be loaded or resumed: "), (damage, answer)
            assert why in answer and f"(zero sessions show {sid} says more)" in answer, (damage, answer)
            assert "'status': 'damaged'" in answer
            listed = [s.session_id for s in (await conn.list_sessions(cwd=str(workspace))).sessions]
            assert listed == [kept], damage  # not offered: it could not be taken
            log.write_text(history)
            meta.write_text(metadata)
        listed = [s.session_id for s in (await conn.list_sessions(cwd=str(workspace))).sessions]
        assert listed == [kept, sid]  # mended, it is offered again, and loads
        await conn.load_session(cwd=str(workspace), session_id=sid)
