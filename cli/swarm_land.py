"""``zero swarm diff TEAM_ID [MEMBER]`` and ``zero swarm land TEAM_ID``: what a team's isolated members
changed, and landing again the branches that did not land (after a manual fix)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import anyio
from rich.console import Console

from zero.cli.common import Streams, print_error, session_store, shell_settings, workspace_from
from zero.cli.config import load_config
from zero.cli.options import SwarmOptions
from zero.cli.session_ids import resolve_session_id
from zero.errors import UsageError, ZeroError
from zero.orchestrator import Landed, NothingToLand
from zero.orchestrator.isolation import TeamWorktrees
from zero.orchestrator.resume import RecordedTeam, read_team
from zero.orchestrator.team import TeamFile
from zero.sessions import default_data_dir, short_id
from zero.tools.worktrees import Worktrees

__all__ = ["run_diff", "run_land"]


def _open(args: SwarmOptions) -> tuple[str, RecordedTeam, Worktrees]:
    """The team run ``args`` names, and its worktrees' record."""
    store = session_store()
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
    from zero.cli.swarm_cmd import print_landing

    try:
        team_id, recorded, worktrees = _open(args)
        order = [name for name in dependency_order(recorded.team) if name in worktrees.members]
        todo = [name for name in order if not worktrees.landed(name) and worktrees.changed(name)]
        folder = worktrees.snapshot.repo / worktrees.snapshot.prefix
        shell = shell_settings(load_config(Path(folder)))
        team = TeamWorktrees.of(
            recorded.team, order, worktrees=worktrees, session_id=team_id, shell=shell, emit=lambda event: None
        )
        report = anyio.run(functools.partial(team.close, todo, land=True))
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
