"""SIGKILL a running team at random moments, then check what it left: every session reads, none is
left pending or running, and no tool side effect happened without its call in the log.

    python bench/kill_check.py            # 50 kills
    python bench/kill_check.py --kills 200 --seed 7

Each member appends a line to its own file with ``bash`` on every turn, so a file with more lines
than the member's logged ``bash`` calls would be a side effect without its record.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from zero.sessions import FileSessionStore

MEMBERS = ("a", "b", "c", "d")
TEAM = 'name = "victims"\n[scheduler]\nmax_concurrency = 4\n' + "".join(
    f'[[members]]\nname = "{m}"\nspecialist = "worker"\nprompt = "Work."\nmax_turns = 10000\n' for m in MEMBERS
)
SCRIPT = "".join(
    f"""[[turns]]
match = {{ system = 'You are "{m}"' }}
times = 0
delay = 0.005
text = "Working."
tool_calls = [{{ name = "bash", arguments = {{ command = "echo x >> effects-{m}.log" }} }}]
"""
    for m in MEMBERS
)


def one_kill(root: Path, zero: str, after: float) -> dict[str, int]:
    home, workspace = root / "home", root / "ws"
    workspace.mkdir(parents=True)
    (root / "team.toml").write_text(TEAM)
    (root / "script.toml").write_text(SCRIPT)
    env = {**os.environ, "ZERO_HOME": str(home)}
    proc = subprocess.Popen(
        [zero, "swarm", "run", str(root / "team.toml"), "--provider", "scripted"]
        + ["--script", str(root / "script.toml"), "--cwd", str(workspace), "--no-live"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    time.sleep(after)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = FileSessionStore(home / "sessions")
    figures = {"sessions": 0, "unreadable": 0, "left_running": 0, "effects": 0, "unrecorded_effects": 0}
    calls: dict[str, int] = {}
    for meta in store.list():  # reading repairs what the dead process left
        figures["sessions"] += 1
        try:
            events = store.events(meta.session_id)
        except Exception:
            figures["unreadable"] += 1
            continue
        figures["left_running"] += meta.status in ("pending", "running")
        bash = sum(1 for e in events if e.event.kind == "tool_call" and e.event.name == "bash")
        calls[meta.member_name] = calls.get(meta.member_name, 0) + bash
    for m in MEMBERS:
        log = workspace / f"effects-{m}.log"
        lines = len(log.read_text().splitlines()) if log.exists() else 0
        figures["effects"] += lines
        figures["unrecorded_effects"] += max(0, lines - calls.get(m, 0))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=2.5, help="kill at a random moment up to this")
    args = parser.parse_args()
    zero = shutil.which("zero") or str(Path(sys.executable).with_name("zero"))
    rng = random.Random(args.seed)
    totals: dict[str, int] = {}
    bad = 0
    for i in range(args.kills):
        with tempfile.TemporaryDirectory(prefix="zero-kill-") as tmp:
            after = rng.uniform(0.05, args.max_seconds)
            figures = one_kill(Path(tmp), zero, after)
        for key, value in figures.items():
            totals[key] = totals.get(key, 0) + value
        broken = figures["unreadable"] + figures["left_running"] + figures["unrecorded_effects"]
        bad += broken > 0
        if broken:
            print(f"kill {i + 1} at {after:.2f} s: {figures}")
    print(f"kills: {args.kills} (at random moments up to {args.max_seconds} s after start)")
    print(
        f"sessions read afterwards: {totals['sessions']}, unreadable: {totals['unreadable']}, "
        f"left pending or running: {totals['left_running']}"
    )
    print(f"side effects: {totals['effects']}, without their call in the log: {totals['unrecorded_effects']}")
    print(f"kills that left something wrong: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
