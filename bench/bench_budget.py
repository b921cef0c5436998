"""Cost budget bench: how much of a cost limit a team spends, and by how much it passes it.

Eight members, the default output caps (gpt-4.1-mini: 8,192 tokens a call), a $0.02 limit, through
`zero swarm run` on the scripted provider: each member lists the folder until the budget stops it, every
call costing what the script says (1,000 prompt + 100 completion tokens: $0.00056). Prints the share of
the limit reached and the overshoot (spent beyond the limit; the documented bound is 0 here, since the
prompt estimate errs high).

python bench/bench_budget.py [--members 8] [--limit 0.02]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ZERO = str(Path(sys.executable).with_name("zero"))

SCRIPT = """
[[turns]]
text = "Looking around."
tool_calls = [{ name = "list_directory" }]
usage = { prompt_tokens = 1000, completion_tokens = 100 }
times = 0
"""


def team(members: int, limit: float) -> str:
    body = "".join(
        f'[[members]]\nname = "m{i}"\nspecialist = "explorer"\nprompt = "look around"\n' for i in range(members)
    )
    return f'name = "bench"\n[budget]\ncost_usd = {limit}\n[scheduler]\nmax_concurrency = {members}\n{body}'


def run(members: int, limit: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "ws").mkdir()
        (root / "ws" / "README.md").write_text("# A folder to look around in\n")
        (root / "team.toml").write_text(team(members, limit))
        (root / "script.toml").write_text(SCRIPT)
        done = subprocess.run(
            [
                ZERO,
                "swarm",
                "run",
                str(root / "team.toml"),
                "--provider",
                "scripted",
                "--script",
                str(root / "script.toml"),
            ]
            + ["--model", "gpt-4.1-mini", "--cwd", str(root / "ws"), "--output-format", "json"]
            + ["--accept-estimate"],  # (its members are meant to spend past the budget)
            capture_output=True,
            text=True,
            env={**os.environ, "ZERO_HOME": str(root / "home"), "XDG_CONFIG_HOME": str(root / "config")},
            check=False,
        )
        if not done.stdout.startswith("{"):
            raise SystemExit(f"zero swarm run exited {done.returncode}: {done.stderr.strip()}")
        result = json.loads(done.stdout)
        spent = float(result["budget"]["used"]["costUsd"])
        calls = int(result["budget"]["used"]["turns"])
    return {"spent": spent, "share": spent / limit, "overshoot": max(0.0, spent - limit), "calls": calls}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--limit", type=float, default=0.02)
    args = parser.parse_args()
    figures = run(args.members, args.limit)
    print(f"{args.members} members, default output caps, a ${args.limit} cost limit:")
    print(f"  spent ${figures['spent']:.5f} in {figures['calls']} model calls")
    print(f"  share of the limit reached: {figures['share']:.1%}")
    print(f"  overshoot: ${figures['overshoot']:.5f} ({figures['overshoot'] / args.limit:.1%} of the limit)")


if __name__ == "__main__":
    main()
