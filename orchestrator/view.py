"""The team tree: a model of every agent in a run, fed by events (live) or read from disk,
and one renderer for both.

The team is the root, members below it, their Task children below them. Each node shows
its status, name, specialist, model, elapsed time, turns, tokens and cost for itself and
its subtree, and what it is doing now; a footer shows the budget and counts by status.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from zero.agent import RunEvent, Usage
from zero.sessions import SessionStore, session_tree
from zero.sessions.lineage import SessionNode
from zero.specialists import format_cost
from zero.tools.describe import describe_call

__all__ = ["BudgetLine", "TeamTree", "TreeNode", "epoch", "render_tree"]

STALL_SECONDS = 120.0
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
GLYPHS: dict[str, tuple[str, str]] = {
    "pending": ("○", "dim"),
    "running": ("●", "cyan"),
    "completed": ("✓", "green"),
    "failed": ("✗", "red"),
    "skipped": ("↷", "yellow"),
    "cancelled": ("■", "yellow"),
    "interrupted": ("■", "magenta"),
    "budget_exhausted": ("$", "red"),
    "timed_out": ("⏱", "red"),
    "max_turns": ("↻", "red"),
    "stalled": ("⚠", "bold yellow"),
}
FINISHED = frozenset(GLYPHS) - {"pending", "running", "stalled"}


@dataclass
class TreeNode:
    session_id: str
    name: str
    kind: str  # team | member | child | root
    specialist: str = ""
    model: str = ""
    status: str = "pending"
    parent: str | None = None
    children: list[str] = field(default_factory=list)
    started: float | None = None
    finished: float | None = None
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    activity: str = ""
    reason: str = ""
    last_event: float = 0.0
    waiting_for: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BudgetLine:
    """One limit of the footer: what is used of what is allowed."""

    label: str
    used: float
    allowed: float
    text: str


class TeamTree:
    """Every agent of a run and its state. ``apply`` folds in live events; ``from_store`` reads a finished
    (or crashed) run from disk."""

    def __init__(self, root: TreeNode, clock: Any = time.monotonic):
        self.nodes: dict[str, TreeNode] = {root.session_id: root}
        self.root_id = root.session_id
        self.clock = clock
        self.changes = 0  # bumped by every change, so a view redraws only when something changed
        self.budget: list[BudgetLine] = []  # a recorded team's limits and what it used

    @property
    def root(self) -> TreeNode:
        return self.nodes[self.root_id]

    def add(self, node: TreeNode) -> TreeNode:
        self.nodes[node.session_id] = node
        if node.parent is not None and node.parent in self.nodes:
            siblings = self.nodes[node.parent].children
            if node.session_id not in siblings:
                siblings.append(node.session_id)
        self.changes += 1
        return node

    # -- live -------------------------------------------------------------------

    def apply(self, event: RunEvent) -> None:
        now = self.clock()
        node = self.nodes.get(event.session_id)
        if event.kind == "subagent_started":
            node = node or self.add(
                TreeNode(
                    event.session_id,
                    event.member or event.agent_name,
                    "member" if event.member else "child",
                    parent=event.parent_session_id,
                )
            )
            node.specialist = event.specialist
            node.status, node.started, node.activity = "running", now, "starting"
        if node is None:
            return
        node.last_event = now
        if event.kind == "run_started":
            node.model = event.model
            if node.status == "pending":
                node.status, node.started = "running", now
        elif event.kind == "tool_call":
            node.activity = describe_call(event.call.name, event.call.arguments)
        elif event.kind == "tool_result":
            node.activity = "thinking..."
        elif event.kind in ("text", "reasoning"):
            if node.activity in ("", "starting", "thinking...") or node.activity.startswith("retrying"):
                node.activity = "writing..." if event.kind == "text" else "thinking..."
            else:
                return  # nothing a reader would see changed
        elif event.kind == "usage":
            node.turns += 1
            node.usage = node.usage + event.usage
        elif event.kind == "retry":
            node.activity = f"retrying in {event.delay:.0f} s ({event.code})"
        elif event.kind == "subagent_finished":
            node.status, node.finished, node.activity = event.status, now, ""
            self.finished_dependency(node)
        elif event.kind == "status_changed":
            node.status, node.reason, node.finished, node.activity = event.status, event.reason, now, ""
        elif event.kind == "run_finished" and event.session_id == self.root_id:
            node.status, node.finished = event.result.status, now
        self.changes += 1

    def finished_dependency(self, node: TreeNode) -> None:
        """Members waiting for ``node`` stop waiting for it once it has completed."""
        if node.status == "completed":
            for other in self.nodes.values():
                if node.name in other.waiting_for:
                    other.waiting_for = [n for n in other.waiting_for if n != node.name]

    def display_status(self, node: TreeNode, now: float) -> str:
        if node.status == "running" and node.last_event and now - node.last_event > STALL_SECONDS:
            return "stalled"
        return node.status

    # -- totals -----------------------------------------------------------------

    def subtree_usage(self, session_id: str) -> Usage:
        node = self.nodes[session_id]
        total = node.usage
        for child in node.children:
            total = total + self.subtree_usage(child)
        return total

    def counts(self) -> Counter[str]:
        return Counter(n.status for n in self.nodes.values() if n.session_id != self.root_id)

    # -- from disk --------------------------------------------------------------

    @classmethod
    def from_store(cls, store: SessionStore, session_id: str) -> TeamTree:
        """The tree of a run as its sessions recorded it: statuses, usage, durations."""
        top = session_tree(store, session_id)
        tree: TeamTree | None = None
        team_start: dict[str, Any] = {}

        def visit(entry: SessionNode, parent: str | None) -> None:
            nonlocal tree
            meta = entry.meta
            kind = "team" if meta.session_kind == "team" else meta.session_kind or "root"
            node = TreeNode(
                meta.session_id,
                meta.member_name or meta.specialist or meta.agent_name or meta.title or meta.session_id,
                kind if parent is not None or kind == "team" else "root",
                specialist=meta.specialist,
                model=meta.model_id,
                status=meta.status,
                parent=parent,
                turns=meta.usage.calls,
                usage=meta.usage.to_usage(),
            )
            node.started, node.finished, start = _scan(store, meta.session_id)
            if start:
                team_start.update(start)
            if tree is None:
                tree = cls(node, clock=lambda: node.finished or node.started or 0.0)
            else:
                tree.add(node)
            for child in entry.children:
                visit(child, meta.session_id)

        visit(top, None)
        assert tree is not None
        if team_start:  # a team: its members in the order of the team file, and its budget
            order = {m["sessionId"]: i for i, m in enumerate(team_start.get("members", []))}
            tree.root.children.sort(key=lambda sid: order.get(sid, len(order)))
            tree.budget = _recorded_budget(tree, team_start.get("budget", {}))
        return tree


def _recorded_budget(tree: TeamTree, limits: dict[str, Any]) -> list[BudgetLine]:
    used = tree.subtree_usage(tree.root_id)
    turns = sum(n.turns for n in tree.nodes.values())
    root = tree.root
    elapsed = (root.finished or 0.0) - (root.started or 0.0)
    lines = []
    if limits.get("tokens"):
        lines.append(
            BudgetLine("tokens", used.total_tokens, limits["tokens"], f"{used.total_tokens:,} / {limits['tokens']:,}")
        )
    if limits.get("cost_usd") and used.cost_usd is not None:
        lines.append(
            BudgetLine(
                "cost",
                used.cost_usd,
                limits["cost_usd"],
                f"{format_cost(used.cost_usd)} / {format_cost(limits['cost_usd'])}",
            )
        )
    if limits.get("turns"):
        lines.append(BudgetLine("turns", turns, limits["turns"], f"{turns} / {limits['turns']} model calls"))
    if limits.get("wall_seconds"):
        lines.append(
            BudgetLine("time", elapsed, limits["wall_seconds"], f"{elapsed:.0f}s / {limits['wall_seconds']:.0f}s")
        )
    return lines


def epoch(stamp: str) -> float:
    """Seconds since the epoch of an ISO-8601 UTC stamp from a session file."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _scan(store: SessionStore, session_id: str) -> tuple[float | None, float | None, dict[str, Any]]:
    """One read of a log: from the first run_start (or team_start) to the last run_end (or team_end),
    and a team's team_start payload."""
    start = end = None
    team_start: dict[str, Any] = {}
    for event in store.events(session_id):
        if event["type"] in ("run_start", "team_start") and start is None:
            start = epoch(event["createdAt"])
        elif event["type"] in ("run_end", "team_end"):
            end = epoch(event["createdAt"])
        if event["type"] == "team_start":
            team_start = dict(event["payload"])
    return start, end, team_start


# -- rendering -------------------------------------------------------------------


def _short(n: int) -> str:
    return f"{n / 1_000_000:.1f}M" if n >= 1_000_000 else f"{n / 1000:.1f}k" if n >= 10_000 else str(n)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def _label(tree: TeamTree, node: TreeNode, now: float) -> Text:
    status = tree.display_status(node, now)
    glyph, style = GLYPHS.get(status, ("?", ""))
    if status == "running":
        glyph = SPINNER[int(now * 10) % len(SPINNER)]
    text = Text()
    text.append(f"{glyph} ", style=style)
    text.append(node.name, style="bold" if node.kind in ("team", "root") else "")
    for detail in (node.specialist if node.specialist != node.name else "", node.model):
        if detail:
            text.append(" · ")
            text.append(detail, style="dim")
    if node.started is not None:
        text.append(f" · {_duration((node.finished or now) - node.started)}")
    own = node.usage
    sub = tree.subtree_usage(node.session_id)
    if node.kind == "team":  # a team spends nothing itself: its members do
        text.append(f" · {_short(sub.total_tokens)} tok {format_cost(sub.cost_usd)}")
    elif node.turns or node.children:
        turns = f"{node.turns} turn" + ("" if node.turns == 1 else "s")
        text.append(f" · {turns} · {_short(own.total_tokens)} tok {format_cost(own.cost_usd)}")
        if node.children:
            text.append(" ")
            text.append(f"(subtree {_short(sub.total_tokens)} tok {format_cost(sub.cost_usd)})", style="dim")
    if status not in ("running", "stalled") and status != "pending":
        text.append(" · ")
        text.append(status, style=style)
    if status == "stalled":
        text.append(" · ")
        text.append(f"stalled: no event for {now - node.last_event:.0f}s", style=style)
        if node.activity:
            text.append(f" (last: {node.activity})", style="dim")
    elif node.status == "pending" and node.waiting_for:
        text.append(" · ")
        text.append(f"waiting for {', '.join(node.waiting_for)}", style="dim")
    elif node.status == "running" and node.activity:
        text.append(" · ")
        text.append(node.activity, style="italic")
    if node.reason and status in FINISHED:
        text.append(" ")
        text.append(f"({node.reason})", style="dim")
    return text


def render_tree(
    tree: TeamTree,
    *,
    now: float | None = None,
    budget: Iterable[BudgetLine] = (),
    max_lines: int | None = None,
) -> RenderableType:
    """The tree and its footer. Past ``max_lines``, finished siblings fold into one line per level."""
    now = tree.clock() if now is None else now
    footer = 6
    collapse = max_lines is not None and len(tree.nodes) + footer > max_lines
    room = [max(3, (max_lines or 0) - footer)]  # lines left for nodes, when collapsing
    top = Tree(_label(tree, tree.root, now), guide_style="dim")

    def grow(branch: Tree, node: TreeNode) -> None:
        kids = [tree.nodes[c] for c in node.children]
        done = [k for k in kids if k.status in FINISHED] if collapse else []
        shown = [k for k in kids if k not in done]
        hidden: list[TreeNode] = []
        for kid in shown:
            if collapse and room[0] <= 1:
                hidden.append(kid)
                continue
            room[0] -= 1
            grow(branch.add(_label(tree, kid, now)), kid)
        if done:
            tally = Counter(k.status for k in done)
            summary = ", ".join(f"{n} {s}" for s, n in sorted(tally.items()))
            branch.add(Text(f"… {len(done)} finished ({summary})", style="dim"))
        if hidden:
            tally = Counter(k.status for k in hidden)
            summary = ", ".join(f"{n} {s}" for s, n in sorted(tally.items()))
            branch.add(Text(f"… {len(hidden)} more ({summary})", style="dim"))

    grow(top, tree.root)
    parts: list[RenderableType] = [top]
    lines = list(budget)
    if lines:
        table = Table.grid(padding=(0, 1))
        for line in lines:
            fraction = min(1.0, line.used / line.allowed) if line.allowed else 0.0
            style = "red" if fraction >= 1 else "yellow" if fraction >= 0.8 else "green"
            table.add_row(
                Text(line.label),
                ProgressBar(total=100, completed=fraction * 100, width=24, complete_style=style, finished_style=style),
                Text(f"{fraction:4.0%}"),
                Text(line.text, style="dim"),
            )
        parts.append(table)
    counts = tree.counts()
    order = [
        "running",
        "pending",
        "completed",
        "failed",
        "skipped",
        "cancelled",
        "interrupted",
        "budget_exhausted",
        "timed_out",
        "max_turns",
    ]
    tally = " · ".join(f"{counts[s]} {s}" for s in order if counts[s])
    parts.append(Text(tally or "no agents yet", style="dim"))
    return Group(*parts)
