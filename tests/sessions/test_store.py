"""The session store: layout, batches, locking across processes, torn lines, ids."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from zero.errors import SessionError, UsageError
from zero.sessions import SessionMetadata, SessionStore, new_session_id, validate_session_id


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "sessions")


def make(store: SessionStore, **fields: object) -> str:
    sid = new_session_id()
    store.create(SessionMetadata(session_id=sid, cwd="/repo", **fields))
    return sid


def test_a_batch_is_appended_with_contiguous_sequences_and_metadata(store: SessionStore) -> None:
    sid = make(store)
    store.append(sid, [("message", {"role": "user", "content": "hi"})])
    meta = store.append(sid, [("message", {"role": "assistant", "content": "yo"}), ("usage", {"promptTokens": 3})])
    events = store.events(sid)
    assert [e["sequence"] for e in events] == [1, 2, 3]
    assert events[2] == {
        "id": f"{sid}:3",
        "sessionId": sid,
        "sequence": 3,
        "type": "usage",
        "createdAt": events[2]["createdAt"],
        "payload": {"promptTokens": 3},
    }
    assert meta.event_count == 3 and meta.last_event_type == "usage"
    on_disk = json.loads((store.path(sid) / "metadata.json").read_text())
    assert on_disk["sessionId"] == sid and on_disk["eventCount"] == 3 and on_disk["lastEventType"] == "usage"
    assert set(on_disk["usage"]) == {
        "promptTokens",
        "completionTokens",
        "totalTokens",
        "cachedTokens",
        "costUsd",
        "calls",
    }
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
    store.append(sid, [("message", {"role": "user", "content": "one"}), ("message", {"content": "two"})])
    log = store.path(sid) / "events.jsonl"
    with open(log, "ab") as f:
        f.write(b'{"id": "x:3", "sequence": 3, "type": "mess')  # the process died mid-write
    assert [e["sequence"] for e in store.events(sid)] == [1, 2]
    store.append(sid, [("message", {"role": "user", "content": "three"})])
    events = store.events(sid)
    assert [e["sequence"] for e in events] == [1, 2, 3] and events[2]["payload"]["content"] == "three"
    assert log.read_bytes().count(b"\n") == 3


def test_a_corrupt_line_in_the_middle_is_an_error_naming_the_line(store: SessionStore) -> None:
    sid = make(store)
    store.append(sid, [("a", {}), ("b", {}), ("c", {})])
    log = store.path(sid) / "events.jsonl"
    lines = log.read_text().splitlines()
    lines[1] = "{not json"
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(SessionError, match=r"events.jsonl: line 2 is not valid JSON"):
        store.events(sid)


def test_secrets_are_redacted_before_they_reach_disk(store: SessionStore) -> None:
    sid = make(store)
    store.append(sid, [("tool_result", {"output": "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz123"})])
    assert "sk-proj" not in (store.path(sid) / "events.jsonl").read_text()


WRITER = """
import sys
from zero.sessions import SessionStore
store, sid, name = SessionStore(sys.argv[1]), sys.argv[2], sys.argv[3]
for i in range(25):
    store.append(sid, [("batch", {"writer": name, "i": i, "part": p}) for p in range(4)])
"""


def test_sixteen_processes_appending_at_once_leave_contiguous_unmixed_batches(store: SessionStore) -> None:
    sid = make(store)
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(store.root), sid, f"w{n}"]) for n in range(16)]
    assert [p.wait(timeout=60) for p in procs] == [0] * 16
    events = store.events(sid)
    assert [e["sequence"] for e in events] == list(range(1, 16 * 25 * 4 + 1))
    for start in range(0, len(events), 4):
        batch = [e["payload"] for e in events[start : start + 4]]
        assert [p["part"] for p in batch] == [0, 1, 2, 3]
        assert len({(p["writer"], p["i"]) for p in batch}) == 1
    assert store.metadata(sid).event_count == 1600


def test_threads_appending_at_once_are_group_committed_whole_and_in_order(store: SessionStore) -> None:
    sid = make(store)

    def writer(name: str) -> None:
        for i in range(20):
            store.append(sid, [("batch", {"writer": name, "i": i, "part": p}) for p in range(3)])

    threads = [threading.Thread(target=writer, args=(f"t{n}",)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = store.events(sid)
    assert [e["sequence"] for e in events] == list(range(1, 8 * 20 * 3 + 1))
    for start in range(0, len(events), 3):
        batch = [e["payload"] for e in events[start : start + 3]]
        assert [p["part"] for p in batch] == [0, 1, 2] and len({(p["writer"], p["i"]) for p in batch}) == 1
    for n in range(8):  # each writer's batches stay in the order it wrote them
        mine = [e["payload"]["i"] for e in events if e["payload"]["writer"] == f"t{n}" and e["payload"]["part"] == 0]
        assert mine == list(range(20))
    assert store.metadata(sid).event_count == 480


def test_appending_to_a_missing_session_is_a_session_error(store: SessionStore) -> None:
    with pytest.raises(SessionError, match="session nope not found"):
        store.append("nope", [("x", {})])


def test_list_returns_sessions_newest_first_and_skips_damaged_ones(store: SessionStore) -> None:
    first = make(store, title="first")
    second = make(store, title="second")
    store.append(second, [("x", {})])
    old = store.path(first) / "metadata.json"  # make "first" older than any clock tick could
    old.write_text(old.read_text().replace(store.metadata(first).updated_at, "2020-01-01T00:00:00.000Z"))
    (store.root / "broken").mkdir()
    (store.root / "broken" / "metadata.json").write_text("{")
    assert [m.session_id for m in store.list()] == [second, first]


def test_metadata_is_replaced_whole_and_readers_never_see_a_partial_file(store: SessionStore) -> None:
    sid = make(store, title="x" * 50)
    stop = threading.Event()
    seen: list[int] = []

    def reader() -> None:  # another process's view: the file on disk, read while it is replaced
        while not stop.is_set():
            seen.append(json.loads((store.path(sid) / "metadata.json").read_bytes())["eventCount"])

    thread = threading.Thread(target=reader)
    thread.start()
    for i in range(200):
        store.append(sid, [("tick", {"i": i})])
    stop.set()
    thread.join()
    assert len(seen) > 10 and seen == sorted(seen)  # always whole JSON, never going back
    assert json.loads((store.path(sid) / "metadata.json").read_text())["eventCount"] == 200


def test_metadata_falls_back_to_a_renamed_temp_file_where_names_cannot_be_swapped(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zero.sessions._replace as replace

    monkeypatch.setattr(replace, "_renameat2", None)
    sid = make(store)
    for i in range(3):
        store.append(sid, [("tick", {"i": i})])
    assert json.loads((store.path(sid) / "metadata.json").read_text())["eventCount"] == 3
    assert sorted(p.name for p in store.path(sid).iterdir()) == ["events.jsonl", "metadata.json"]
