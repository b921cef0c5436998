"""``zero swarm diff TEAM_ID [MEMBER]`` and ``zero swarm land TEAM_ID``: what a team's isolated members
changed, and landing again the branches that did not land (after a manual fix)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from textwrap import indent

import anyio

from zero.agent import Event
from zero.cli._console import Console
from zero.cli.common import Streams, print_error, session_store, shell_settings, workspace_from
from zero.cli.config import load_config
from zero.cli.options import SwarmOptions
from zero.cli.session_ids import resolve_session_id
from zero.errors import UsageError, ZeroError
from zero.orchestrator import CheckFailed, Conflict, Landed, NothingToLand, Skipped
from zero.orchestrator.isolation import LandReport, TeamWorktrees
from zero.orchestrator.land import tail
from zero.orchestrator.resume import RecordedTeam, read_team
from zero.orchestrator.team import TeamFile
from zero.sessions import FileSessionStore, default_data_dir, short_id
from zero.tools.describe import printable
from zero.tools.worktrees import Worktrees

__all__ = ["print_landing", "run_diff", "run_land"]


def _open(args: SwarmOptions, store: FileSessionStore | None = None) -> tuple[str, RecordedTeam, Worktrees]:
    """The team run ``args`` names, and its worktrees' record."""
    store = store or session_store()
    here = workspace_from(args) if args.here else None
    team_id = resolve_session_id(store, args.session_id, here=here, kind="team")
    recorded = read_team(store, team_id)
    return team_id, recorded, Worktrees.load(root=short_id(team_id), home=default_data_dir())


def run_diff(args: SwarmOptions, streams: Streams) -> int:
    """Print the diff of each isolated member (or of ``MEMBER``): what it landed, else what its branch holds."""
    try:
        team_id, recorded, worktrees = _open(args)
        names = [name for name in dependency_order(recorded.team) if name in worktrees.members]
        if args.member is not None:
            if args.member not in names:
                known = ", ".join(names) or "none"
                raise UsageError(f"team {short_id(team_id)} has no isolated member {args.member!r} (it has: {known})")
            names = [args.member]
        parts = []
        for name in names:
            landed, changed = worktrees.landed(name), worktrees.changed(name)
            if not landed and not changed:
                parts.append(f"# {name}: no change\n")
                continue
            state = "landed on " + worktrees.land_branch if landed else "not landed, on " + worktrees.branch_of(name)
            parts.append(f"# {name}: {state} · {worktrees.diff_stat(name)}\n{worktrees.diff(name)}\n")
    except ZeroError as e:
        print_error(str(e), streams.stderr)
        return e.exit_code
    streams.stdout.write("".join(parts))
    return 0


def run_land(args: SwarmOptions, streams: Streams) -> int:
    """Land, in dependency order, each isolated member whose branch holds work that did not land."""
    try:
        store = session_store(writable=True)
        team_id, recorded, worktrees = _open(args, store)
        order = [name for name in dependency_order(recorded.team) if name in worktrees.members]
        todo = [name for name in order if not worktrees.landed(name) and worktrees.changed(name)]
        folder = worktrees.snapshot.repo / worktrees.snapshot.prefix
        shell = shell_settings(load_config(Path(folder)))
        store.acquire(team_id)  # its land events join its log (SessionError while the team runs)
        try:
            events: list[Event] = []
            team = TeamWorktrees.of(
                recorded.team, order, worktrees=worktrees, session_id=team_id, shell=shell, emit=events.append
            )
            report = anyio.run(functools.partial(team.close, todo, land=True))
            if events:
                store.append(team_id, events)  # so the tree, watch and the session show how each landed now
        finally:
            store.release(team_id)
            store.flush()
    except ZeroError as e:
        print_error(str(e), streams.stderr)
        return e.exit_code
    if args.json:
        streams.stdout.write(json.dumps(report.to_json(), ensure_ascii=False) + "\n")
    elif not todo:
        streams.stdout.write(
            f"Nothing to land: every isolated member of team {short_id(team_id)} landed or changed nothing.\n"
        )
    else:
        console = Console(file=streams.stdout, highlight=False, soft_wrap=True)
        print_landing(report, recorded.team, console, team_id=team_id, isolated=todo)
    return 0 if all(isinstance(o, Landed | NothingToLand) for o in report.outcomes.values()) else 1


def dependency_order(team: TeamFile) -> list[str]:
    """The members of ``team``, each after those it depends on, in file order otherwise."""
    done: list[str] = []
    left = list(team.members)
    while left:
        ready = next((m for m in left if all(d in done for d in m.depends_on)), left[0])  # (a valid team has no cycle)
        done.append(ready.name)
        left.remove(ready)
    return done


def print_landing(report: LandReport, team: TeamFile, console: Console, *, team_id: str, isolated: list[str]) -> None:
    """How each of the ``isolated`` members' work came back, and what to type next."""
    check = team.land.check
    console.rule(
        f"landing onto {report.land_branch}" + (f" · check: {check}" if check else " · no check"), align="left"
    )
    for name, outcome in report.outcomes.items():
        stat, branch = report.stats[name], report.branches[name]
        match outcome:
            case Landed():
                s = "" if outcome.commits == 1 else "s"
                checked = " · check passed" if name in report.checked else ""
                console.print(f"  {name}: [green]landed[/green] · {outcome.commits} commit{s} · {stat}{checked}")
            case NothingToLand():
                console.print(f"  {name}: nothing to land (its branch changed nothing)")
            case Skipped():
                console.print(f"  {name}: [yellow]skipped[/yellow]: {outcome.dependency} did not land · {branch} kept")
            case Conflict():
                files = ", ".join(f.path for f in outcome.files)
                console.print(f"  {name}: [red]conflict: {files}[/red] · {stat} · {branch} kept", markup=True)
                for f in outcome.files:
                    for side, text in ((report.land_branch, f.landed), (branch, f.member)):
                        console.print(f"    {f.path} on {side}:", markup=False)
                        body = "(deleted)" if text is None else tail(text, 12)
                        console.print(indent(printable(body), "      "), markup=False)
            case CheckFailed():
                why = "timed out" if outcome.timed_out else "failed"
                console.print(f"  {name}: [red]check {why}[/red] · {stat} · {branch} kept")
                console.print(indent(printable(outcome.tail), "      "), markup=False)
    left = [name for name in isolated if name not in report.outcomes]
    for name in left:
        why = (
            f"the landing was stopped: zero swarm land {team_id} lands it"
            if name in report.stopped
            else "it did not complete"
        )
        console.print(f"  {name}: not landed ({why})")
    if report.merged:
        console.print(f"Your branch now holds what landed (fast-forwarded to {report.land_branch}).")
    elif report.merge_command:
        why = f" (not merged: {report.not_merged})" if report.not_merged else ""
        console.print(f"Bring it into your branch with: {report.merge_command}{why}", markup=False)
    kept = [report.branches[n] for n, o in report.outcomes.items() if not isinstance(o, Landed | NothingToLand)]
    if kept:
        console.print(
            f"See what did not land with: zero swarm diff {short_id(team_id)}; once a branch is fixed, "
            f"land it with: zero swarm land {short_id(team_id)}",
            markup=False,
        )
