"""Sessions benchmark: 10,000 sessions on disk, and how fast ``zero sessions`` lists and shows them.

The sessions are 2,500 teams of a team session and three members, each member with a conversation
of 20 events, written in the store's own format. We time, as a user runs them (a fresh `zero`
process each, median of 5): `zero sessions list` (the default 50 rows), `zero sessions list
--limit 0 --json` (all of them), and `zero sessions show ID` of one member, first with no index
and then with the index the first listing leaves.

    python bench/bench_sessions.py            # 10,000 sessions
    python bench/bench_sessions.py --teams 250
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from zero.agent import (
    MessageAdded,
    RunFinished,
    RunStarted,
    TeamFinished,
    TeamMember,
    TeamStarted,
    ToolCall,
    ToolCallStarted,
    ToolFinished,
    Usage,
    UsageUpdated,
)
from zero.sessions import FileSessionStore, SessionMetadata, apply_event, record_of, session_tree

ZERO = shutil.which("zero") or str(Path(sys.executable).with_name("zero"))


def member_events(sid: str) -> list[object]:
    events: list[object] = [
        RunStarted(session_id=sid, provider="openai", model="gpt-4.1-mini", cwd="/tmp/ws"),
        MessageAdded(session_id=sid, role="system", content="You are the explorer. " * 20),
        MessageAdded(session_id=sid, role="user", content="Map the src folder."),
    ]
    for turn in range(4):
        call = ToolCall(id=f"call_{turn}", name="read_file", arguments={"path": f"src/module_{turn}.py"})
        events += [
            MessageAdded(session_id=sid, role="assistant", content=f"Reading module {turn}.", tool_calls=(call,)),
            UsageUpdated(session_id=sid, model="gpt-4.1-mini", prompt_tokens=1200, completion_tokens=40),
            ToolCallStarted(session_id=sid, id=call.id, name=call.name, arguments=call.arguments),
            ToolFinished(session_id=sid, tool_call_id=call.id, name=call.name, status="ok", output="x = 1\n" * 40),
        ]
    events.append(MessageAdded(session_id=sid, role="assistant", content="src holds four modules."))
    usage = Usage(prompt_tokens=6000, completion_tokens=200, calls=5)
    events.append(RunFinished(session_id=sid, status="completed", turns=5, usage=usage))
    return events


def write_session(root: Path, meta: SessionMetadata, events: list[object]) -> None:
    folder = root / meta.session_id
    folder.mkdir(parents=True)
    stamp = meta.created_at
    lines = []
    for sequence, event in enumerate(events, 1):
        apply_event(meta, event)  # type: ignore[arg-type]
        lines.append(json.dumps(record_of(meta.session_id, sequence, stamp, event), separators=(",", ":")))  # type: ignore[arg-type]
    meta.event_count = len(events)
    (folder / "events.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "metadata.json").write_text(json.dumps(meta.to_json()))


def generate(root: Path, teams: int) -> str:
    member_id = ""
    for t in range(teams):
        team_id = f"team_20261201{t:06d}_{t:012x}"
        members = [f"member_20261201{t:06d}_{t * 4 + i:012x}" for i in range(3)]
        team = SessionMetadata(session_id=team_id, session_kind="team", title=f"team {t}", root_session_id=team_id)
        write_session(
            root,
            team,
            [
                TeamStarted(
                    session_id=team_id,
                    team="t",
                    members=tuple(
                        TeamMember(name=f"m{i}", session_id=m, specialist="explorer") for i, m in enumerate(members)
                    ),
                ),
                TeamFinished(session_id=team_id, status="completed"),
            ],
        )
        for i, member_id in enumerate(members):
            meta = SessionMetadata(
                session_id=member_id,
                session_kind="member",
                title=f"team {t}: m{i}",
                parent_session_id=team_id,
                root_session_id=team_id,
                member_name=f"m{i}",
                specialist="explorer",
                depth=1,
                cwd="/tmp/ws",
            )
            write_session(root, meta, member_events(member_id))
    return member_id


def timed(args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([ZERO, *args], env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--teams", type=int, default=2500, help="each is 4 sessions (default 2,500: 10,000)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="zero-bench-sessions-") as home:
        started = time.perf_counter()
        member = generate(Path(home) / "sessions", args.teams)
        print(f"{args.teams * 4:,} sessions written in {time.perf_counter() - started:.1f} s")
        env = {**os.environ, "ZERO_HOME": home}
        for index in (False, True):
            results = {}
            for label, command in (
                ("sessions list", ["sessions", "list"]),
                ("sessions list --limit 0 --json", ["sessions", "list", "--limit", "0", "--json"]),
                ("sessions show ID", ["sessions", "show", member]),
            ):
                runs = []
                for _ in range(args.runs):
                    if not index:
                        for name in (".index.json",):
                            (Path(home) / "sessions" / name).unlink(missing_ok=True)
                    runs.append(timed(command, env))
                results[label] = statistics.median(runs)
            print("with the index:" if index else "no index (rebuilt each time):")
            for label, seconds in results.items():
                print(f"  zero {label:<32} {seconds * 1000:8.0f} ms")
        print(f"  zero --help                             {timed(['--help'], env) * 1000:8.0f} ms (start-up)")
        store = FileSessionStore(Path(home) / "sessions")
        team = store.metadata(member).root_session_id
        runs = []
        for _ in range(args.runs):
            started = time.perf_counter()
            session_tree(store, team)
            runs.append(time.perf_counter() - started)
        print(
            f"  one team's tree (a run's end totals)     {statistics.median(runs) * 1000:8.0f} ms (in-process, indexed)"
        )


if __name__ == "__main__":
    main()
