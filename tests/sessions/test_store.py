"""The session store: layout, batches, locking across processes, torn lines, ids."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest
from support.mounts import fill, tmpfs

from zero.agent import ChildFinished, MessageAdded, RunFinished, RunStarted, Usage, UsageUpdated, WarningRaised
from zero.errors import SessionError, SessionWriteError, UsageError
from zero.sessions import (
    FileSessionStore,
    SessionMetadata,
    fork_session,
    new_session_id,
    session_tree,
    validate_session_id,
)
from zero.sessions import index as index_module

SessionStore = FileSessionStore


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "sessions")


def make(store: SessionStore, **fields: object) -> str:
    sid = new_session_id()
    store.create(SessionMetadata(session_id=sid, cwd="/repo", **fields))
    return sid


def say(sid: str, text: str, role: str = "user") -> MessageAdded:
    return MessageAdded(session_id=sid, role=role, content=text)  # type: ignore[arg-type]


def tick(sid: str, label: object) -> WarningRaised:
    """A plain event carrying a label, to follow events through the store."""
    return WarningRaised(session_id=sid, code="tick", message=str(label))


def labels(store: SessionStore, sid: str) -> list[str]:
    return [e.event.message for e in store.events(sid) if isinstance(e.event, WarningRaised)]


def raw(store: SessionStore, sid: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (store.path(sid) / "events.jsonl").read_text().splitlines()]


def test_a_batch_is_appended_with_contiguous_sequences_and_metadata(store: SessionStore) -> None:
    sid = make(store)
    store.append(sid, [say(sid, "hi")])
    usage = UsageUpdated(session_id=sid, model="m", prompt_tokens=3, cost_usd=None)
    meta = store.append(sid, [say(sid, "yo", "assistant"), usage])
    events = store.events(sid)
    assert [e.sequence for e in events] == [1, 2, 3] and events[2].event == usage
    record = raw(store, sid)[2]
    assert record == {
        "id": f"{sid}:3",
        "sessionId": sid,
        "sequence": 3,
        "type": "usage",
        "createdAt": events[2].created_at,
        "payload": {"model": "m", "promptTokens": 3, "costUsd": None},
    }
    assert meta.event_count == 3 and meta.last_event_type == "usage"
    assert meta.usage.prompt_tokens == 3 and meta.usage.cost_usd is None  # the metadata follows the events
    on_disk = json.loads((store.path(sid) / "metadata.json").read_text())
    assert on_disk["sessionId"] == sid and on_disk["eventCount"] == 3 and on_disk["lastEventType"] == "usage"
    assert set(on_disk["usage"]) == {
        "promptTokens",
        "completionTokens",
        "totalTokens",
        "cachedTokens",
        "costUsd",
        "calls",
        "unpriced",
        "estimated",
    }
    assert on_disk["usage"]["unpriced"] is True and on_disk["usage"]["estimated"] is False
    assert "childrenUsage" in on_disk


def test_creating_an_existing_session_fails(store: SessionStore) -> None:
    sid = make(store)
    with pytest.raises(SessionError, match="already exists"):
        store.create(SessionMetadata(session_id=sid))


@pytest.mark.parametrize("bad", ["", "../etc", "a/b", "-x", ".hidden", "x" * 129, "a b", "ok\n"])
def test_bad_ids_are_refused_before_touching_a_path(store: SessionStore, bad: str) -> None:
    with pytest.raises(UsageError, match="invalid session id"):
        store.path(bad)
    with pytest.raises(UsageError):
        validate_session_id(bad)


def test_a_torn_last_line_is_skipped_and_cut_before_the_next_append(store: SessionStore) -> None:
    sid = make(store)
    store.append(sid, [say(sid, "one"), say(sid, "two")])
    log = store.path(sid) / "events.jsonl"
    with open(log, "ab") as f:
        f.write(b'{"id": "x:3", "sequence": 3, "type": "mess')  # the process died mid-write
    assert [e.sequence for e in store.events(sid)] == [1, 2]
    store.append(sid, [say(sid, "three")])
    events = store.events(sid)
    assert [e.sequence for e in events] == [1, 2, 3] and events[2].event == say(sid, "three")
    assert log.read_bytes().count(b"\n") == 3


def test_a_corrupt_line_in_the_middle_is_an_error_naming_the_line(store: SessionStore) -> None:
    sid = make(store)
    store.append(sid, [tick(sid, "a"), tick(sid, "b"), tick(sid, "c")])
    log = store.path(sid) / "events.jsonl"
    lines = log.read_text().splitlines()
    for bad, why in [
        ("{not json", "not a valid event"),
        ("[1, 2]", "a record must be a JSON object"),
        ('{"sequence": 2, "payload": {}}', "the record has no type"),
        ('{"sequence": 2, "type": "tool_result", "payload": {"status": "maybe"}}', "toolCallId: Field required"),
    ]:
        log.write_text("\n".join([lines[0], bad, lines[2]]) + "\n")
        with pytest.raises(SessionError, match=r"events.jsonl: line 2 is not a valid event") as caught:
            store.events(sid)
        assert why in str(caught.value)
    # an event type from a newer Zero is skipped, not an error
    log.write_text("\n".join([lines[0], '{"sequence": 2, "type": "hologram", "payload": {}}', lines[2]]) + "\n")
    assert labels(store, sid) == ["a", "c"]
    log.write_text("\n".join([*lines[:2], '{"sequence": 3, "type": "hologram", "payload": {}}']) + "\n")
    assert labels(store, sid) == ["a", "b"]  # the last, counted by its metadata: the log is whole all the same


def test_secrets_are_redacted_from_values_before_they_reach_disk(store: SessionStore) -> None:
    sid = make(store)
    store.append(sid, [tick(sid, "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz123")])
    assert "sk-proj" not in (store.path(sid) / "events.jsonl").read_text()
    assert labels(store, sid) == ["OPENAI_API_KEY=[REDACTED]"]


def test_a_secret_in_a_title_never_reaches_the_metadata_or_the_index(store: SessionStore) -> None:
    # zero exec titles a session by its prompt, zero swarm plan by its goal: both were written as given.
    token = "ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123"
    sid = make(store, title=f"deploy with {token}")
    assert store.metadata(sid).title == "deploy with [REDACTED]"
    store.flush()
    on_disk = [p.read_text() for p in store.root.rglob("*") if p.is_file()]
    assert on_disk and not any(token in text for text in on_disk)
    assert [m.title for m in store.list()] == ["deploy with [REDACTED]"]


WRITER = """
import sys
from zero.agent import WarningRaised
from zero.sessions import FileSessionStore
store, sid, name = FileSessionStore(sys.argv[1]), sys.argv[2], sys.argv[3]
for i in range(100):
    store.append(sid, [WarningRaised(session_id=sid, code=name, message=f"{i}:{p}") for p in range(4)])
"""


def test_four_processes_appending_at_once_leave_contiguous_unmixed_batches(store: SessionStore) -> None:
    sid = make(store)
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(store.root), sid, f"w{n}"]) for n in range(4)]
    assert [p.wait(timeout=60) for p in procs] == [0] * 4
    events = store.events(sid)
    assert [e.sequence for e in events] == list(range(1, 4 * 100 * 4 + 1))
    for start in range(0, len(events), 4):
        batch = [e.event for e in events[start : start + 4]]
        assert [b.message.split(":")[1] for b in batch] == ["0", "1", "2", "3"]  # type: ignore[union-attr]
        assert len({(b.code, b.message.split(":")[0]) for b in batch}) == 1  # type: ignore[union-attr]
    assert store.metadata(sid).event_count == 1600


def test_threads_appending_at_once_are_group_committed_whole_and_in_order(store: SessionStore) -> None:
    sid = make(store)

    def writer(name: str) -> None:
        for i in range(20):
            store.append(sid, [tick(sid, f"{name}:{i}:{p}") for p in range(3)])

    threads = [threading.Thread(target=writer, args=(f"t{n}",)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = store.events(sid)
    assert [e.sequence for e in events] == list(range(1, 8 * 20 * 3 + 1))
    parts = [label.split(":") for label in labels(store, sid)]
    for start in range(0, len(parts), 3):
        batch = parts[start : start + 3]
        assert [p[2] for p in batch] == ["0", "1", "2"] and len({(p[0], p[1]) for p in batch}) == 1
    for n in range(8):  # each writer's batches stay in the order it wrote them
        assert [int(p[1]) for p in parts if p[0] == f"t{n}" and p[2] == "0"] == list(range(20))
    assert store.metadata(sid).event_count == 480


def test_appending_to_a_missing_session_is_a_session_error(store: SessionStore) -> None:
    with pytest.raises(SessionError, match="session nope not found"):
        store.append("nope", [tick("nope", "x")])


def test_a_session_that_never_ran_stays_pending_and_one_whose_run_died_is_interrupted(tmp_path: Path) -> None:
    """A session nobody runs was read as a crash whatever its log said: a fork not yet run, a shell session
    left through /clear, a member whose team never reached it said "interrupted"."""
    ours = SessionStore(tmp_path / "sessions")
    never, died, lagged = make(ours), make(ours), make(ours)
    made = (ours.path(lagged) / "metadata.json").read_bytes()  # says pending
    ours.append(never, [say(never, "the history a fork copies")])
    for sid in (died, lagged):
        ours.append(sid, [RunStarted(session_id=sid, provider="scripted", model="m", cwd="/repo")])
    for sid in (never, died, lagged):
        ours.release(sid)
    ours.flush()
    (ours.path(lagged) / "metadata.json").write_bytes(made)  # its run died before it wrote its metadata
    theirs = SessionStore(tmp_path / "sessions")  # another process, after this one's runs ended
    assert theirs.metadata(never).status == "pending"
    assert [e.event.kind for e in theirs.events(never)] == ["message"]  # nothing written by the reading
    for sid in (died, lagged):
        assert theirs.metadata(sid).status == "interrupted"
        assert [e.event.kind for e in theirs.events(sid)] == ["run_start", "status"]
    assert {m.session_id: m.status for m in theirs.list()}[never] == "pending"


def test_a_dead_run_whose_log_lost_events_is_damaged_not_repaired_to_match_what_is_left(tmp_path: Path) -> None:
    """The repair of a dead run (and a resume's lease) rebuilt the metadata from whatever log was left: an
    emptied or cut log became a session that never ran, or one with less history, and nothing said so."""
    ours = SessionStore(tmp_path / "sessions")
    sid = make(ours)
    ours.append(sid, [RunStarted(session_id=sid, provider="scripted", model="m", cwd="/repo"), say(sid, "hi")])
    ours.release(sid)
    ours.flush()
    log = ours.path(sid) / "events.jsonl"
    whole = log.read_text()
    for left in ("", whole.splitlines(keepends=True)[0]):
        log.write_text(left)
        before = {p.name: p.read_bytes() for p in ours.path(sid).iterdir()}
        theirs = SessionStore(tmp_path / "sessions")  # another process, after this one's run died
        for read in (theirs.metadata, theirs.acquire, theirs.events):
            with pytest.raises(SessionError, match=f"{log} holds .* where the session's metadata counts 2: the log"):
                read(sid)
        assert {p.name: p.read_bytes() for p in ours.path(sid).iterdir()} == before  # nothing repaired
        assert [m.session_id for m in theirs.list()] == []
        assert sid in theirs.listing()[1]
    log.write_text(whole)
    assert SessionStore(tmp_path / "sessions").metadata(sid).status == "interrupted"  # whole again: repaired


def test_a_link_or_another_name_in_a_session_folder_is_never_written_or_read_through(tmp_path: Path) -> None:
    """A lease, log, metadata or spare file planted as a link (or a hard link) to a file of yours was truncated,
    appended to or overwritten by a plain listing or a resume (as root, any file)."""
    for name in ("lease", "events.jsonl", "metadata.json", ".metadata.spare"):
        for how in ("link", "hard link"):
            store = SessionStore(tmp_path / name / how / "sessions")
            sid = make(store)
            store.append(sid, [RunStarted(session_id=sid, provider="scripted", model="m", cwd="/repo"), say(sid, "hi")])
            store.release(sid)
            store.flush()
            folder = store.path(sid)
            victim = tmp_path / name / how / "bashrc"
            kept = name in ("events.jsonl", "metadata.json")  # (a copy of the real one: it would read as whole)
            victim.write_bytes((folder / name).read_bytes() if kept else b"mine\n")
            before = victim.read_bytes()
            (folder / name).unlink(missing_ok=True)
            if how == "link":
                (folder / name).symlink_to(victim)
            else:
                os.link(victim, folder / name)
            theirs = SessionStore(store.root)  # another process: its run died, so reading repairs it
            with contextlib.suppress(SessionError):
                theirs.listing()
            with contextlib.suppress(SessionError):
                theirs.acquire(sid)
                theirs.append(sid, [say(sid, "more")])
            with contextlib.suppress(SessionError):
                theirs.release(sid)
                theirs.flush()
            assert victim.read_bytes() == before, (name, how)
            assert sid in SessionStore(store.root).listing()[1], (name, how)
            assert SessionStore(store.root).remove(sid) and victim.read_bytes() == before, (name, how)


def test_the_index_a_folder_lease_and_a_parent_field_never_lead_out_of_the_sessions_folder(tmp_path: Path) -> None:
    """The index's temp file was written through a link planted at its name; a lease that is a folder made the
    session impossible to remove; a member's parentSessionId was used as a path (an outside folder got a lease)."""
    store = SessionStore(tmp_path / "sessions")
    sid = make(store)
    store.release(sid)
    store.flush()
    victim = tmp_path / "bashrc"
    victim.write_text("mine\n")
    (store.root / ".index.json").symlink_to(victim)
    assert [m.session_id for m in SessionStore(store.root).list()] == [sid]
    assert victim.read_text() == "mine\n"
    elsewhere = SessionStore(tmp_path / "elsewhere")
    team = make(elsewhere, session_kind="team")
    elsewhere.append(team, [RunStarted(session_id=team, provider="scripted", model="m", cwd="/repo")])
    elsewhere.release(team)
    elsewhere.flush()
    outside = elsewhere.path(team)  # a team's files, as they would be, out of this sessions folder
    (outside / "lease").unlink()
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    member = make(store, session_kind="member", parent_session_id=str(outside))
    store.release(member)
    store.flush()
    SessionStore(store.root).listing()
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before  # nothing locked or made there
    assert SessionStore(store.root).metadata(member).status == "pending"  # (not judged by what is there)
    (store.path(sid) / "lease").unlink()
    (store.path(sid) / "lease").mkdir()
    reader = SessionStore(store.root)
    assert not reader.held(sid) and reader.remove(sid) and not store.path(sid).exists()


def test_a_log_that_lost_its_first_or_middle_events_is_damaged(store: SessionStore) -> None:
    sid = make(store)
    store.append(sid, [tick(sid, i) for i in range(4)])
    store.release(sid)
    store.flush()
    log = store.path(sid) / "events.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    for kept, why in (
        (lines[3:], "line 1 holds event 4 where event 1 was due"),
        ([*lines[:1], *lines[2:]], "line 2 holds event 3 where event 2 was due"),
    ):
        log.write_text("".join(kept))
        reader = SessionStore(store.root)
        with pytest.raises(SessionError, match=why):
            reader.events(sid)
        if kept[0] != lines[0]:  # (a listing reads the first line and the last: a cut head shows there)
            assert why in reader.listing()[1][sid]


def test_list_returns_sessions_newest_first_and_skips_damaged_ones(store: SessionStore) -> None:
    first = make(store, title="first")
    second = make(store, title="second")
    store.append(second, [tick(second, "x")])
    store.flush()  # no write of "first" is pending that could undo the next line
    old = store.path(first) / "metadata.json"  # make "first" older than any clock tick could
    old.write_text(old.read_text().replace(store.metadata(first).updated_at, "2020-01-01T00:00:00.000Z"))
    (store.root / "broken").mkdir()
    (store.root / "broken" / "metadata.json").write_text("{")
    reader = SessionStore(store.root)  # another process's view: it has nothing of its own to write
    assert [m.session_id for m in reader.list()] == [second, first]


def test_the_index_follows_every_session_file_and_is_rebuilt_when_lost(store: SessionStore) -> None:
    ids = [make(store, title=f"s{i}") for i in range(3)]
    assert {m.session_id for m in store.list()} == set(ids)
    index = store.root / ".index.json"
    assert index.is_file()  # the listing left the index
    store.append(ids[0], [say(ids[0], "more")])  # replaced metadata: re-read
    shutil.rmtree(store.root / ids[1])  # gone: dropped
    listed = {m.session_id: m for m in SessionStore(store.root).list()}
    assert set(listed) == {ids[0], ids[2]} and listed[ids[0]].event_count == 1
    index.write_text("{not json")  # damaged: rebuilt from the sessions
    assert {m.session_id for m in SessionStore(store.root).list()} == {ids[0], ids[2]}
    assert json.loads(index.read_text())["version"] == 2


def test_a_runs_tree_reads_its_own_sessions_whatever_else_the_store_holds(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team's end totals its run from the sessions (``session_tree``): that checked every session of the store
    against its files, ~20,000 stats and 0.3 s with 10,000 sessions (seconds on a network home), on every run."""
    team = make(store, session_kind="team", title="t")
    members = [make(store, parent_session_id=team, root_session_id=team, title=f"m{i}") for i in range(2)]
    others = [new_session_id() for _ in range(20)]
    for i, sid in enumerate(others):  # runs of their own: each its own root, as a top-level session is
        store.create(SessionMetadata(session_id=sid, root_session_id=sid, cwd="/repo", title=f"other {i}"))
    store.append(members[0], [UsageUpdated.of(members[0], "gpt-4.1-mini", Usage(prompt_tokens=10, calls=1))])
    for sid in (team, *members, *others):
        store.release(sid)
    store.flush()
    assert len(store.rows()) == 23  # (the index now holds them all)
    child = make(store, parent_session_id=members[1], root_session_id=team, title="c")  # new since the index
    store.append(child, [UsageUpdated.of(child, "gpt-4.1-mini", Usage(prompt_tokens=5, calls=1))])
    store.release(child)
    store.flush()
    looked: list[str] = []
    identity = index_module._identity

    def stat(folder: str) -> list[int] | None:
        looked.append(folder)
        return identity(folder)

    monkeypatch.setattr(index_module, "_identity", stat)
    tree = session_tree(store, team)
    assert {n.meta.session_id for n in tree.walk()} == {team, *members, child}
    assert tree.subtree_usage.prompt_tokens == 15 and tree.subtree_usage.calls == 2
    assert not [f for f in looked if any(o in f for o in others)]  # no other run's files looked at
    assert len(json.loads((store.root / ".index.json").read_text())["sessions"]) == 24  # nor let go of
    assert {r["sessionId"] for r in store.rows()} == {team, *members, child, *others}  # the index keeps them


def test_metadata_is_replaced_whole_and_readers_never_see_a_partial_file(store: SessionStore) -> None:
    sid = make(store, title="x" * 50)
    stop = threading.Event()
    seen: list[int] = []

    def reader() -> None:  # another process's view: the file on disk, read while it is replaced
        while not stop.is_set():
            seen.append(json.loads((store.path(sid) / "metadata.json").read_bytes())["eventCount"])

    thread = threading.Thread(target=reader)
    thread.start()
    for i in range(100):
        store.append(sid, [tick(sid, i)])
    stop.set()
    thread.join()
    assert len(seen) > 10 and seen == sorted(seen)  # always whole JSON, never going back
    assert json.loads((store.path(sid) / "metadata.json").read_text())["eventCount"] == 100


def test_metadata_falls_back_to_a_renamed_temp_file_where_names_cannot_be_swapped(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zero.sessions._replace as replace

    monkeypatch.setattr(replace, "_renameat2", None)
    sid = make(store)
    for i in range(3):
        store.append(sid, [tick(sid, i)])
    assert json.loads((store.path(sid) / "metadata.json").read_text())["eventCount"] == 3
    assert sorted(p.name for p in store.path(sid).iterdir()) == ["events.jsonl", "lease", "metadata.json"]


def on_disk(store: SessionStore, sid: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((store.path(sid) / "metadata.json").read_bytes())
    return data


def test_submitted_batches_are_in_order_and_readers_in_this_process_see_them_at_once(store: SessionStore) -> None:
    sid = make(store)
    store.submit(sid, [RunStarted(session_id=sid, provider="p", model="m", cwd="/repo")])
    for i in range(49):
        store.submit(sid, [tick(sid, i)])
    assert store.metadata(sid).event_count == 50 and store.metadata(sid).status == "running"
    assert labels(store, sid) == [str(i) for i in range(49)]
    assert on_disk(store, sid)["eventCount"] == 0  # the summary on disk follows later...
    store.flush(sid)
    assert on_disk(store, sid)["eventCount"] == 50 and on_disk(store, sid)["status"] == "running"  # ...or now


def test_a_final_batch_writes_the_metadata_with_it(store: SessionStore) -> None:
    sid = make(store)
    store.submit(sid, [tick(sid, "turn")])
    store.submit(sid, [RunFinished(session_id=sid, status="completed")], final=True)
    store.metadata(sid)  # wait for the writer
    assert on_disk(store, sid)["status"] == "completed" and on_disk(store, sid)["lastEventType"] == "run_end"


def test_the_metadata_of_a_busy_session_reaches_the_disk_within_the_interval(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions", metadata_interval=0.2)
    sid = make(store)
    store.submit(sid, [RunStarted(session_id=sid, provider="p", model="m", cwd="/repo")])
    deadline = time.monotonic() + 5
    while on_disk(store, sid)["eventCount"] != 1:
        assert time.monotonic() < deadline, "the metadata was never written"
        time.sleep(0.05)
    assert on_disk(store, sid)["status"] == "running"


def test_a_failed_submit_stops_the_sessions_writes_and_is_raised_by_check_written_and_flush(
    store: SessionStore,
) -> None:
    store.submit("ghost", [tick("ghost", "x")])  # queued: the writer finds no such session
    with pytest.raises(SessionError, match="session ghost not found"):
        store.flush()
    store.flush()  # a flush of everything raises it once
    store.submit("ghost", [tick("ghost", "y")])  # dropped, never raised where events are emitted
    for ask in (store.check, store.written, store.flush):  # the session's own run hears it every time
        with pytest.raises(SessionError, match="session ghost not found"):
            ask("ghost")


def test_a_run_on_an_event_loop_waits_there_for_its_batches_to_be_written(
    store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    import zero.sessions._writer as module

    sid = make(store)

    async def run() -> None:
        store.submit(sid, [tick(sid, "call")])
        await store.awritten(sid)  # in the log now: a side effect may follow
        assert '"message":"call"' in (store.path(sid) / "events.jsonl").read_text()
        store.submit(sid, [tick(sid, "gone")])
        with anyio.move_on_after(0):  # a caller that stops waiting is not woken, and the writer goes on
            await store.awritten(sid)
        store.submit("ghost", [tick("ghost", "x")])
        with pytest.raises(SessionError, match="session ghost not found"):
            await store.awritten("ghost")

    anyio.run(run)
    store.flush()
    assert labels(store, sid) == ["call", "gone"] and not caplog.records  # (asyncio logs a callback that raised)

    async def made() -> module.Woken:
        return module.Woken()

    loop = asyncio.new_event_loop()
    woken = loop.run_until_complete(made())  # made on a loop that then closes
    loop.close()
    woken.set()  # (the writer thread wakes nobody, and lives)
    assert woken.is_set()


def test_two_stores_on_one_session_keep_sequences_and_usage_whole(tmp_path: Path) -> None:
    # Two stores behave like two processes: own writer, own open files, one lock on disk.
    first, second = SessionStore(tmp_path / "s"), SessionStore(tmp_path / "s")
    sid = make(first)

    def child(label: str, usage: Usage) -> ChildFinished:
        return ChildFinished(session_id=sid, child_session_id=label, status="completed", usage=usage)

    first.submit(sid, [child("a", Usage(prompt_tokens=10, completion_tokens=5))])
    first.flush(sid)
    second.append(sid, [child("b", Usage(prompt_tokens=1, completion_tokens=1)), tick(sid, "c")])
    first.submit(sid, [child("d", Usage(prompt_tokens=100, completion_tokens=50))])
    first.flush(sid)
    assert [e.sequence for e in first.events(sid)] == [1, 2, 3, 4]
    assert [e.event.kind for e in first.events(sid)] == ["child_end", "child_end", "warning", "child_end"]
    meta = SessionStore(tmp_path / "s").metadata(sid)
    assert meta.event_count == 4 and meta.last_event_type == "child_end"
    assert meta.children_usage.prompt_tokens == 111 and meta.children_usage.completion_tokens == 56


def test_the_writer_thread_ends_when_idle_and_comes_back(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    import zero.sessions._writer as module

    monkeypatch.setattr(module, "IDLE_SECONDS", 0.05)
    sid = make(store)
    store.append(sid, [tick(sid, "x")])
    deadline = time.monotonic() + 5
    while store._writer.busy():  # this store's writer thread (other tests' stores have their own)
        assert time.monotonic() < deadline, "the writer never stopped"
        time.sleep(0.02)
    store.append(sid, [tick(sid, "y")])
    assert labels(store, sid) == ["x", "y"]


def test_the_log_is_fsynced_before_the_metadata_counting_its_events_is_written(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    import zero.sessions._replace as replace
    import zero.sessions._writer as module

    steps: list[str] = []
    real_fsync, real_replace = os.fsync, replace.replace_file

    def fsync(fd: int) -> None:
        steps.append("fsync " + os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace_file(path: str, spare: str, data: bytes, *, exists: bool) -> None:
        steps.append(f"metadata {json.loads(data)['eventCount']}")
        real_replace(path, spare, data, exists=exists)

    sid = make(store)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(module, "replace_file", replace_file)
    store.submit(sid, [tick(sid, "a")])
    store.submit(sid, [tick(sid, "b")])
    store.flush(sid)
    store.flush(sid)  # nothing new: nothing to write
    store.append(sid, [tick(sid, "c")])
    assert steps == ["fsync events.jsonl", "metadata 2", "fsync events.jsonl", "metadata 3"]


def test_sessions_beyond_the_open_limit_are_closed_with_their_metadata_written(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zero.sessions._writer as module

    monkeypatch.setattr(module, "MAX_OPEN", 2)
    sids = [make(store) for _ in range(4)]
    for round_ in range(2):
        for sid in sids:
            store.submit(sid, [RunStarted(session_id=sid, provider="p", model=str(round_), cwd="/")])
    store.metadata(sids[-1])  # the writer is done with them
    evicted = on_disk(store, sids[0])
    assert evicted["eventCount"] == 2 and evicted["status"] == "running"  # written as it was closed
    for sid in sids:
        assert [e.event.model for e in store.events(sid)] == ["0", "1"]  # type: ignore[union-attr]


def test_a_batch_the_full_disk_refuses_is_taken_back_and_the_session_still_says_failed(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "256k") as disk:
        store = SessionStore(disk / "sessions")
        sid = make(store)  # its metadata written once: the next write goes to the spare made with it
        store.submit(sid, [tick(sid, "before")])
        store.written(sid)  # in the log, its metadata not written again
        fill(disk, leave=0)
        store.submit(sid, [tick(sid, "x" * 20_000)])
        with pytest.raises(SessionWriteError, match=rf"^cannot write the session: disk full \({store.path(sid)}/"):
            store.written(sid)
        store.submit(sid, [tick(sid, "after")])  # nothing is written after the gap
        with pytest.raises(SessionWriteError):
            store.flush(sid)
        store.release(sid)
        assert [r["sequence"] for r in raw(store, sid)] == [1] and labels(store, sid) == ["before"]
        meta = SessionStore(disk / "sessions").metadata(sid)  # as another process reads it
        assert meta.status == "failed" and meta.event_count == 1


def test_a_fork_is_held_by_nobody_until_a_run_takes_it(tmp_path: Path) -> None:
    """A fork made by a long-lived process (an editor's agent) was held by it: no other process could resume it."""
    ours = SessionStore(tmp_path / "sessions")
    origin = make(ours)
    ours.append(origin, [say(origin, "hello")])
    fork, _ = fork_session(ours, origin)
    theirs = SessionStore(tmp_path / "sessions")  # another process
    assert not theirs.held(fork.session_id) and theirs.metadata(fork.session_id).status == "pending"
    theirs.acquire(fork.session_id)
    assert ours.held(fork.session_id)
