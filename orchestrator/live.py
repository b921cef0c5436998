"""The live team tree (a Rich ``Live``), and following a run from its session logs."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from rich.console import Console
from rich.live import Live

from zero.agent import RunEvent, Usage
from zero.orchestrator.ledger import Ledger
from zero.orchestrator.runner import TeamRunner
from zero.orchestrator.view import BudgetLine, TeamTree, TreeNode, epoch, render_tree
from zero.sessions import SessionStore
from zero.specialists import format_cost
from zero.tools.describe import describe_call

__all__ = ["LiveTeamView", "budget_lines", "follow_run", "tree_for_runner"]

MAX_FPS = 10


def tree_for_runner(runner: TeamRunner, clock: Any = time.monotonic) -> TeamTree:
    plan = runner.plan
    tree = TeamTree(TreeNode(runner.session_id, plan.name, "team", status="running", started=clock()), clock)
    for name, state in runner.members.items():
        tree.add(
            TreeNode(
                state.session_id,
                name,
                "member",
                specialist=state.plan.specialist.name,
                model=state.plan.model,
                parent=runner.session_id,
                waiting_for=list(state.plan.spec.depends_on),
            )
        )
    return tree


def budget_lines(ledger: Ledger, elapsed: float | None = None) -> list[BudgetLine]:
    limits = ledger.limits
    used = ledger.used
    lines = []
    if limits.tokens:
        lines.append(BudgetLine("tokens", used.tokens, limits.tokens, f"{int(used.tokens):,} / {limits.tokens:,}"))
    if limits.cost_usd:
        lines.append(
            BudgetLine(
                "cost", used.cost_usd, limits.cost_usd, f"{format_cost(used.cost_usd)} / {format_cost(limits.cost_usd)}"
            )
        )
    if limits.turns:
        lines.append(BudgetLine("turns", used.turns, limits.turns, f"{int(used.turns)} / {limits.turns} model calls"))
    wall = getattr(limits, "wall_seconds", None)
    if wall:
        spent = ledger.elapsed() if elapsed is None else elapsed
        lines.append(BudgetLine("time", spent, wall, f"{spent:.0f}s / {wall:.0f}s"))
    return lines


class LiveTeamView:
    """A run-event consumer drawing the team tree in place, at most ``MAX_FPS`` times a second.

    Events only update the model (cheap); a separate task redraws when something changed,
    or once a second for the clocks, and backs off if drawing gets slow, so the view costs
    the run next to nothing.
    """

    def __init__(self, runner: TeamRunner, console: Console):
        self.runner = runner
        self.console = console
        self.tree = tree_for_runner(runner)
        self._live = Live(
            console=console,
            auto_refresh=False,
            transient=False,
            redirect_stdout=False,
            redirect_stderr=False,
            vertical_overflow="visible",
        )
        self._tg: Any = None

    async def __call__(self, event: RunEvent) -> None:
        self.tree.apply(event)

    def renderable(self) -> Any:
        return render_tree(self.tree, budget=budget_lines(self.runner.ledger), max_lines=self.console.height)

    async def __aenter__(self) -> LiveTeamView:
        self._live.start()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._redraw)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        self._live.update(self.renderable(), refresh=True)
        self._live.stop()

    async def _redraw(self) -> None:
        seen = -1
        last = 0.0
        interval = 1 / MAX_FPS
        while True:
            await anyio.sleep(interval)
            now = time.monotonic()
            if self.tree.changes == seen and now - last < 1.0:
                continue
            seen, last = self.tree.changes, now
            started = time.perf_counter()
            self._live.update(self.renderable(), refresh=True)
            cost = time.perf_counter() - started
            interval = max(1 / MAX_FPS, cost * 20)  # drawing takes at most ~5 % of the time


# -- following a run from disk ------------------------------------------------------------


@dataclass
class _Tail:
    path: Path
    offset: int = 0
    buffer: bytes = b""

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self.buffer + data
        complete, _, self.buffer = data.rpartition(b"\n")
        return [json.loads(line) for line in complete.split(b"\n") if line.strip()]


@dataclass
class _Follower:
    store: SessionStore
    tree: TeamTree
    tails: dict[str, _Tail] = field(default_factory=dict)
    done: bool = False

    def watch(self, session_id: str) -> None:
        if session_id not in self.tails:
            self.tails[session_id] = _Tail(self.store.path(session_id) / "events.jsonl")

    def poll(self) -> None:
        for session_id in list(self.tails):
            for event in self.tails[session_id].read():
                self.apply(session_id, event)

    def apply(self, session_id: str, event: dict[str, Any]) -> None:
        tree = self.tree
        kind, p = event["type"], event.get("payload") or {}
        at = epoch(event["createdAt"])
        node = tree.nodes.get(session_id)
        if kind == "team_start":
            for m in p.get("members", []):
                tree.add(
                    TreeNode(
                        m["sessionId"],
                        m["name"],
                        "member",
                        specialist=m.get("specialist", ""),
                        model=m.get("model", ""),
                        parent=session_id,
                        waiting_for=list(m.get("dependsOn", [])),
                    )
                )
                self.watch(m["sessionId"])
            if node is not None:
                node.started = at
        elif kind == "child_start":
            child = tree.nodes.get(p["childSessionId"])
            if child is None:
                child = tree.add(
                    TreeNode(
                        p["childSessionId"],
                        p.get("member") or p.get("specialist", "?"),
                        "child",
                        specialist=p.get("specialist", ""),
                        parent=session_id,
                    )
                )
            child.status, child.started, child.finished, child.activity = "running", at, None, "starting"
            self.watch(p["childSessionId"])
        elif kind == "child_end":
            child = tree.nodes.get(p["childSessionId"])
            if child is not None:
                child.status, child.finished, child.activity = p["status"], at, ""
                child.reason = p.get("reason") or ""
                tree.finished_dependency(child)
        elif kind == "team_end":
            if node is not None:
                node.status, node.finished = p["status"], at
            self.done = True
        elif node is not None:
            node.last_event = time.monotonic()
            if kind == "run_start":
                node.model = p.get("model", node.model)
                if node.status in ("pending", "running"):
                    node.status, node.started = "running", node.started or at
            elif kind == "tool_call":
                node.activity = describe_call(p.get("name", ""), p.get("arguments") or {})
            elif kind == "tool_result":
                node.activity = "thinking..."
            elif kind == "usage":
                node.turns += 1
                node.usage = node.usage + Usage.from_json(p)
            elif kind == "retry":
                node.activity = f"retrying in {p.get('delaySeconds', 0):.0f} s ({p.get('code')})"
            elif kind == "run_end" and node.kind == "root":
                node.status, node.finished = p["status"], at
        tree.changes += 1


async def follow_run(store: SessionStore, session_id: str, console: Console, *, poll: float = 0.25) -> TeamTree:
    """Draw a run that another process is running, from its session logs, until it ends."""
    meta = await anyio.to_thread.run_sync(store.metadata, session_id)
    root = TreeNode(
        session_id,
        meta.team_name or meta.title or session_id,
        "team" if meta.session_kind == "team" else "root",
        model=meta.model_id,
        status="running",
    )
    tree = TeamTree(root, clock=time.time)
    follower = _Follower(store, tree)
    follower.watch(session_id)
    with Live(console=console, auto_refresh=False, vertical_overflow="visible") as live:
        while True:
            await anyio.to_thread.run_sync(follower.poll)
            live.update(render_tree(tree, max_lines=console.height), refresh=True)
            if follower.done:
                break
            current = await anyio.to_thread.run_sync(store.metadata, session_id)
            if current.finished and meta.session_kind != "team":
                break
            await anyio.sleep(poll)
    return tree
