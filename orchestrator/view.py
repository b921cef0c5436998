"""The team tree: a model of every agent in a run, fed by the run's events, and one renderer.

The same ``apply`` takes events live (from the run's stream) and from disk (from the
session logs, each event at the time it was written), so the live view, ``zero swarm
watch`` and ``zero sessions tree`` show the same statuses, tokens and cost.

The team (or the top agent) is the root, members below it, their Task children below them.
Each node shows its status, name, specialist, model, elapsed time, turns, tokens and cost for
itself and its subtree, and what it is doing now; a footer shows the budget and counts by status.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, assert_never

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from zero.agent import (
    RUN_STATUSES,
    STATUS,
    TERMINAL,
    AssistantText,
    BudgetTripped,
    ChildFinished,
    ChildStarted,
    Compacted,
    ErrorRaised,
    Event,
    LandChanged,
    MessageAdded,
    ModelStreaming,
    Paused,
    PermissionDecided,
    PermissionRequested,
    RateLimitWait,
    Reasoning,
    RetryScheduled,
    RunFinished,
    RunStarted,
    Status,
    StatusChanged,
    TeamFinished,
    TeamMessageSent,
    TeamStarted,
    ToolCallStarted,
    ToolFinished,
    Usage,
    UsageUpdated,
    WarningRaised,
    format_cost,
    format_tokens,
    waiting_text,
)
from zero.orchestrator.control import USER
from zero.sessions import short_id
from zero.tools.describe import describe_call, printable
from zero.tools.worktrees import DiffStat

__all__ = ["BudgetLine", "NodeKind", "TeamTree", "TreeNode", "epoch", "landing_state", "render_tree"]

STALL_SECONDS = 120.0
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
STALLED = ("⚠", "bold yellow")  # a running agent silent for STALL_SECONDS: the view's, not a status
PAUSED = "paused"  # a running agent's activity while it waits for zero swarm continue (never stalled)


NodeKind = Literal["team", "member", "child", "root"]


@dataclass(kw_only=True)
class TreeNode:
    session_id: str
    name: str
    kind: NodeKind
    specialist: str = ""
    model: str = ""
    status: Status = "pending"
    parent: str | None = None
    children: list[str] = field(default_factory=list)
    started: float | None = None
    finished: float | None = None
    turns: int = 0
    retries: int = 0
    usage: Usage = field(default_factory=Usage)
    activity: str = ""
    reason: str = ""
    error_code: str | None = None  # a team's: of the member whose status is the team's
    last_event: float = 0.0
    waiting_for: list[str] = field(default_factory=list)
    branch: str = ""  # an isolated member's: its branch, its diff stat and how landing it went
    diff_stat: str = ""
    landing: str = ""


@dataclass(frozen=True, kw_only=True)
class BudgetLine:
    """One limit of the footer: what is used of what is allowed."""

    label: str
    used: float
    allowed: float
    text: str


class TeamTree:
    """Every agent of a run and its state, folded from the run's events.

    ``clock`` gives "now" for elapsed times and stalls: the monotonic clock live, the wall
    clock (epoch seconds) for a run read from disk, whose events carry their own times.
    """

    def __init__(self, root: TreeNode, clock: Callable[[], float] = time.monotonic):
        self.nodes: dict[str, TreeNode] = {root.session_id: root}
        self.root_id = root.session_id
        self.clock = clock
        self.changes = 0  # bumped by every change, so a view redraws only when something changed
        self.limits: dict[str, float] = {}  # a team's budget, from its team_start
        self.on_child: Callable[[str], None] | None = None  # told of every new child session

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
        if self.on_child is not None and node.session_id != self.root_id:
            self.on_child(node.session_id)
        return node

    def apply(self, event: Event, at: float | None = None) -> None:
        """Fold in one event, which happened at ``at`` (now, if None)."""
        now = self.clock() if at is None else at
        node = self.nodes.get(event.session_id)
        if node is None:
            return
        node.last_event = now
        match event:
            case TeamStarted():  # (again, for a resumed run: its time and budget are the new run's)
                node.status, node.started, node.finished, node.model = "running", now, None, event.model
                node.reason = ""
                self.limits = dict(event.budget)
                done = {n.name for n in self.nodes.values() if n.status == "completed"}
                for m in event.members:
                    if (known := self.nodes.get(m.session_id)) is not None:  # read from its session before
                        if known.status == "pending":
                            known.waiting_for = [d for d in m.depends_on if d not in done]
                    else:
                        self.add(
                            TreeNode(
                                session_id=m.session_id,
                                name=m.name,
                                kind="member",
                                specialist=m.specialist,
                                model=m.model,
                                parent=event.session_id,
                                waiting_for=[d for d in m.depends_on if d not in done],
                            )
                        )
                place = {m.session_id: i for i, m in enumerate(event.members)}  # (some may be known already)
                node.children.sort(key=lambda child: place.get(child, len(place)))  # in the team file's order
            case ChildStarted():
                child = self.nodes.get(event.child_session_id) or self.add(
                    TreeNode(
                        session_id=event.child_session_id,
                        name=event.name,
                        kind="member" if event.member else "child",
                        specialist=event.specialist,
                        parent=event.session_id,
                    )
                )
                child.status, child.started, child.finished, child.activity = "running", now, None, "starting"
                child.last_event, child.reason = now, ""  # a reason belongs to the run that ended with it
            case ChildFinished():
                if (ended := self.nodes.get(event.child_session_id)) is not None:
                    if ended.started is None and event.usage.partly_unpriced:  # never ran, no price: unknown
                        ended.usage = ended.usage + Usage(cost_usd=None)
                    self._end(ended, event.status, now, event.reason or "")
            case RunStarted():
                node.model = event.model or node.model
                if node.status not in ("running",):
                    node.status, node.started, node.finished, node.reason = "running", node.started or now, None, ""
            case ToolCallStarted():
                node.activity = describe_call(event.name, event.arguments)
            case ToolFinished():
                node.activity = "thinking..."
            case AssistantText() | Reasoning():
                if node.activity in ("", "starting", "thinking...") or node.activity.startswith("retrying"):
                    node.activity = "writing..." if event.kind == "text" else "thinking..."
                else:
                    return  # nothing a reader would see changed
            case ModelStreaming():  # (its time is what counts: a long answer or call is not a stall)
                if node.activity in ("", "starting", "thinking..."):
                    node.activity = "writing..."
            case UsageUpdated():
                node.turns += event.calls
                node.usage = node.usage + event.usage
            case RetryScheduled():
                node.retries += 1
                node.activity = f"retrying in {event.delay_seconds:.0f} s ({event.code})"
            case RateLimitWait():
                node.activity = waiting_text(event)
            case Paused():
                node.activity = PAUSED if event.paused else ""
            case StatusChanged():
                self._end(node, event.status, now, event.reason)
            case RunFinished():
                if event.usage.partly_unpriced:  # a model without a price: its cost is unknown, calls or not
                    node.usage = node.usage + Usage(cost_usd=None)
                self._end(node, event.status, now, node.reason)
            case TeamFinished():
                node.error_code = event.error_code
                self._end(node, event.status, now, node.reason)
            case (
                MessageAdded()
                | PermissionRequested()
                | PermissionDecided()
                | WarningRaised()
                | Compacted()
                | ErrorRaised()
                | BudgetTripped()
            ):
                pass
            case TeamMessageSent() if event.sender == USER:  # zero swarm send: read before the member's next call
                to = next((self.nodes[c] for c in node.children if self.nodes[c].name == event.to), None)
                if to is not None and to.status == "running":
                    to.activity = f"message from you: {event.body[:40]}"
            case TeamMessageSent():
                pass
            case LandChanged():
                if node.name == event.member and node.kind == "member":  # told by the member (resumed alone)
                    member: TreeNode | None = node
                else:
                    member = next((self.nodes[c] for c in node.children if self.nodes[c].name == event.member), None)
                if member is None:
                    return
                member.branch = event.branch
                member.diff_stat = str(DiffStat(files=event.files, added=event.added, removed=event.removed))
                member.landing = landing_state(event)
            case _:
                assert_never(event)
        self.changes += 1

    def _end(self, node: TreeNode, status: Status, now: float, reason: str) -> None:
        node.status, node.activity, node.reason = status, "", reason
        if status in TERMINAL:
            node.finished = node.finished if node.finished is not None else now
        if status == "completed":  # members waiting for it stop waiting
            for other in self.nodes.values():
                if node.name in other.waiting_for:
                    other.waiting_for = [n for n in other.waiting_for if n != node.name]

    def display_status(self, node: TreeNode, now: float) -> Status | Literal["stalled"]:
        if (
            node.status == "running"
            and node.activity != PAUSED
            and node.last_event
            and now - node.last_event > STALL_SECONDS
        ):
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
        """The agents by status: a team's members and their children; a single agent's run counts itself."""
        team = self.root.kind == "team"
        return Counter(n.status for n in self.nodes.values() if n.session_id != self.root_id or not team)

    def budget(self, now: float | None = None) -> list[BudgetLine]:
        """The team's limits and what the whole tree used of them."""
        limits = self.limits
        if not limits:
            return []
        now = self.clock() if now is None else now
        used = self.subtree_usage(self.root_id)
        turns = sum(n.turns for n in self.nodes.values())
        root = self.root
        elapsed = ((root.finished or now) - root.started) if root.started is not None else 0.0
        lines = []
        if limits.get("tokens"):
            tokens = int(limits["tokens"])
            lines.append(
                BudgetLine(
                    label="tokens", used=used.total_tokens, allowed=tokens, text=f"{used.total_tokens:,} / {tokens:,}"
                )
            )
        if limits.get("cost_usd") and used.cost_usd is not None:
            allowed = float(limits["cost_usd"])
            text = f"{format_cost(used)} / ${allowed:.4f}"
            lines.append(BudgetLine(label="cost", used=used.cost_usd, allowed=allowed, text=text))
        if limits.get("turns"):
            allowed_turns = int(limits["turns"])
            lines.append(
                BudgetLine(
                    label="turns", used=turns, allowed=allowed_turns, text=f"{turns:,} / {allowed_turns:,} model calls"
                )
            )
        if limits.get("retries") is not None:
            retries = sum(n.retries for n in self.nodes.values())
            allowed_retries = int(limits["retries"])
            lines.append(
                BudgetLine(
                    label="retries",
                    used=retries,
                    allowed=allowed_retries,
                    text=f"{retries:,} / {allowed_retries:,} retries",
                )
            )
        if limits.get("wall_seconds"):
            wall = float(limits["wall_seconds"])
            lines.append(BudgetLine(label="time", used=elapsed, allowed=wall, text=f"{elapsed:.0f}s / {wall:.0f}s"))
        return lines


def landing_state(event: LandChanged) -> str:
    """How an isolated member's landing stands, as the tree shows it: ``landed``, ``conflict: src/a.py``,
    ``check failed``, ``skipped``, ``nothing to land``; ``not landed yet`` once its work is committed."""
    if event.state == "conflict":
        return "conflict: " + ", ".join(event.conflicts)
    if event.state == "committed":
        return "not landed yet"
    return event.state.replace("_", " ")


def epoch(stamp: str) -> float:
    """Seconds since the epoch of an ISO-8601 UTC stamp from a session file."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


# -- rendering -------------------------------------------------------------------


def _tok(usage: Usage) -> str:
    """Tokens, marked ``~`` when some are Zero's estimate (the server reported none)."""
    return ("~" if usage.estimated else "") + f"{format_tokens(usage.total_tokens)} tok"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def _label(tree: TeamTree, node: TreeNode, now: float, ids: bool = False) -> Text:
    status = tree.display_status(node, now)
    glyph, style = STALLED if status == "stalled" else (STATUS[status].glyph, STATUS[status].style)
    if status == "running":
        glyph = SPINNER[int(now * 10) % len(SPINNER)]
    text = Text()
    text.append(f"{glyph} ", style=style)
    text.append(printable(node.name), style="bold" if node.kind in ("team", "root") else "")
    if ids:
        text.append(f" {short_id(node.session_id)}", style="dim")
    for detail in (node.specialist if node.specialist != node.name else "", node.model):
        if detail:
            text.append(" · ")
            text.append(printable(detail), style="dim")
    if node.started is not None:
        text.append(f" · {_duration((node.finished or now) - node.started)}")
    own = node.usage
    sub = tree.subtree_usage(node.session_id)
    if node.kind == "team":  # a team spends nothing itself: its members do
        text.append(f" · {_tok(sub)} {format_cost(sub)}")
    elif node.turns or node.children:
        turns = f"{node.turns:,} turn" + ("" if node.turns == 1 else "s")
        text.append(f" · {turns} · {_tok(own)} {format_cost(own)}")
        if node.children:
            text.append(" ")
            text.append(f"(subtree {_tok(sub)} {format_cost(sub)})", style="dim")
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
    if node.branch:
        text.append(" · ")
        text.append(f"{node.branch} {node.diff_stat}", style="cyan")
        if node.landing:
            text.append(" · ")
            text.append(node.landing, style="green" if node.landing == "landed" else "yellow")
    if node.reason and status in TERMINAL:
        text.append(" ")
        text.append(f"({printable(node.reason)})", style="dim")
    return text


BAR_WIDTH = 24


def _bar(fraction: float, style: str) -> Text:
    """A budget bar whose unused part is drawn too (rich's bar draws it only as a colour, which a picture of
    the screen, ``export_svg``, or a terminal without colours loses)."""
    filled = int(fraction * BAR_WIDTH)  # (full only when the limit is)
    return Text.assemble(("━" * filled, style), ("─" * (BAR_WIDTH - filled), "dim"))


def render_tree(
    tree: TeamTree,
    *,
    now: float | None = None,
    budget: Iterable[BudgetLine] = (),
    max_lines: int | None = None,
    ids: bool = False,
) -> RenderableType:
    """The tree and its footer. Past ``max_lines``, finished siblings fold into one line per level;
    ``ids``: each node shows its session's short id (what the command line takes)."""
    now = tree.clock() if now is None else now
    footer = 6
    collapse = max_lines is not None and len(tree.nodes) + footer > max_lines
    room = [max(3, (max_lines or 0) - footer)]  # lines left for nodes, when collapsing
    top = Tree(_label(tree, tree.root, now, ids), guide_style="dim")

    def grow(branch: Tree, node: TreeNode) -> None:
        kids = [tree.nodes[c] for c in node.children]
        done = [k for k in kids if k.status in TERMINAL] if collapse else []
        shown = [k for k in kids if k not in done]
        hidden: list[TreeNode] = []
        for kid in shown:
            if collapse and room[0] <= 1:
                hidden.append(kid)
                continue
            room[0] -= 1
            grow(branch.add(_label(tree, kid, now, ids)), kid)
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
                _bar(fraction, style),
                Text(f"{fraction:4.0%}"),
                Text(line.text, style="dim"),
            )
        parts.append(table)
    counts = tree.counts()
    # The live ones, what went well or badly first, then every other way a run ends, as the vocabulary has them.
    order = ["running", "pending", "completed", "failed", "skipped"]
    order += [s for s in RUN_STATUSES if s not in order]
    tally = " · ".join(f"{counts[s]} {s}" for s in order if counts[s])
    parts.append(Text(tally or "no agents yet", style="dim"))
    return Group(*parts)
