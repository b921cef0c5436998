"""Reading, resuming and forking sessions from the command line, and resuming a stopped team."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from support.cli import ZERO, scripted, write_script, zero

from zero.agent import StatusChanged
from zero.sessions import FileSessionStore, SessionMetadata, new_session_id, short_id

DELEGATING_TEAM = """
name = "crew"
[[members]]
name = "lead"
specialist = "lead"
prompt = "Plan the work."
"""
LEAD = """
name = "lead"
description = "Plans, and delegates the looking."
tools = ["read-only", "delegate"]
prompt = "You lead."
"""

DELEGATING_SCRIPT = """
[[turns]]
match = { system = 'You are "lead"', turn = 1 }
text = "Listing first."
tool_calls = [{ name = "list_directory", arguments = { path = "." } }]
[[turns]]
match = { system = 'You are "lead"', turn = 2 }
text = "Asking an explorer."
tool_calls = [{ name = "Task", arguments = { name = "explorer", description = "find todo", prompt = "Find TODOs." } }]
[[turns]]
match = { system = 'You are "lead"', turn = 3 }
text = "The plan: explain the TODO."
[[turns]]
match = { system = "You are the explorer", turn = 1 }
tool_calls = [{ name = "grep", arguments = { pattern = "TODO" } }]
[[turns]]
match = { system = "You are the explorer", turn = 2 }
text = "One TODO in src/app.py."
"""


def store() -> FileSessionStore:
    return FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")


def run_team(workspace: Path, tmp_path: Path, team: str, script: str, *extra: str) -> dict[str, Any]:
    mine = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "specialists"  # yours: it may delegate
    mine.mkdir(parents=True, exist_ok=True)
    write_script(mine / "lead.toml", LEAD)
    done = zero(
        "swarm", "run", str(write_script(tmp_path / "team.toml", team)), "--provider", "scripted",
        "--script", str(write_script(tmp_path / "script.toml", script)), "--cwd", str(workspace),
        "--output-format", "json", *extra,
    )  # fmt: skip
    assert done.stdout, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_show_prints_a_members_tool_calls_and_names_its_child(workspace: Path, tmp_path: Path) -> None:
    result = run_team(workspace, tmp_path, DELEGATING_TEAM, DELEGATING_SCRIPT)
    assert result["status"] == "completed"
    member = result["members"][0]["sessionId"]
    shown = zero("sessions", "show", member)
    assert shown.returncode == 0
    text = shown.stdout
    assert '→ list_directory {"path": "."}' in text and "← ok" in text and "README.md" in text  # call, result
    child = next(m for m in store().list() if m.session_kind == "child")
    assert f"⇢ explorer {child.session_id} (foreground): find todo" in text
    assert f"⇠ explorer {child.session_id} completed" in text and "model call:" in text
    assert "→ grep" not in text  # the child's own calls are in its transcript...
    nested = zero("sessions", "show", member, "--children").stdout
    assert '→ grep {"pattern": "TODO"}' in nested and "    #" in nested  # ...nested with --children
    # the tree's totals are the sum of every session's own usage
    tree = json.loads(zero("sessions", "tree", result["sessionId"], "--json").stdout)

    def own(node: dict[str, Any]) -> int:
        return int(node["usage"]["totalTokens"]) + sum(own(c) for c in node["children"])

    assert tree["subtreeUsage"]["totalTokens"] == own(tree) > 0
    # a short id works, and so does last
    assert zero("sessions", "show", short_id(member)).stdout == text
    assert result["sessionId"] in zero("sessions", "show", "last").stdout


def test_list_has_a_header_filters_and_children_under_their_team(workspace: Path, tmp_path: Path) -> None:
    result = run_team(workspace, tmp_path, DELEGATING_TEAM, DELEGATING_SCRIPT)
    listed = zero("sessions", "list", "--tree").stdout.splitlines()
    assert listed[0].split()[:4] == ["ID", "KIND", "STATUS", "AGENT"]
    kinds = [line.split()[1] for line in listed[1:]]
    assert kinds == ["team", "member", "child"]  # a team first, its member under it, the child under that
    assert listed[2].split()[3] == "lead" and listed[3].split()[3] == "explorer"  # indented in AGENT
    members = json.loads(zero("sessions", "list", "--kind", "member", "--json").stdout)
    assert [m["memberName"] for m in members] == ["lead"]
    rooted = json.loads(zero("sessions", "list", "--root", result["sessionId"], "--json").stdout)
    assert len(rooted) == 3
    assert json.loads(zero("sessions", "list", "--status", "failed", "--json").stdout) == []
    here = zero("sessions", "list", "--here", "--cwd", str(workspace), "--json").stdout
    assert len(json.loads(here)) == 3
    elsewhere = zero("sessions", "list", "--here", "--cwd", str(tmp_path), "--json").stdout
    assert json.loads(elsewhere) == []


def test_ids_by_prefix_are_unique_or_listed(tmp_path: Path) -> None:
    s = store()
    for suffix in ("abc111111111", "abc222222222", "def333333333"):
        s.create(SessionMetadata(session_id=f"zero_20260101000000_{suffix}", cwd=str(tmp_path), status="completed"))
    s.flush()
    both = zero("sessions", "show", "abc")
    assert both.returncode == 2 and "'abc' matches 2 sessions" in both.stderr
    assert "zero_20260101000000_abc111111111" in both.stderr and "zero_20260101000000_abc222222222" in both.stderr
    assert zero("sessions", "show", "def").returncode == 0
    unknown = zero("sessions", "show", "zero_20260101000000_abc11111111x")
    assert unknown.returncode == 2 and "no session zero_20260101000000_abc11111111x" in unknown.stderr
    assert "the closest: zero_20260101000000_abc111111111" in unknown.stderr


def test_resume_checks_the_workspace_by_identity(workspace: Path, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "s.toml",
        '[[turns]]\nmatch = { last = "hi" }\ntext = "first"\n[[turns]]\nmatch = { last = "more" }\ntext = "second"\n',
    )
    first = zero("exec", "hi", *scripted(script, workspace))
    assert first.returncode == 0
    session_id = store().list()[0].session_id
    args = ["--provider", "scripted", "--script", str(script)]
    elsewhere = zero("sessions", "resume", session_id, "more", *args, "--cwd", str(tmp_path))
    assert elsewhere.returncode == 2 and f"belongs to the workspace {workspace}" in elsewhere.stderr
    alias = tmp_path / "alias"
    alias.symlink_to(workspace)  # another spelling of the same folder is the same workspace
    again = zero("sessions", "resume", session_id, "more", *args, "--cwd", str(alias / ".." / "alias"))
    assert again.returncode == 0, again.stderr
    assert again.stdout == "second\n"
    path = store().path(session_id) / "metadata.json"
    original = path.read_text()
    for cwd, why in ((".", "a relative path"), (str(tmp_path / "gone"), "no longer exists")):
        path.write_text(original.replace(json.dumps(str(workspace)), json.dumps(cwd)))
        refused = zero("sessions", "resume", session_id, "more", *args, "--cwd", str(workspace))
        assert refused.returncode == 2 and why in refused.stderr, refused.stderr


def test_a_member_stopped_by_sigint_resumes_alone_and_a_fork_stops_at_its_event(
    workspace: Path, tmp_path: Path
) -> None:
    team = write_script(
        tmp_path / "team.toml", 'name = "solo"\n[[members]]\nname = "m"\nspecialist = "explorer"\nprompt = "Look."\n'
    )
    slow = write_script(
        tmp_path / "slow.toml",
        """
[[turns]]
match = { turn = 1 }
text = "Looking around."
tool_calls = [{ name = "list_directory" }]
[[turns]]
match = { turn = 2 }
delay = 30
text = "never"
""",
    )
    proc = subprocess.Popen(
        [ZERO, "swarm", "run", str(team), *scripted(slow, workspace)] + ["--output-format", "stream-json"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # wait until the member's first turn is done and its second call waits
        if json.loads(line)["type"] == "tool_result":
            break
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 130
    proc.stdout.close()
    member = next(m for m in store().list() if m.session_kind == "member")
    assert member.status == "interrupted"
    finish = write_script(tmp_path / "finish.toml", '[[turns]]\nmatch = { last = "finish" }\ntext = "All done."\n')
    done = zero(
        "sessions", "resume", member.session_id, "finish", "--provider", "scripted", "--script", str(finish),
        "--cwd", str(workspace), "--output-format", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "All done."
    assert store().metadata(member.session_id).status == "completed"
    sent = [e.event for e in store().events(member.session_id) if e.event.kind == "message"]
    assert [m.content for m in sent if m.role == "user"] == ["Look.", "finish"]  # it had its history
    # a fork stops where asked
    events = store().events(member.session_id)
    at = next(e.sequence for e in events if e.event.kind == "tool_result")
    forked = json.loads(zero("sessions", "fork", member.session_id, "--at", str(at), "--json").stdout)
    assert forked["forkedFrom"] == member.session_id and forked["forkedAtSequence"] == at
    kept = store().events(forked["sessionId"])
    assert [e.event.kind for e in kept][-1] == "tool_result" and all(
        "finish" not in getattr(e.event, "content", "") for e in kept
    )


def test_export_rm_and_prune(workspace: Path, tmp_path: Path) -> None:
    result = run_team(workspace, tmp_path, DELEGATING_TEAM, DELEGATING_SCRIPT)
    team = result["sessionId"]
    md = zero("sessions", "export", team, "--children").stdout
    assert md.startswith(f"# Session {team}") and "**assistant**:" in md and "```" in md
    jsonl = zero("sessions", "export", team, "--children", "--format", "jsonl").stdout.splitlines()
    assert {json.loads(line)["sessionId"] for line in jsonl} == {m.session_id for m in store().list()}
    refused = zero("sessions", "rm", team)  # no terminal to ask
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert zero("sessions", "prune", "--older-than", "1d").stdout.startswith("removed 0 sessions")
    member = next(m.session_id for m in store().list() if m.session_kind == "member")
    part = zero("sessions", "rm", member, "--yes")  # (the team's resume would miss it: swarm resume failed)
    assert (part.returncode, part.stderr) == (
        2, f"zero: error: {member} is part of the run {team}: remove the whole run with zero sessions rm {team}\n"
    )  # fmt: skip
    assert zero("sessions", "rm", team, "--yes").stdout == "removed 3 sessions\n"
    assert store().list() == []
    bad = zero("sessions", "prune", "--older-than", "soon")
    assert bad.returncode == 2 and "e.g. 30d" in bad.stderr


def test_prune_and_rm_leave_a_session_a_process_runs(workspace: Path) -> None:
    st = store()
    sid = new_session_id()
    st.create(SessionMetadata(session_id=sid, cwd=str(workspace), title="old"))
    st.append(sid, [StatusChanged(session_id=sid, status="completed")])
    st.release(sid)
    st.flush()
    time.sleep(1.05)  # older than --older-than 1s
    fd = os.open(st.path(sid) / "lease", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # resumed since: it was listed finished, and is run again now
    try:
        assert zero("sessions", "prune", "--older-than", "1s").stdout == "removed 0 sessions older than 1s\n"
        refused = zero("sessions", "rm", sid, "--yes")
        assert refused.returncode == 2 and f"{sid} is still running; stop it first" in refused.stderr
    finally:
        os.close(fd)
    assert st.exists(sid)
    assert zero("sessions", "prune", "--older-than", "1s").stdout == "removed 1 session older than 1s\n"
    assert not st.exists(sid)


STOPPABLE_TEAM = 'name = "crew"\n[budget]\ntokens = 1_000_000\n' + "".join(
    f'[[members]]\nname = "{n}"\nspecialist = "tester"\nprompt = "Work, {n}."\n' for n in ("fast", "a", "b", "c")
)
STOPPABLE_SCRIPT = """
[[turns]]
match = { system = 'You are "fast"' }
text = "fast is done"
""" + "".join(
    f"""
[[turns]]
match = {{ system = 'You are "{n}"', turn = 1 }}
text = "Running the long job."
tool_calls = [{{ name = "bash", arguments = {{ command = "touch started-{n} && sleep 30" }} }}]
"""
    for n in ("a", "b", "c")
)
RESUMED_SCRIPT = "".join(
    f"""
[[turns]]
match = {{ system = 'You are "{n}"', last = "resumed now" }}
text = "{n} finished after the resume"
"""
    for n in ("a", "b", "c")
)


def test_a_killed_team_resumes_where_it_stopped(workspace: Path, tmp_path: Path) -> None:
    # (a member waiting for another when the team was killed stayed "pending" in every view for ever)
    later = '[[members]]\nname = "later"\nspecialist = "tester"\nprompt = "Then."\ndepends_on = ["a"]\n'
    team = write_script(tmp_path / "team.toml", STOPPABLE_TEAM + later)
    script = write_script(tmp_path / "s.toml", STOPPABLE_SCRIPT)
    with subprocess.Popen(
        [ZERO, "swarm", "run", str(team), *scripted(script, workspace)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as proc:
        deadline = time.monotonic() + 20
        while not (  # until the fast member is done and the three others are at work
            all((workspace / f"started-{n}").exists() for n in "abc")
            and any(m.member_name == "fast" and m.status == "completed" for m in store().list())
        ):
            assert proc.poll() is None and time.monotonic() < deadline, "the kill point never came"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    listed = {m["memberName"] or "team": m for m in json.loads(zero("sessions", "list", "--json").stdout)}
    assert {k: v["status"] for k, v in listed.items()} == {
        "team": "interrupted", "fast": "completed", "a": "interrupted", "b": "interrupted", "c": "interrupted",
        "later": "interrupted",
    }  # fmt: skip
    ended = store().events(listed["later"]["sessionId"])[-1].event
    assert isinstance(ended, StatusChanged) and ended.reason == "its team's process ended before it started"
    for name in "abc":  # usage rebuilt from each log
        calls = [e for e in store().events(listed[name]["sessionId"]) if e.event.kind == "usage"]
        assert listed[name]["usage"]["calls"] == len(calls) == 1
    fast_events = len(store().events(listed["fast"]["sessionId"]))
    spent = sum(m["usage"]["totalTokens"] for m in listed.values())
    resumed = write_script(
        tmp_path / "resumed.toml",
        RESUMED_SCRIPT + '[[turns]]\nmatch = { system = \'You are "later"\' }\ntext = "then"\n',
    )
    done = zero(
        "swarm", "resume", listed["team"]["sessionId"][-12:], "--provider", "scripted", "--script", str(resumed),
        "--cwd", str(workspace), "--output-format", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "completed" and result["sessionId"] == listed["team"]["sessionId"]
    outputs = {m["name"]: m["output"] for m in result["members"]}
    assert outputs == {
        "fast": "fast is done",
        "a": "a finished after the resume",
        "b": "b finished after the resume",
        "c": "c finished after the resume",
        "later": "then",
    }
    assert len(store().events(listed["fast"]["sessionId"])) == fast_events  # no new model call for it
    after = json.loads(zero("sessions", "list", "--json").stdout)
    total = sum(m["usage"]["totalTokens"] for m in after)
    assert result["budget"]["used"]["tokens"] == total > spent  # the ledger holds both runs
    team_log = [e.event for e in store().events(listed["team"]["sessionId"])]
    assert [e.resumed for e in team_log if e.kind == "team_start"] == [0, 1]  # the resume is on record
    shown = zero("sessions", "show", listed["team"]["sessionId"], "--children").stdout
    assert shown.count(f"session {listed['a']['sessionId']} ") == 1  # (each member's transcript once: it was twice)
    assert "(its transcript is above: it covers every run of it)" in shown


def test_a_member_resumed_alone_spends_what_its_team_has_left(workspace: Path, tmp_path: Path) -> None:
    team = (
        'name = "tight"\n[defaults]\nmax_output_tokens = 200\n[budget]\ntokens = 1_900\n'
        '[[members]]\nname = "m"\nspecialist = "explorer"\nprompt = "Look."\n'
    )
    result = run_team(workspace, tmp_path, team, '[[turns]]\ntext = "looked"\ntimes = 0\n', "--accept-estimate")
    assert result["status"] == "completed" and 0 < result["budget"]["used"]["tokens"] < 1_900
    member = result["members"][0]["sessionId"]
    script = write_script(tmp_path / "more.toml", '[[turns]]\ntext = "more"\ntimes = 0\n')
    done = zero(
        "sessions", "resume", member, "look again", "--provider", "scripted", "--script", str(script),
        "--cwd", str(workspace),
    )  # fmt: skip
    # the call needs its prompt and its output cap (lowered at most to 1,024 tokens to fit a budget), and
    # the team has less than that left
    assert done.returncode == 4 and "team budget exhausted: tokens limit reached" in done.stderr, done.stderr
    unlimited = zero(
        "sessions", "resume", member, "look again", "--provider", "scripted", "--script", str(script),
        "--cwd", str(workspace), "--max-output-tokens", "100",
    )  # fmt: skip
    assert unlimited.returncode == 0 and unlimited.stdout == "more\n"


def test_damaged_sessions_are_listed_as_damaged_with_what_is_wrong(tmp_path: Path) -> None:
    s = store()
    good, broken, half = (f"zero_20260101000000_{n * 12}" for n in "abc")
    for sid in (good, broken):
        s.create(SessionMetadata(session_id=sid, cwd=str(tmp_path), status="completed", title=sid[-3:]))
    s.flush()
    (s.path(broken) / "metadata.json").write_text("{not json")
    (s.root / half).mkdir()  # a folder a crash left before its metadata was written
    listed = zero("sessions", "list")
    assert listed.returncode == 0
    rows = {line.split()[0]: line.split(None, 7) for line in listed.stdout.splitlines()[1:]}
    assert rows[short_id(good)][2] == "completed"
    missing = f"metadata.json is missing: the session cannot be read (zero sessions rm {half} removes it)"
    assert rows[short_id(half)][2:] == ["damaged", "?", "?", "?", "0s", missing]
    assert rows[short_id(broken)][2] == "damaged"
    assert (
        rows[short_id(broken)][7] == "metadata.json is damaged: Invalid JSON: key must be a string at line 1 column 2"
    )
    as_json = {row["sessionId"]: row for row in json.loads(zero("sessions", "list", "--json").stdout)}
    assert as_json[half] == {
        "sessionId": half,
        "status": "damaged",
        "damaged": f"{s.path(half)}/{missing}",
        "updatedAt": as_json[half]["updatedAt"],
    }
    assert as_json[broken]["damaged"].startswith(f"{s.path(broken)}/metadata.json is damaged: ")
    assert as_json[good]["status"] == "completed"
    damaged = json.loads(zero("sessions", "list", "--status", "damaged", "--json").stdout)
    assert {row["sessionId"] for row in damaged} == {broken, half}


def test_show_says_a_log_is_missing_or_emptied_and_fails_rather_than_show_nothing(tmp_path: Path) -> None:
    s = store()
    new, emptied, removed = (f"zero_20260101000000_{n * 12}" for n in "abc")
    for sid in (new, emptied, removed):
        s.create(SessionMetadata(session_id=sid, cwd=str(tmp_path)))
    for sid in (emptied, removed):
        s.append(sid, [StatusChanged(session_id=sid, status="completed")])
    s.flush()
    fresh = zero("sessions", "show", new)  # made, never run: an empty log is all it has
    assert fresh.returncode == 0 and fresh.stdout.endswith("\n(no events yet: the session's log is empty)\n")
    (s.path(emptied) / "events.jsonl").write_text("")
    cut = zero("sessions", "show", emptied)
    assert cut.returncode == 1
    assert cut.stderr == (
        f"zero: error: {s.path(emptied)}/events.jsonl holds no events where the session's metadata counts 1: "
        "the log was cut or replaced, and what it held is lost\n"
    )
    assert zero("sessions", "show", emptied, "--json").stderr == cut.stderr
    (s.path(removed) / "events.jsonl").unlink()
    gone = zero("sessions", "show", removed)
    assert gone.returncode == 1
    assert gone.stderr == (
        f"zero: error: {s.path(removed)}/events.jsonl is missing: the session's log (its record) was removed, "
        "and what it held is lost\n"
    )


def test_a_damaged_session_is_refused_by_every_command_and_resume_never_starts_it_afresh(
    workspace: Path, tmp_path: Path
) -> None:
    """Resume and fork of a session whose log was emptied, removed or cut used to start a fresh conversation
    under the old id (or continue from what was left) and rewrite its metadata to match; tree and export
    exited 0; one whose metadata was removed could be listed but not shown or removed."""
    script = write_script(
        tmp_path / "s.toml",
        '[[turns]]\nmatch = { last = "hi" }\ntext = "first"\n[[turns]]\nmatch = { last = "again" }\ntext = "second"\n',
    )
    assert zero("exec", "hi", *scripted(script, workspace)).returncode == 0
    sid = store().list()[0].session_id
    folder = store().path(sid)
    log, meta = folder / "events.jsonl", folder / "metadata.json"
    history, metadata = log.read_bytes(), meta.read_bytes()
    count = len(history.splitlines())
    damages = {
        "an emptied log": (log, b"", f"{log} holds no events where the session's metadata counts {count}"),
        "a log cut short": (log, b"".join(history.splitlines(keepends=True)[:3]), f"{log} holds only 3 events"),
        "a removed log": (log, None, f"{log} is missing: the session's log (its record) was removed"),
        "removed metadata": (meta, None, f"{meta} is missing: the session cannot be read (zero sessions rm {sid}"),
        "damaged metadata": (meta, b'{"sessionId": 3}', f"{meta} is damaged: sessionId: Input should be a valid str"),
    }
    commands = {
        "show": ["show", sid],
        "show --json": ["show", sid, "--json"],
        "tree": ["tree", sid],
        "export": ["export", sid],
        "export --as-script": ["export", sid, "--as-script"],
        "fork": ["fork", sid],
        "resume": ["resume", sid, "again", *scripted(script, workspace)],
    }
    for damage, (path, text, why) in damages.items():
        if text is None:
            path.unlink()
        else:
            path.write_bytes(text)
        left = {p: p.read_bytes() for p in (log, meta) if p.exists()}
        listed = {row["sessionId"]: row for row in json.loads(zero("sessions", "list", "--json").stdout)}
        assert listed[sid]["status"] == "damaged" and listed[sid]["damaged"].startswith(why), (damage, listed[sid])
        for name, argv in commands.items():
            refused = zero("sessions", *argv)
            assert (refused.returncode, refused.stdout) == (1, ""), (damage, name, refused)
            assert refused.stderr.startswith(f"zero: error: {why}"), (damage, name, refused.stderr)
            assert "\n" not in refused.stderr.rstrip("\n"), (damage, name, refused.stderr)  # one line, no traceback
        assert {p: p.read_bytes() for p in (log, meta) if p.exists()} == left, damage  # nothing rewritten
        assert [s.session_id for s in store().list()] == [], damage  # and nothing forked
        log.write_bytes(history)
        meta.write_bytes(metadata)
    assert zero("sessions", "resume", sid, "again", *scripted(script, workspace)).stdout == "second\n"  # mended

    meta.unlink()  # what cannot be read can still be removed, and a fork never run is not "running"
    assert zero("sessions", "rm", sid, "--yes").stdout == "removed 1 session\n"
    assert not folder.exists()
    assert zero("exec", "hi", *scripted(script, workspace)).returncode == 0
    made = json.loads(zero("sessions", "fork", store().list()[0].session_id, "--json").stdout)
    assert made["status"] == "pending"
    assert zero("sessions", "rm", made["sessionId"], "--yes").stdout == "removed 1 session\n"


def test_a_single_agents_run_counts_itself_in_the_tree_and_the_watch(workspace: Path, tmp_path: Path) -> None:
    # (both said "no agents yet" of a run that had completed)
    script = write_script(tmp_path / "s.toml", '[[turns]]\ntext = "done"\n')
    assert zero("exec", "hi", *scripted(script, workspace)).returncode == 0
    sid = store().list()[0].session_id
    for argv in (["sessions", "tree", sid], ["swarm", "watch", sid]):
        assert zero(*argv).stdout.splitlines()[-1] == "1 completed", argv


def test_a_markdown_export_fences_a_tool_output_that_holds_a_fence_of_its_own(workspace: Path, tmp_path: Path) -> None:
    """A tool's output holding ``` closed its fence early: what followed rendered as the export's own Markdown."""
    (workspace / "notes.md").write_text("```\n# Injected heading\n```\n")
    script = write_script(
        tmp_path / "s.toml",
        '[[turns]]\nmatch = { turn = 1 }\ntool_calls = [{ name = "read_file", arguments = { path = "notes.md" } }]\n'
        '[[turns]]\nmatch = { turn = 2 }\ntext = "read"\n',
    )
    done = zero("exec", "Read the notes", *scripted(script, workspace), "--output-format", "json")
    exported = zero("sessions", "export", json.loads(done.stdout)["sessionId"], "--format", "md")
    assert exported.returncode == 0, exported.stderr
    lines = exported.stdout.splitlines()
    opened = lines.index("````")  # longer than any run of backticks in it
    assert lines[opened + 1 : opened + 4] == ["     1\t```", "     2\t# Injected heading", "     3\t```"]
    assert lines[opened + 4] == "````"
