"""Worktree benchmark: what isolating a writing member costs on a repository of 20,000 files.

One cycle is what a member's life adds: a snapshot of the caller's tree (with a few uncommitted edits),
its worktree made from it, finished (nothing to commit) and released. A released worktree goes to the
repository's pool (``$ZERO_HOME/worktrees/.pool``), so only the first cycle writes the whole tree; the
next ones make theirs from the pool and rewrite what differs (the first cycle is printed apart). Each
step is timed; the median of 5 cycles is printed, with the time the same disk took to write the same
20,000 files with plain Python just before each (the floor no new checkout goes under; on a shared
machine it moves with the load). Then a 20-member team's set-up: one snapshot and 20 worktrees made at
once from worker threads, as a team starts its writers, twice: the first run (one worktree in the pool)
and the next (all 20 from the pool). Releasing moves the folder to the pool (or, past its size, to the
trash) and unregisters it; deleting the trash (``sweep``, at the end of a run) is timed apart.

Parallel checkout (``checkout.workers``) is compared: 1 (git's default) against one per core (Zero's
choice). The load average is printed too: on a shared machine the figures move with it.

    python bench/bench_worktree.py                 # 20,000 files, 5 cycles, 20 members
    python bench/bench_worktree.py --files 5000 --members 8
    python bench/bench_worktree.py --dir /some/disk   # where the repository and $ZERO_HOME go
    python bench/bench_worktree.py --dir /dev/shm     # in memory: the code's cost, the disk's left out
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import anyio
import anyio.to_thread

from zero.tools import Worktrees, take_snapshot
from zero.tools import worktrees as worktrees_module


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def files(count: int) -> dict[str, str]:
    """``count`` source-like files of 100 B to 4 KB, 100 to a folder, three folders deep."""
    return {
        f"pkg{i % 40}/mod{i % 5}/sub{(i // 100) % 50}/file{i}.py": f"# module {i}\n" + "x = 1\n" * (10 + i % 600)
        for i in range(count)
    }


def write(root: Path, content: dict[str, str]) -> float:
    """Write ``content`` under ``root``; the seconds it took."""
    start = time.perf_counter()
    for name, text in content.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return time.perf_counter() - start


def make_repo(root: Path, count: int) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    content = files(count)
    write(repo, content)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-q", "-m", "First")
    names = list(content)
    for name in names[:: count // 10][:10]:  # the caller's uncommitted edits: ten changed, five new files
        (repo / name).write_text("edited, not committed\n")
    for n in range(5):
        (repo / f"new{n}.py").write_text("untracked\n")
    return repo


def cycle(repo: Path, home: Path, root: str, content: dict[str, str]) -> dict[str, float]:
    """One member's worktree made from a fresh snapshot, finished and released; each step's seconds, and
    the floor measured just before (the disk's speed moves with the machine's load)."""
    # Nothing is deleted until the end: on ext4, files made within a minute of many deletions cost 25
    # times as much each (see bench_swarm.py), which would charge one cycle for the last one's clean-up.
    times: dict[str, float] = {"floor (plain write)": write(home.parent / f"floor-{root}", content)}
    start = time.perf_counter()
    snapshot = take_snapshot(repo)
    times["snapshot"] = time.perf_counter() - start
    wt = Worktrees.create(snapshot, root=root, home=home)
    start = time.perf_counter()
    tree = wt.open("worker")
    times["create"] = time.perf_counter() - start
    assert (tree.path / "new0.py").read_text() == "untracked\n"
    start = time.perf_counter()
    wt.finish("worker", "bench", "completed")
    times["finish"] = time.perf_counter() - start
    start = time.perf_counter()
    assert wt.release("worker")
    times["remove"] = time.perf_counter() - start
    times["member"] = times["snapshot"] + times["create"] + times["finish"] + times["remove"]
    times["create / floor"] = times["create"] / times["floor (plain write)"]
    return times


async def team_setup(repo: Path, home: Path, members: int, root: str) -> tuple[float, Worktrees]:
    """One snapshot, then ``members`` worktrees made at once from worker threads; the seconds it took."""
    start = time.perf_counter()
    wt = Worktrees.create(await anyio.to_thread.run_sync(take_snapshot, repo), root=root, home=home)
    async with anyio.create_task_group() as tg:
        for n in range(members):
            tg.start_soon(anyio.to_thread.run_sync, wt.open, f"member-{n}")
    return time.perf_counter() - start, wt


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--dir", type=Path, default=None, help="where the repository and $ZERO_HOME go")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="zero-bench-worktree-", dir=args.dir))
    try:
        home = root / "home"
        print(f"{os.cpu_count()} cores, load {load()}; making a repository of {args.files:,} files in {root}")
        repo = make_repo(root, args.files)
        content = files(args.files)

        chosen = worktrees_module._CHECKOUT
        settings = (("1 (git's default)", ("-c", "checkout.workers=1")), ("one per core", chosen))
        for k, (label, setting) in enumerate(settings):
            worktrees_module._CHECKOUT = setting
            shutil.rmtree(home / "worktrees" / ".pool", ignore_errors=True)  # each setting starts cold
            runs = [cycle(repo, home, f"cycle{k * (args.cycles + 1) + n}", content) for n in range(args.cycles + 1)]
            first = runs.pop(0)
            print(f"checkout.workers = {label}: load {load()}")
            print(f"  the first cycle (the pool empty): create {first['create']:.3f} s, member {first['member']:.3f} s")
            print(f"  from the pool, median of {args.cycles} cycles:")
            for step in runs[0]:
                values = [run[step] for run in runs]
                spread = f"(min {min(values):.3f}, max {max(values):.3f})"
                unit = "" if "/" in step else " s"
                print(f"  {step:<20} {statistics.median(values):6.3f}{unit:<2}   {spread}")
        worktrees_module._CHECKOUT = chosen

        start = time.perf_counter()
        for n in range(2 * (args.cycles + 1)):
            Worktrees.load(root=f"cycle{n}", home=home).sweep()
        swept = time.perf_counter() - start
        print(f"  the released worktrees' folders that did not fit the pool deleted afterwards: {swept:.2f} s")

        n = args.members
        for run in ("first run, one in the pool", "next run, all from the pool"):
            seconds, wt = anyio.run(team_setup, repo, home, n, run.split(",")[0].replace(" ", "-"))
            print(f"\n{n}-member set-up, {run} (one snapshot, {n} worktrees at once): {seconds:.2f} s, load {load()}")
            start = time.perf_counter()
            for member in wt.members:
                wt.release(member)
            released = time.perf_counter() - start
            start = time.perf_counter()
            wt.sweep()
            swept = time.perf_counter() - start
            print(f"{n} worktrees released (to the pool) in {released:.2f} s; the others deleted in {swept:.2f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
