"""``zero swarm plan GOAL``: the planner specialist designs a team for a goal, as a typed result; the team is
checked as ``zero swarm validate`` checks a file (a team that fails goes back to the planner once, with what is
wrong), printed with its estimate, written for the user to edit, and with ``--run`` run after a yes."""

from __future__ import annotations

import functools
import os
import stat
from dataclasses import replace
from pathlib import Path

import anyio

from zero.agent import exit_code, format_cost, incomplete_message
from zero.agent.output_schema import OutputSchema
from zero.cli._console import Console
from zero.cli.common import (
    Streams,
    confirm,
    interruptible,
    open_context,
    print_error,
    print_warnings,
    settings_from,
    unwrap,
    workspace_from,
)
from zero.cli.config import RunSettings
from zero.cli.options import SwarmOptions
from zero.cli.progress import TextProgress
from zero.cli.swarm_cmd import run_swarm, validate_team
from zero.cli.trust import load_specialists, specialist_warnings
from zero.errors import UsageError, ZeroError
from zero.orchestrator import TeamError, TeamPlan, TeamProblem
from zero.orchestrator.planning import feedback, plan_prompt, team_schema, team_text
from zero.sessions import AgentSession, new_session_id
from zero.specialists import SpecialistOptions, SpecialistRegistry, open_specialist
from zero.strictfile import place, spare_file
from zero.tools.describe import printable

__all__ = ["ATTEMPTS", "PLANNER", "run_plan"]

PLANNER = "planner"
ATTEMPTS = 2  # the planner's team, and once more with what the checks found wrong with it
INVALID = 4  # a team that stayed invalid: the planner's typed result did not hold (as invalid_output)
ROLE = (
    'You are the "planner" specialist, started by `zero swarm plan` to design a team of specialists for a goal. '
    "Your result is the team, which the user reads and edits before it runs."
)


def run_plan(args: SwarmOptions, streams: Streams) -> int:
    """``zero swarm plan``: 0 with the team written (and with ``--run``, the run's own exit code); ``INVALID``
    when the planner's team failed the checks twice, and nothing written."""
    try:
        workspace = workspace_from(args)
        goal = (args.goal or "").strip()
        if not goal:
            raise UsageError('the goal is empty: say what the team is to do, as zero swarm plan "GOAL"')
        target = _target(args)
        if args.then_run and not args.yes and not streams.stdin.isatty():
            raise UsageError("--run needs --yes when there is no terminal to ask; nothing was planned")
        settings = settings_from(args.run, workspace)
        registry = load_specialists(workspace, settings.configs, settings)
        registry.get(PLANNER)
    except ZeroError as e:
        print_error(str(e), streams.stderr)
        return e.exit_code
    print_warnings((*settings.warnings, *specialist_warnings(registry)), streams.stderr)
    with streams.unblocked() as out:
        try:
            planned = anyio.run(_plan, args, workspace, settings, registry, goal, target, out)
        except Exception as group:  # the provider or the session store failed: nothing was written
            error = unwrap(group)
            if not isinstance(error, ZeroError):
                raise
            print_error(str(error), out.stderr)
            return error.exit_code
    if isinstance(planned, int):
        return planned
    path, plan = planned
    if not args.then_run:
        return 0
    if not confirm(f"Run team {plan.name!r} ({len(plan.members)} members) now?", streams, yes=args.yes, needs="--run"):
        streams.stderr.write(f"Not run; run it with: zero swarm run {path}\n")
        return 0
    return run_swarm(replace(args, action="run", team=str(path), goal=None), streams)


def _target(args: SwarmOptions) -> Path | None:
    """The file ``-o`` names, checked before the planner is asked (None: the team's name, in the workspace)."""
    if args.output is None:
        return None
    path = Path(args.output)
    if path.is_dir():
        raise UsageError(f"-o {args.output} is a folder: name the team file to write (say {path / 'team.toml'})")
    if not path.parent.is_dir():
        raise UsageError(f"-o {args.output}: the folder {path.parent} does not exist; create it first")
    if (path.exists() or path.is_symlink()) and not args.force:
        raise UsageError(f"{args.output} already exists; pass --force to overwrite it, or -o another file")
    _regular_or_none(path, args.output)
    return path


def _regular_or_none(path: Path, named: str) -> None:
    """Refuse a ``path`` that is there and is not a regular file: ``--force`` replaces a file, never a link, a
    device or a FIFO (as root, ``-o /dev/null --force`` would have replaced the system's device)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        kind = "a link" if stat.S_ISLNK(mode) else "not a regular file (a device, a FIFO, a socket)"
        raise UsageError(f"-o {named} is {kind}; name a regular file to write")


def _default(workspace: Path, name: str) -> Path:
    """Where a team is written without ``-o``: ``NAME.toml`` in the workspace, else the first free
    ``NAME-2.toml``, ``NAME-3.toml``... (a file that is there is never overwritten)."""
    path, number = workspace / f"{name}.toml", 1
    while path.exists() or path.is_symlink():
        number += 1
        path = workspace / f"{name}-{number}.toml"
    return path


async def _plan(
    args: SwarmOptions,
    workspace: Path,
    settings: RunSettings,
    registry: SpecialistRegistry,
    goal: str,
    target: Path | None,
    streams: Streams,
) -> tuple[Path, TeamPlan] | int:
    """Ask the planner for the team in a session of its own: the file written and its plan, or the exit code
    of a planner that did not deliver a valid team."""
    spec = registry.get(PLANNER)
    async with open_context(args.run, settings, workspace, streams, registry) as ctx:
        session_id = new_session_id(PLANNER)
        options = SpecialistOptions(
            node=ctx.tree.add(session_id, title=f"plan: {goal}"),
            permission_mode=settings.permission_mode,
            output_schema=OutputSchema.of(
                team_schema(registry.names(), max_turns=settings.max_turns, max_concurrency=settings.max_concurrency),
                spec.output_retries,
            ),
            role=ROLE,
        )
        session = await open_specialist(ctx, spec, options)
        progress = TextProgress(Console(file=streams.stderr, highlight=False, soft_wrap=True))
        async with anyio.create_task_group() as consumers:
            consumers.start_soon(progress.consume, session.events())
            async with session:
                planned = await _attempts(session, args, workspace, registry, goal, target, streams)
        if isinstance(planned, int):
            return planned
        path, plan, turns = planned
        usage = session.run_usage
        streams.stdout.write(
            f"Wrote {path} · planner session {session_id} · {turns} model call{'s' if turns != 1 else ''} · "
            f"{usage.total_tokens:,} tokens · cost {format_cost(usage)}\n"
            f"Edit it as you like; check it with: zero swarm validate {path}; run it with: zero swarm run {path}\n"
        )
        return path, plan


async def _attempts(
    session: AgentSession,
    args: SwarmOptions,
    workspace: Path,
    registry: SpecialistRegistry,
    goal: str,
    target: Path | None,
    streams: Streams,
) -> tuple[Path, TeamPlan, int] | int:
    """The planner's team, checked and written (with the planner's model calls), else asked for once more with
    what the checks found wrong; the exit code of a planner that did not deliver."""
    prompt, turns = plan_prompt(goal, registry), 0
    for attempt in range(1, ATTEMPTS + 1):
        stop = functools.partial(session.cancel, "interrupted")
        result = await interruptible(functools.partial(session.send, prompt), stop, streams.stdout)
        turns += result.turns
        if result.status != "completed":
            why = printable(result.error or incomplete_message(result.status, result.turns))
            print_error(f"the planner ended {result.status} ({why}); no team was written", streams.stderr)
            return exit_code(result.status, result.error_code)
        note = f"Planned by zero swarm plan (planner session {session.session_id}): edit it as you like."
        text = team_text(result.structured_output, goal, note)
        # (submit_result held the name to the team file's pattern, so it is a plain file name)
        path = target or _default(workspace, result.structured_output["name"])
        try:
            plan = await anyio.to_thread.run_sync(functools.partial(_write, args, workspace, streams, path, text))
        except TeamError as e:
            problems = [replace(p, path=str(path)) for p in e.problems]
            _report(problems, attempt, streams)
            prompt = feedback(problems)
            continue
        return path, plan, turns
    return INVALID


def _report(problems: list[TeamProblem], attempt: int, streams: Streams) -> None:
    """Say what is wrong with the planner's team, and what follows: another attempt, or none."""
    count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
    then = "asking the planner again" if attempt < ATTEMPTS else f"no team was written after {ATTEMPTS} attempts"
    lines = "".join(f"  {printable(str(p))}\n" for p in problems)
    streams.stderr.write(f"zero: error: the planner's team is not valid ({count}); {then}:\n{lines}")


def _write(args: SwarmOptions, workspace: Path, streams: Streams, path: Path, text: str) -> TeamPlan:
    """Check ``text`` as ``zero swarm validate`` checks a file, print its plan, and put it at ``path``, whole or
    not at all: it is checked in a new spare file beside ``path`` (relative schema paths resolve as they will),
    which then becomes ``path`` (``--force``: over a file there; else only where none is)."""
    with spare_file(path, text.encode()) as spare:
        plan = validate_team(replace(args, action="validate", team=str(spare), goal=None), workspace, streams)
        if args.force:
            _regular_or_none(path, str(path))  # (again: it may have changed while the planner worked)
        try:
            place(spare, path, force=args.force)
        except FileExistsError:  # one appeared while the planner worked
            raise UsageError(f"{path} appeared while the planner worked; pass --force to overwrite it") from None
    return plan
