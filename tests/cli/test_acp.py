"""``zero acp`` as an editor drives it: a subprocess on stdio, the ``acp`` SDK's client on the other end,
and the wire itself where its keys are the contract."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, text_block
from acp.schema import McpServerStdio
from support.acp import Editor, agent, refused
from support.cli import TASK_IN_A_WORKTREE, ZERO, write_script
from support.git import hermetic_git, make_repo

from zero.sessions import FileSessionStore, short_id

pytestmark = pytest.mark.anyio

SCRIPT = """
[[turns]]
match = { user = "Read and delegate", turn = 1 }
text = "Reading first."
tool_calls = [{ name = "read_file", arguments = { path = "README.md" } }]
[[turns]]
match = { user = "Read and delegate", turn = 2 }
tool_calls = [{ name = "Task", arguments = { name = "explorer", description = "find todo", prompt = "Find TODOs." } }]
[[turns]]
match = { system = "You are the explorer", turn = 1 }
tool_calls = [{ name = "grep", arguments = { pattern = "TODO" } }]
[[turns]]
match = { system = "You are the explorer", turn = 2 }
text = "One TODO in src/app.py."
[[turns]]
match = { user = "Read and delegate", turn = 3 }
text = "Done: the README says 42 and there is one TODO."

[[turns]]
match = { last = "Write two files" }
tool_calls = [{ name = "write_file", arguments = { path = "yes.txt", content = "yes" } }]
[[turns]]
match = { last = "yes.txt" }
tool_calls = [{ name = "write_file", arguments = { path = "no.txt", content = "no" } }]
[[turns]]
match = { last = "refused write_file" }
text = "Wrote one."
[[turns]]
match = { last = "not allowed in read-only mode" }
text = "I may not write here."

[[turns]]
match = { last = "Wait a long time" }
delay = 30
text = "never"

[[turns]]
match = { last = "And now?" }
text = "Still here."

[[turns]]
match = { last = "Echo through the editor's server" }
tool_calls = [{ name = "mcp__demo__echo", arguments = { text = "acp" } }]
[[turns]]
match = { last = "echo: acp" }
text = "Echoed."
"""
DEMO = str(Path(__file__).parents[1] / "mcpdemo" / "server.py")


async def test_an_editor_session(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.toml", SCRIPT)
    editor = Editor(answers=["allow_once", "reject_once", "allow_once"])
    async with agent(editor, script, "--permission-mode", "ask") as conn:
        demo = McpServerStdio(name="demo", command=sys.executable, args=[DEMO, "stdio"], env=[])
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[demo])
        sid = new.session_id
        assert new.modes.current_mode_id == "ask" and [m.id for m in new.modes.available_modes] == ["read-only", "ask"]
        done = await conn.prompt(session_id=sid, prompt=[text_block("Read and delegate")])
        assert done.stop_reason == "end_turn"
        kinds = editor.kinds()
        # in the order they happened: text, the title its first prompt gave it, the read, the Task (with the
        # child's progress), the answer
        assert kinds[:2] == ["session_info_update", "agent_message_chunk"] and kinds[-1] == "agent_message_chunk"
        assert editor.updates[0][1].title == "Read and delegate"
        calls = [u for _, u in editor.updates if u.session_update == "tool_call"]
        assert [c.kind for c in calls] == ["read", "think"]
        task = calls[1].tool_call_id
        # a call that asks no one runs at once: in progress from the start
        assert editor.of_call(calls[0].tool_call_id) == ["tool_call:in_progress", "tool_call_update:completed"]
        progress = [
            u.content[0].content.text for _, u in editor.updates if u.session_update == "tool_call_update"
            and u.tool_call_id == task and u.content
        ]  # fmt: skip
        assert progress[0].startswith("explorer started") and any("explorer: grep" in p for p in progress)
        assert any(p.startswith("explorer completed") and "tokens" in p and "session child_" in p for p in progress)
        assert progress[-1].startswith("session_id: child_")  # and the call's result: the child's report
        # a permission request answered both ways; the edit shown as a diff
        done = await conn.prompt(session_id=sid, prompt=[text_block("Write two files")])
        assert done.stop_reason == "end_turn"
        assert (workspace / "yes.txt").read_text() == "yes" and not (workspace / "no.txt").exists()
        assert len(editor.asked) == 2 and editor.asked[0].content[0].type == "diff"
        # the MCP server the editor sent with the session: its tool, asked for like network use
        done = await conn.prompt(session_id=sid, prompt=[text_block("Echo through the editor's server")])
        assert done.stop_reason == "end_turn" and len(editor.asked) == 3
        texts = [u.content.text for _, u in editor.updates if u.session_update == "agent_message_chunk"]
        assert texts[-1] == "Echoed."
        # cancel: the turn ends cancelled
        stopped: list[Any] = []

        async def wait_long() -> None:
            stopped.append(await conn.prompt(session_id=sid, prompt=[text_block("Wait a long time")]))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_long)
                await anyio.sleep(0.5)
                await conn.cancel(session_id=sid)
        assert stopped[0].stop_reason == "cancelled"
        # the mode never goes above the ceiling the server started with
        assert "above the ceiling" in await refused(conn.set_session_mode(session_id=sid, mode_id="auto"))
    store = FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")
    decisions = [e.event for e in store.events(sid) if e.event.kind == "permission_decision"]
    assert [d.granted for d in decisions] == [True, False, True]  # recorded in the session


async def test_list_load_and_resume_guard_the_workspace(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.toml", SCRIPT)
    editor = Editor()
    async with agent(editor, script) as conn:
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("Read and delegate")])
        await conn.close_session(session_id=sid)
    store = FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")
    alias = tmp_path / "alias"
    alias.symlink_to(workspace)
    other = tmp_path / "other"
    other.mkdir()
    editor = Editor()
    async with agent(editor, script) as conn:
        listed = await conn.list_sessions(cwd=str(alias))  # another spelling of the same folder
        assert [s.session_id for s in listed.sessions] == [sid] and listed.sessions[0].cwd == str(workspace)
        assert (await conn.list_sessions(cwd=str(other))).sessions == []
        for blank in ("", "   ", "."):  # before "not found": no id is confirmed to exist (nor rebased on ".")
            for method in (conn.load_session, conn.resume_session):
                why = await refused(method(cwd=blank, session_id="zero_20990101000000_000000000000"))
                assert "cwd" in why and "not found" not in why
        assert "belongs to the workspace" in await refused(conn.load_session(cwd=str(other), session_id=sid))
        await conn.load_session(cwd=str(alias), session_id=sid)  # accepted through the alias
        replayed = editor.kinds()
        assert replayed[0] == "user_message_chunk" and replayed.count("tool_call") == 2
        results = [u for _, u in editor.updates if u.session_update == "tool_call"]
        assert results[0].status == "completed" and "The answer is 42" in results[0].content[0].content.text
        answer = await conn.prompt(session_id=sid, prompt=[text_block("And now?")])
        assert answer.stop_reason == "end_turn"
        # a second client cannot take the session while this one holds it: turns never interleave
        other_editor = Editor()
        async with agent(other_editor, script) as second:
            why = await refused(second.resume_session(cwd=str(workspace), session_id=sid))
            assert "another process" in why
    # one more editor: a stored workspace that is relative, or gone, is neither listed nor resumed (a damaged
    # history: test_acp_sessions); a workspace stored through the alias and asked for by its real path is the
    # same folder, by file-system identity
    meta = store.path(sid) / "metadata.json"
    original = meta.read_text()
    async with agent(Editor(), script) as conn:
        for stored in (".", str(tmp_path / "gone")):
            meta.write_text(original.replace(json.dumps(str(workspace)), json.dumps(stored)))
            assert (await conn.list_sessions(cwd=str(workspace))).sessions == []
            for method in (conn.load_session, conn.resume_session):
                why = await refused(method(cwd=str(workspace), session_id=sid))
                assert "relative path" in why or "no longer exists" in why
        meta.write_text(original.replace(json.dumps(str(workspace)), json.dumps(str(alias))))
        assert [s.session_id for s in (await conn.list_sessions(cwd=str(workspace))).sessions] == [sid]
        await conn.resume_session(cwd=str(workspace), session_id=sid)
    meta.write_text(original)
    shutil.rmtree(alias, ignore_errors=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_the_wire_keys_are_the_contract(workspace: Path, tmp_path: Path) -> None:
    """Raw JSON-RPC lines, as an editor other than the SDK's sends and reads them: renaming a key fails here."""
    import subprocess

    script = write_script(
        tmp_path / "s.toml", SCRIPT + '[[turns]]\nmatch = { last = "Fail" }\nerror = { kind = "auth" }\n'
    )
    proc = subprocess.Popen(
        [ZERO, "acp", "--provider", "scripted", "--script", str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    seen: list[dict[str, Any]] = []

    def call(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and read until its answer, as an editor waits for each (notifications kept)."""
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}) + "\n")
        proc.stdin.flush()
        while True:
            message = json.loads(proc.stdout.readline())
            seen.append(message)
            if message.get("id") == request_id and "method" not in message:
                return dict(message)

    init = call(1, "initialize", {"protocolVersion": 1})["result"]
    new = call(2, "session/new", {"cwd": str(workspace), "mcpServers": []})["result"]
    prompt = [{"type": "text", "text": "And now?"}]
    done = call(3, "session/prompt", {"sessionId": new["sessionId"], "prompt": prompt})["result"]
    listed = call(4, "session/list", {"cwd": str(workspace)})["result"]
    failed = call(5, "session/prompt", {"sessionId": new["sessionId"], "prompt": [{"type": "text", "text": "Fail"}]})
    proc.stdin.close()
    proc.wait(timeout=10)
    proc.stdout.close()
    assert init["protocolVersion"] == 1 and init["agentInfo"]["name"] == "zero"
    capabilities = init["agentCapabilities"]
    assert capabilities["loadSession"] is True and capabilities["promptCapabilities"]["embeddedContext"] is True
    assert {"list", "resume"} <= set(capabilities["sessionCapabilities"])
    assert None not in capabilities["sessionCapabilities"].values()  # unset capabilities are left out, not null
    assert new["sessionId"].startswith("zero_") and new["modes"]["currentModeId"] == "auto"
    assert done == {"stopReason": "end_turn"}
    titled = [
        m["params"] for m in seen if m.get("params", {}).get("update", {}).get("sessionUpdate") == "session_info_update"
    ]
    assert titled == [
        {"sessionId": new["sessionId"], "update": {"sessionUpdate": "session_info_update", "title": "And now?"}}
    ]
    assert set(listed) <= {"sessions", "nextCursor", "_meta"}
    assert set(listed["sessions"][0]) >= {"sessionId", "cwd", "title", "updatedAt"}
    assert listed["sessions"][0]["title"] == "And now?"
    assert failed["error"] == {
        "code": -32603,
        "message": "scripted auth error",
        "data": {"sessionId": new["sessionId"], "status": "failed", "code": "auth_error"},
    }


def test_bad_frames_are_answered_and_an_idle_cancel_is_ignored(workspace: Path, tmp_path: Path) -> None:
    """A batch, a line that is not JSON, a message that is not an object: each gets its JSON-RPC error and the
    server goes on, with no traceback; a cancel sent while no turn runs does not cancel the next prompt."""
    import subprocess

    script = write_script(tmp_path / "s.toml", SCRIPT)
    proc = subprocess.Popen(
        [ZERO, "acp", "--provider", "scripted", "--script", str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None

    def send(line: str) -> None:
        assert proc.stdin is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()

    def answer(request_id: Any) -> dict[str, Any]:
        assert proc.stdout is not None
        while True:
            message = json.loads(proc.stdout.readline())
            if message.get("id", "no id") == request_id and "method" not in message:
                return dict(message)

    send(json.dumps([{"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"protocolVersion": 1}}]))
    refused_batch = answer(7)["error"]
    assert refused_batch["code"] == -32600 and "batches are not supported" in refused_batch["message"]
    send("{not json")
    assert answer(None)["error"]["code"] == -32700
    send("42")
    assert answer(None)["error"]["message"] == "Invalid Request: a message is a JSON-RPC object"
    deep = '{"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": ' + '{"a": ' * 1500 + "1" + "}" * 1501
    for nested in ("[" * 1500 + "]" * 1500, deep):  # 3 KB that once ended zero acp ("maximum recursion depth")
        send(nested)
        assert answer(None)["error"] == {"code": -32700, "message": "Parse error: nested too deeply to read"}
    for frame, request_id in (({"jsonrpc": "2.0"}, None), ({"jsonrpc": "2.0", "id": 9}, 9)):
        send(json.dumps(frame))  # neither a request nor an answer: refused, not ignored
        assert answer(request_id)["error"]["code"] == -32600
    send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}))
    assert answer(1)["result"]["protocolVersion"] == 1
    params = {"cwd": str(workspace), "mcpServers": []}
    send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": params}))
    sid = answer(2)["result"]["sessionId"]
    send(json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}))
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "And now?"}]}
    send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt}))
    assert answer(3)["result"]["stopReason"] == "end_turn"  # the cancel before it did not count
    proc.stdin.close()
    proc.wait(timeout=10)
    errors = proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert "Traceback" not in errors, errors


async def test_a_project_that_asks_for_read_only_gets_it_over_acp(workspace: Path, tmp_path: Path) -> None:
    (workspace / ".zero").mkdir()
    (workspace / ".zero" / "config.toml").write_text('permission_mode = "read-only"\n')
    script = write_script(tmp_path / "s.toml", SCRIPT)
    editor = Editor()
    async with agent(editor, script, "--permission-mode", "auto") as conn:
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        assert new.modes.current_mode_id == "read-only"
        assert [m.id for m in new.modes.available_modes] == ["read-only"]
        assert "above the ceiling" in await refused(conn.set_session_mode(session_id=new.session_id, mode_id="auto"))
        await conn.prompt(session_id=new.session_id, prompt=[text_block("Write two files")])
        refused_write = [
            u for _, u in editor.updates if u.session_update == "tool_call_update" and u.status == "failed"
        ]
        assert (
            refused_write[0].content[0].content.text
            == "Permission denied: write_file is not allowed in read-only mode."
        )
        resumed = await conn.resume_session(cwd=str(workspace), session_id=new.session_id)
        assert resumed.modes.current_mode_id == "read-only"
    assert not (workspace / "yes.txt").exists()


async def test_a_permission_request_follows_its_call_which_waits_pending(workspace: Path, tmp_path: Path) -> None:
    """The request used to overtake the ``tool_call`` of its call (2 of 5 runs of one client), and the call
    read ``in_progress`` while it waited: a long answer before the call puts many updates ahead of it."""
    talk = " ".join(f"word{n}" for n in range(3000))
    script = write_script(
        tmp_path / "s.toml",
        f"""
[[turns]]
match = {{ last = "Talk, then write" }}
text = "{talk}"
tool_calls = [{{ name = "write_file", arguments = {{ path = "a.txt", content = "a" }} }}]
[[turns]]
match = {{ last = "a.txt" }}
text = "Wrote it."
""",
    )
    editor = Editor(answers=["allow_once"])
    async with agent(editor, script, "--permission-mode", "ask") as conn:
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        assert (await conn.prompt(session_id=sid, prompt=[text_block("Talk, then write")])).stop_reason == "end_turn"
    call = editor.asked[0].tool_call_id
    assert editor.of_call(call) == [
        "tool_call:pending",
        "ask",
        "tool_call_update:in_progress",  # once allowed
        "tool_call_update:completed",
    ]
    assert editor.asked[0].status == "pending" and (workspace / "a.txt").read_text() == "a"


async def test_a_failed_turn_is_the_prompts_error_and_a_limit_its_stop_reason(workspace: Path, tmp_path: Path) -> None:
    """A failed turn used to end ``end_turn`` with its error written into the answer twice."""
    script = write_script(
        tmp_path / "s.toml",
        """
[[turns]]
match = { last = "Fail" }
text = "Let me see"
error = { kind = "auth" }
[[turns]]
match = { last = "Cut" }
text = "one two three"
finish = "length"
[[turns]]
match = { last = "And now?" }
text = "Still here."
""",
    )
    editor = Editor()
    async with agent(editor, script) as conn:
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        with pytest.raises(RequestError) as failed:
            await conn.prompt(session_id=sid, prompt=[text_block("Fail")])
        assert (failed.value.code, str(failed.value)) == (-32603, "scripted auth error")
        assert failed.value.data == {"sessionId": sid, "status": "failed", "code": "auth_error"}
        texts = [u.content.text for _, u in editor.updates if u.session_update == "agent_message_chunk"]
        assert not any("auth" in t for t in texts)  # the error is the request's, not the answer's
        assert (await conn.prompt(session_id=sid, prompt=[text_block("And now?")])).stop_reason == "end_turn"
        del editor.updates[:]
        capped = await conn.prompt(session_id=sid, prompt=[text_block("Cut")])
        assert capped.stop_reason == "max_tokens"
        texts = [u.content.text for _, u in editor.updates if u.session_update == "agent_message_chunk"]
        notes = [t for t in texts if "output cap" in t]
        assert len(notes) == 1 and notes[0].startswith("\n\n[output_capped] the answer was cut: "), notes
    assert FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions").metadata(sid).status == "output_capped"


async def test_a_task_child_in_a_worktree_shows_its_branch_and_diff_stat_when_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hermetic_git(tmp_path, monkeypatch)
    repo = make_repo(tmp_path / "repo")
    script = write_script(tmp_path / "s.toml", TASK_IN_A_WORKTREE)
    editor = Editor()
    async with agent(editor, script) as conn:
        sid = (await conn.new_session(cwd=str(repo))).session_id
        done = await conn.prompt(session_id=sid, prompt=[text_block("Add a module aside")])
        assert done.stop_reason == "end_turn"
    progress = [
        u.content[0].content.text for _, u in editor.updates if u.session_update == "tool_call_update" and u.content
    ]
    ended = next(p for p in progress if p.startswith("worker completed"))
    child = ended.split("session ", 1)[1].split(" ", 1)[0]
    assert ended.endswith(f" · session {child} · branch zero/{short_id(child)}/worker (+2 −0 in 1 file)")
    assert f"merge it: git merge zero/{short_id(child)}/worker" in progress[-1]  # the result: clean tree, a merge
