"""Swarm benchmark: Zero running a team of N members vs the bare `openai` SDK making the same calls.

A loopback server (its own process) speaks the OpenAI streaming format and takes a fixed 100 ms per
model call. Each of N independent members makes 3 model calls (two tool calls, then an answer),
with max_concurrency = N. The baseline streams the same 3 x N calls with the bare SDK, N chains at
once: the members' system prompt and tool definitions, the two tool calls answered with the same
folder listing (`--minimal-baseline`: a one-line prompt and no tools instead). Each side runs in a
fresh process; we report wall time, CPU ms per model call (user + system of the run itself,
start-up excluded) and the process's peak RSS: the median of 3 runs, taken in turns (zero, sdk,
zero, ...). Where there are two cores or more, the server runs on the last one and each measured
process on the first, so that neither side's figures include the server competing for its core.

Every run's files stay on disk until the whole benchmark ends: deleting hundreds of session
folders leaves the file system busy for seconds (ext4 with online discard here), and a run
started in that window pays ~0.5 ms instead of ~0.02 ms for each file it creates.

    python bench/bench_swarm.py                     # N = 1, 10, 50, 200: Zero, the SDK (bare and on Zero's
                                                    # footing) and the HTTP floor side by side
    python bench/bench_swarm.py --n 200 --n 1000 --n 2000   # any N, several in one invocation
    python bench/bench_swarm.py --n 10000 --side zero   # one side only (a failed member fails the bench)
    python bench/bench_swarm.py --minimal-baseline  # against the lightest calls the server answers
    python bench/bench_swarm.py --n 200 --live      # the live view on vs --no-live (issue 5)
    python bench/bench_swarm.py --home /dev/shm     # sessions in memory: the file system's state left out
    python bench/bench_swarm.py --executor ray --n 200  # in-process beside --executor ray on a local cluster
                                                    # (a head and two nodes on 127.0.0.1, the members spread
                                                    # over the two): CPU per call of every process, wall
                                                    # overhead, ledger round trips per call

The file system's state shows in Zero's figures (the baseline writes no files): on ext4, files created
within a minute or so of many deletions (the previous invocation's, say) cost ~0.5 ms of kernel time
each instead of ~0.02 ms, while the allocator skips the inodes freed just before (`perf` shows
`recently_deleted` and `find_inode_bit`). Zero creates five per session (its folder, log, lease,
metadata and the metadata's spare). The `sys` columns show it; leave a minute between invocations, or
use `--home /dev/shm` to compare the CPU of the code alone.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from zero.heap import settle_collector

ROOT = Path(__file__).resolve().parents[1]
CALL_SECONDS = 0.1
SIDES = ("zero", "sdk", "sdk-equal", "floor")


# -- the server (its own process) ---------------------------------------------------


def pin(core: int) -> None:
    """Keep this process on one core, where the machine has two or more."""
    cores = os.cpu_count() or 1
    if cores >= 2 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core % cores})


def serve() -> None:
    pin(-1)
    sys.path.insert(0, str(ROOT / "tests"))
    from support.llm_server import LLMServer, Reply, openai_reply

    first: list[float] = []  # when the first request since the parent last asked came (time.time())

    def respond(request: dict[str, Any]) -> Reply:
        if not first:
            first.append(time.time())
        done = sum(m["role"] == "assistant" for m in request["messages"])
        if done < 2:
            reply = openai_reply(
                "Looking around.", [(f"call_{done}", "list_directory", {"path": "."})], usage=(1200, 40)
            )
        else:
            reply = openai_reply("Here is what I found: the folder holds a README and a src package.", usage=(1400, 30))
        reply.delay = CALL_SECONDS
        return reply

    with LLMServer(respond) as server:
        print(server.url, flush=True)
        for _ in sys.stdin:  # the parent asks after each run (and closes our stdin when it is done)
            print(first[0] if first else "nan", flush=True)
            first.clear()


# -- the two workers (each in a fresh process) --------------------------------------


def bench_team(n: int, tmp: Path, *, spread: bool = False) -> tuple[Path, Any, Any, Any]:
    """The workspace, plan, specialists and prices of N members (``spread``: over Ray nodes node_a and node_b)."""
    from zero.agent import PriceTable
    from zero.orchestrator import build_plan
    from zero.specialists import SpecialistRegistry

    ws = tmp / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "README.md").write_text("# bench\n")
    members = "".join(
        f'[[members]]\nname = "m{i}"\nspecialist = "explorer"\nprompt = "Map the folder ({i})."\n'
        + (f"resources = {{ node_{'ab'[i % 2]} = 1 }}\n" if spread else "")
        for i in range(n)
    )
    team = tmp / "team.toml"
    team.write_text(
        f'name = "bench"\n[defaults]\nmodel = "gpt-4.1-mini"\n[scheduler]\nmax_concurrency = {n}\n{members}'
    )
    registry = SpecialistRegistry.load(ws)
    prices = PriceTable.builtin()
    plan = build_plan(team, registry, provider="openai", model="gpt-4.1-mini", permission_mode="auto", prices=prices)
    return ws, plan, registry, prices


def zero_worker(n: int, url: str, live: bool) -> dict[str, float]:
    import anyio

    from zero.agent.providers.openai import OpenAIProvider
    from zero.orchestrator import TeamRunner
    from zero.sessions import FileSessionStore
    from zero.specialists import AgentContext
    from zero.tools import Workspace
    from zero.tools.builtin import builtin_tools

    tmp = os.environ["ZERO_HOME"]  # this run's own folder (see measure)
    ws, plan, registry, prices = bench_team(n, Path(tmp))
    provider = OpenAIProvider(api_key="sk-bench", base_url=url)
    store = FileSessionStore(Path(tmp) / "sessions")
    ctx = AgentContext(
        store=store,
        registry=registry,
        workspace=Workspace([ws]),
        provider=provider,
        model="gpt-4.1-mini",
        providers=lambda name: provider,
        prices=prices,
    )
    settle_collector()  # as `zero swarm run` does once the team is planned (cli.common.freeze_startup_heap)
    devnull = open(os.devnull, "w")  # noqa: SIM115 - the live view draws into it

    done: list[Any] = []  # (not main's return value: see ran)

    async def main() -> None:
        runner = TeamRunner(plan, ctx)
        if live:
            from rich.console import Console

            from zero.orchestrator.live import draw_live
            from zero.orchestrator.view import TeamTree, TreeNode

            tree = TeamTree(TreeNode(session_id=runner.session_id, name=plan.name, kind="team", status="running"))
            console = Console(file=devnull, force_terminal=True, width=120)
            async with anyio.create_task_group() as tg:
                tg.start_soon(draw_live, tree, runner.events(), console)
                result = await runner.run()
        else:
            result = await runner.run()
        await provider.aclose()
        done.append(result)

    times0, wall0 = os.times(), time.perf_counter()
    result = ran(main, done)
    times, wall = os.times(), time.perf_counter() - wall0
    failed = {(m.status, m.reason) for m in result.members if m.status != "completed"}
    assert result.status == "completed", failed
    events = sum(1 for _ in store.root.glob("*/events.jsonl"))
    # What a member sent: the baseline makes the very same calls.
    first = store.events(result.members[0].session_id)[1].event
    assert first.kind == "message" and first.role == "system"
    tools = [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in builtin_tools()
        if t.name in registry.specialists["explorer"].tools
    ]
    pool = provider._new_pool()  # the headers its calls send
    headers = {k: v for k, v in pool.headers.items() if k.lower() not in ("accept-encoding", "connection")}
    (Path(tmp) / "payload.json").write_text(json.dumps({"system": first.content, "tools": tools, "headers": headers}))
    return {"wall": wall, **cpu_of(times0, times), "sessions": events}


def ran(main: Callable[[], Awaitable[None]], done: list[Any]) -> Any:
    """What ``main`` put in ``done``, run as `zero swarm run` runs a team: its coroutine returns an exit code,
    not the team's result. (A coroutine's return value is in its task's repr, which asyncio's runner formats as
    it puts back the SIGINT handler: the whole TeamResult, 40 ms at N=2,000, counted as the run's CPU.)"""
    import anyio

    anyio.run(main)
    return done[0]


class BenchContext:
    """What a Ray node's member host runs its members with: the bench server as the provider (pickled with this
    script's classes, by value)."""

    def __init__(self, url: str, ws: Path, registry: Any, prices: Any):
        self.url, self.ws, self.registry, self.prices = url, ws, registry, prices

    def __call__(self, store: Any) -> Any:
        import contextlib

        from zero.agent.providers.openai import OpenAIProvider
        from zero.specialists import AgentContext
        from zero.tools import Workspace

        @contextlib.asynccontextmanager
        async def opened() -> Any:
            provider = OpenAIProvider(api_key="sk-bench", base_url=self.url)
            yield AgentContext(
                store=store,
                registry=self.registry,
                workspace=Workspace([self.ws]),
                provider=provider,
                model="gpt-4.1-mini",
                providers=lambda name: provider,
                prices=self.prices,
            )
            await provider.aclose()

        return opened()


def ray_worker(n: int, url: str, address: str) -> dict[str, float]:
    """The same team as ``zero_worker``'s, on the cluster at ``address``: its members on nodes node_a and node_b,
    the CPU of every process of the cluster counted too."""

    from zero.orchestrator import TeamRunner
    from zero.orchestrator.ray_executor import RayExecutor, connect, start_writer
    from zero.tools import Redactor

    tmp = Path(os.environ["ZERO_HOME"])
    ws, plan, registry, prices = bench_team(n, tmp, spread=True)
    connect(address)
    store = start_writer(tmp / "sessions", Redactor())
    opener = BenchContext(url, ws, registry, prices)

    done: list[Any] = []

    async def main() -> None:
        async with opener(store) as ctx:
            async with RayExecutor(ctx, opener, store) as executor:
                executor.warm(plan)
                result = await TeamRunner(plan, ctx, executor=executor).run()
                trips = await executor.ledger_stats()
                cluster = cluster_cpu()  # before the hosts end (their CPU then goes to their raylet's children's)
            done.append((result, trips, cluster))

    cluster0, times0, wall0 = cluster_cpu(), os.times(), time.perf_counter()
    result, trips, cluster1 = ran(main, done)
    times, wall = os.times(), time.perf_counter() - wall0
    failed = {(m.status, m.reason) for m in result.members if m.status != "completed"}
    assert result.status == "completed", failed
    own = cpu_of(times0, times)
    return {
        "wall": wall,
        **own,
        "cpu": own["cpu"] + cluster1 - cluster0,
        "trips": trips["roundTrips"] / (3 * n),
        "requests": trips["requests"] / (3 * n),
    }


def cluster_cpu() -> float:
    """CPU seconds of every process of the bench's Ray cluster (its files under RAY_TMPDIR) and their workers."""
    marker = os.environ["RAY_TMPDIR"].encode()
    stats: dict[int, tuple[int, float]] = {}  # pid: its parent, its CPU seconds
    ours: set[int] = set()
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        stats[int(entry)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / tick)
        if marker in command:
            ours.add(int(entry))
    total = 0.0
    for pid, (_, cpu) in stats.items():
        chain = pid
        while chain in stats and chain not in ours and chain > 1:
            chain = stats[chain][0]
        if chain in ours:
            total += cpu
    return total


MINIMAL = {"system": "You map folders.", "tools": []}


def sdk_worker(n: int, url: str, payload: dict[str, Any], equal: bool = False) -> dict[str, float]:
    """The same 3 x N calls as Zero's members make (their system prompt and tools, the tool calls
    answered with the folder's listing), written with the bare SDK as its docs show. With the
    MINIMAL payload, the lightest calls that get the same replies: a one-line prompt, no tools. ``equal``:
    on Zero's footing, with its retries, Zero's collector settings and its layout of 32 pools (a client each)."""
    import anyio
    import openai

    ws = Path(os.environ["ZERO_HOME"]) / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "README.md").write_text("# bench\n")
    clients = [
        openai.AsyncOpenAI(api_key="sk-bench", base_url=url, max_retries=3 if equal else 0)
        for _ in range(32 if equal else 1)
    ]

    def list_directory() -> str:
        return "\n".join(sorted(e.name + ("/" if e.is_dir() else "") for e in os.scandir(ws)))

    async def chain(i: int) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": payload["system"]},
            {"role": "user", "content": f"Map the folder ({i})."},
        ]
        client = clients[hash(f"agent_{i}") % len(clients)]
        for _ in range(3):
            stream = await client.chat.completions.create(
                model="gpt-4.1-mini",
                messages=messages,  # type: ignore[arg-type]
                tools=payload["tools"] or openai.omit,
                stream=True,
                stream_options={"include_usage": True},
            )
            text, calls = "", {}
            async for chunk in stream:
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    for call in choice.delta.tool_calls or []:
                        entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                        entry["id"] = call.id or entry["id"]
                        if call.function:
                            entry["name"] += call.function.name or ""
                            entry["arguments"] += call.function.arguments or ""
            tool_calls = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls.values()
            ]
            messages.append(
                {"role": "assistant", "content": text or None, **({"tool_calls": tool_calls} if tool_calls else {})}
            )
            for c in calls.values():
                json.loads(c["arguments"] or "{}")
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": list_directory()})
        assert text.startswith("Here is what I found"), text  # two tool calls, then the answer

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(chain, i)
        for client in clients:
            await client.close()

    if equal:
        settle_collector()  # (Zero's collector settings: the same footing)
    times0, wall0 = os.times(), time.perf_counter()
    anyio.run(main)
    return {"wall": time.perf_counter() - wall0, **cpu_of(times0, os.times())}


def floor_worker(n: int, url: str, payload: dict[str, Any]) -> dict[str, float]:
    """The HTTP floor: the same 3 x N calls with Zero's requests (its headers, its messages as its adapter writes
    them, its tools, its stream options and output cap) on the HTTP stack Zero uses (httpx2 on anyio, 32
    pools, each agent's calls in one), the SSE lines parsed with ``json.loads`` and nothing else: no
    session, no events, no redaction. What the server's bytes cost, and the bar Zero is held to."""
    import anyio
    import httpx2

    ws = Path(os.environ["ZERO_HOME"]) / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "README.md").write_text("# bench\n")
    tools = payload["tools"]
    headers = payload.get("headers") or {"Authorization": "Bearer sk-bench", "Accept": "text/event-stream"}
    timeout = httpx2.Timeout(600.0, connect=5.0)
    limits = httpx2.Limits(max_connections=250, max_keepalive_connections=100)
    pools = [httpx2.AsyncClient(base_url=url, headers=headers, timeout=timeout, limits=limits) for _ in range(32)]
    calls_at_once = anyio.Semaphore(256)  # as Zero's adapter: at most 256 calls under way

    def list_directory() -> str:
        return "\n".join(sorted(e.name + ("/" if e.is_dir() else "") for e in os.scandir(ws)))

    async def chain(i: int) -> None:
        pool = pools[hash(f"agent_{i}") % 32]
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": payload["system"]},
            {"role": "user", "content": f"Map the folder ({i})."},
        ]
        for _ in range(3):
            body = {"model": "gpt-4.1-mini", "messages": messages, "stream": True,
                    "stream_options": {"include_usage": True}, "max_tokens": 8192}  # fmt: skip
            if tools:
                body |= {"tools": tools, "tool_choice": "auto"}
            text, calls = "", {}
            async with calls_at_once, pool.stream("POST", "chat/completions", content=json.dumps(body).encode()) as r:
                async for line in r.aiter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    for choice in json.loads(line[6:]).get("choices") or ():
                        delta = choice.get("delta") or {}
                        text += delta.get("content") or ""
                        for call in delta.get("tool_calls") or ():
                            entry = calls.setdefault(call["index"], {"id": "", "name": "", "arguments": ""})
                            entry["id"] = call.get("id") or entry["id"]
                            function = call.get("function") or {}
                            entry["name"] += function.get("name") or ""
                            entry["arguments"] += function.get("arguments") or ""
            done = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls.values()]  # fmt: skip
            messages.append({"role": "assistant", "content": text, **({"tool_calls": done} if done else {})})
            for c in calls.values():
                json.loads(c["arguments"] or "{}")
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": list_directory()})
        assert text.startswith("Here is what I found"), text

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(chain, i)
        for pool in pools:
            await pool.aclose()

    settle_collector()  # (Zero's collector settings: the same footing)
    times0, wall0 = os.times(), time.perf_counter()
    anyio.run(main)
    return {"wall": time.perf_counter() - wall0, **cpu_of(times0, os.times())}


def cpu_of(before: os.times_result, after: os.times_result) -> dict[str, float]:
    """CPU seconds of this process between two ``os.times()``: user, system (the kernel's work for it:
    sockets, files) and their sum."""
    user, system = after.user - before.user, after.system - before.system
    return {"cpu": user + system, "user": user, "sys": system}


def worker(kind: str, n: int, url: str, live: bool, payload: str | None, address: str = "") -> None:
    pin(0)
    calls = json.loads(Path(payload).read_text()) if payload else MINIMAL
    if kind == "ray":
        result = ray_worker(n, url, address)
    elif kind == "zero":
        result = zero_worker(n, url, live)
    elif kind == "floor":
        result = floor_worker(n, url, calls)
    else:
        result = sdk_worker(n, url, calls, equal=kind == "sdk-equal")
    result["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


# -- the parent ---------------------------------------------------------------------


def measure(
    kind: str, n: int, url: str, scratch: str, live: bool = False, minimal: bool = False, address: str = ""
) -> dict[str, float]:
    # Start every run with no dirty pages left by the previous one: otherwise its writeback
    # throttles this run and the figures drift upwards run after run.
    os.sync()
    home = tempfile.mkdtemp(dir=scratch)
    args = [sys.executable, __file__, "--worker", kind, "--n", str(n), "--url", url] + (["--live"] if live else [])
    if address:
        args += ["--ray-address", address]
    if kind not in ("zero", "ray") and not minimal:
        args += ["--payload", str(next(Path(scratch).glob("*/payload.json")))]
    first_request()  # (forget any request before this run's)
    spawned = time.time()
    done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "ZERO_HOME": home})
    if done.returncode != 0:
        sys.exit(f"the {kind} run at N={n} failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    result["first_request"] = first_request() - spawned  # from spawning the process to its first request
    return result


_server: subprocess.Popen[str] | None = None  # the bench server (see main)


def first_request() -> float:
    """When the server took the first request since it was last asked (time.time())."""
    assert _server is not None and _server.stdin is not None and _server.stdout is not None
    _server.stdin.write("first\n")
    _server.stdin.flush()
    return float(_server.stdout.readline())


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", choices=("zero", "sdk", "sdk-equal", "floor", "ray"))
    parser.add_argument("--executor", choices=("local", "ray"), default="local")
    parser.add_argument("--ray-address", default="")
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--n", type=int, action="append")
    parser.add_argument("--side", action="append", choices=SIDES, help="only these sides (default: all four)")
    parser.add_argument("--url")
    parser.add_argument("--payload", help="the calls' system prompt and tools, for the baseline")
    parser.add_argument(
        "--home",
        help="where the runs' sessions go (default: the temporary folder); e.g. /dev/shm to take the file "
        "system's state out of the figures",
    )
    parser.add_argument("--live", action="store_true", help="compare the live view with --no-live (median of 5)")
    parser.add_argument(
        "--minimal-baseline",
        action="store_true",
        help="the baseline sends a one-line system prompt and no tools instead of the members' calls",
    )
    args = parser.parse_args()
    if args.serve:
        return serve()
    if args.worker:
        return worker(args.worker, args.n[0], args.url, args.live, args.payload, args.ray_address)
    global _server
    server = _server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip() + "/v1"
    scratch = tempfile.mkdtemp(prefix="zero-bench-", dir=args.home)
    try:
        if args.executor == "ray":
            return compare_ray(args.n or [200], url, scratch)
        if args.live:
            for n in args.n or [200]:
                runs: dict[str, list[float]] = {"no-live": [], "live": []}
                for _ in range(5):
                    runs["no-live"].append(measure("zero", n, url, scratch)["wall"])
                    runs["live"].append(measure("zero", n, url, scratch, live=True)["wall"])
                med = {k: sorted(v)[2] for k, v in runs.items()}
                print(
                    f"N={n}: wall median of 5: --no-live {med['no-live']:.3f} s, live view {med['live']:.3f} s "
                    f"({(med['live'] / med['no-live'] - 1) * 100:+.1f} %)"
                )
            return
        kinds = tuple(k for k in SIDES if k in (args.side or SIDES))
        print(
            f"{'N':>6} {'calls':>6} | "
            + " | ".join(f"{k + ' wall':>14} {'cpu/call':>9} {'rss':>6} {'1st req':>7}" for k in kinds)
            + " | zero/sdk zero/floor | load avg\n"
            "(sdk: the bare SDK as its docs show; sdk-equal: with Zero's retries, collector settings and 32 pools; "
            "floor: Zero's requests on its HTTP stack, parsed, nothing recorded, Zero's collector settings; load: 1 "
            "min, before and after; 1st req: from spawning the process to its first request reaching the server)"
        )
        rss: dict[int, dict[str, float]] = {}
        for n in args.n or [1, 10, 50, 200]:
            calls = 3 * n
            load = os.getloadavg()[0]
            runs: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
            for _ in range(3):  # in turns, so that a change of the machine's load falls on every side alike
                for kind in kinds:
                    runs[kind].append(measure(kind, n, url, scratch, minimal=args.minimal_baseline))
            med = {k: median_of(v) for k, v in runs.items()}
            cpu = {k: med[k]["cpu"] / calls * 1000 for k in kinds}
            rss[n] = {k: med[k]["rss_mb"] for k in kinds}
            cells = " | ".join(
                f"{med[k]['wall']:13.2f}s {cpu[k]:7.2f}ms {med[k]['rss_mb']:4.0f}MB {med[k]['first_request']:6.2f}s"
                for k in kinds
            )
            ratios = [f"{cpu['zero'] / cpu[k]:.2f}x" if {"zero", k} <= set(kinds) else "-" for k in ("sdk", "floor")]
            print(
                f"{n:>6} {calls:>6} | {cells} | {ratios[0]:>8} {ratios[1]:>10} | "
                f"{load:.2f} -> {os.getloadavg()[0]:.2f}",
                flush=True,
            )
        if len(rss) > 1:
            low, high = min(rss), max(rss)
            print(
                f"RSS per extra agent, N={low} to N={high}: "
                + ", ".join(f"{k} {(rss[high][k] - rss[low][k]) * 1024 / (high - low):.0f} KB" for k in kinds)
            )
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=10)
        shutil.rmtree(scratch, ignore_errors=True)


def compare_ray(ns: list[int], url: str, scratch: str) -> None:
    """In-process beside ``--executor ray`` on a local cluster this starts: a head and two nodes on 127.0.0.1."""
    os.environ.update(
        RAY_TMPDIR=tempfile.mkdtemp(prefix="zr", dir="/tmp"),  # (short: Ray's socket paths must fit)
        RAY_USAGE_STATS_ENABLED="0",
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",  # every node on the loopback address
    )
    from ray.cluster_utils import Cluster

    local = {"node_ip_address": "127.0.0.1", "num_cpus": 1}
    cluster = Cluster(initialize_head=True, head_node_args={**local, "include_dashboard": False})
    try:
        for name in ("node_a", "node_b"):
            cluster.add_node(**local, resources={name: 1})
        cluster.wait_for_nodes()
        print(
            f"{'N':>6} {'calls':>6} | {'local wall':>10} {'overhead':>8} {'cpu/call':>9} | {'ray wall':>10} "
            f"{'overhead':>8} {'cpu/call':>9} {'ledger trips/call':>18} {'requests/call':>14} | overhead ray/local\n"
            f"(overhead: wall less the {3 * CALL_SECONDS:.1f} s the server takes for a member's 3 calls; ray cpu: "
            "the driver and every process of the cluster; median of 3, in turns)"
        )
        for n in ns:
            calls = 3 * n
            runs: dict[str, list[dict[str, float]]] = {"zero": [], "ray": []}
            for _ in range(3):
                runs["zero"].append(measure("zero", n, url, scratch))
                runs["ray"].append(measure("ray", n, url, scratch, address=cluster.address))
            med = {k: median_of(v) for k, v in runs.items()}
            over = {k: med[k]["wall"] - 3 * CALL_SECONDS for k in med}
            cpu = {k: med[k]["cpu"] / calls * 1000 for k in med}
            print(
                f"{n:>6} {calls:>6} | {med['zero']['wall']:9.2f}s {over['zero']:7.2f}s {cpu['zero']:7.2f}ms | "
                f"{med['ray']['wall']:9.2f}s {over['ray']:7.2f}s {cpu['ray']:7.2f}ms {med['ray']['trips']:18.2f} "
                f"{med['ray']['requests']:14.2f} | "
                f"{over['ray'] / over['zero']:.2f}x",
                flush=True,
            )
    finally:
        cluster.shutdown()
        shutil.rmtree(os.environ["RAY_TMPDIR"], ignore_errors=True)


if __name__ == "__main__":
    main()
