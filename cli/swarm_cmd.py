"""``zero swarm run TEAM.toml``, ``zero swarm validate TEAM.toml``, ``zero swarm watch ID`` and ``zero swarm
stop|send|pause|continue ID`` (``diff`` and ``land``: ``swarm_land``)."""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import anyio
from rich.table import Table

from zero.agent import STATUS, PriceTable, exit_code, format_cost
from zero.cli._console import Console
from zero.cli._warnings import WarningLog
from zero.cli.common import (
    Streams,
    freeze_startup_heap,
    interruptible,
    open_context,
    print_error,
    print_warnings,
    session_store,
    team_settings,
    unwrap,
    workspace_from,
)
from zero.cli.config import RunSettings, load_config, permission_ceiling
from zero.cli.options import SwarmOptions
from zero.cli.session_ids import resolve_session_id
from zero.cli.streamjson import StreamJsonWriter, new_run_id
from zero.cli.swarm_estimate import check_estimate, estimate_line, estimate_of, print_estimate
from zero.cli.swarm_land import print_landing, run_diff, run_land
from zero.cli.swarm_progress import PlainProgress
from zero.cli.trust import load_specialists, specialist_warnings
from zero.errors import ConfigError, UsageError, ZeroError
from zero.orchestrator import (
    MemberExecutor,
    TeamError,
    TeamPlan,
    TeamResult,
    TeamRunner,
    build_plan,
    load_team,
)
from zero.orchestrator.control_socket import request, serve_control
from zero.orchestrator.estimate import TeamEstimate
from zero.orchestrator.live import draw_live, follow_run, tree_from_store
from zero.orchestrator.resume import RecordedTeam, read_team
from zero.orchestrator.reuse import Reuse, plan_reuse
from zero.orchestrator.team import with_limits
from zero.orchestrator.view import TeamTree, TreeNode
from zero.sessions import default_data_dir, session_workspace
from zero.specialists import AgentContext, SpecialistRegistry
from zero.tools import Redactor, Workspace, redact_values, within
from zero.tools.describe import printable

__all__ = ["run_swarm", "validate_team"]


def run_swarm(args: SwarmOptions, streams: Streams) -> int:
    if args.action == "watch":
        return _watch(args, streams)
    if args.action in ("diff", "land"):
        return (run_diff if args.action == "diff" else run_land)(args, streams)
    if args.action in CONTROLS:
        return _control(args, streams)
    run_id = new_run_id()
    out = streams.stdout
    recorded: RecordedTeam | None = None
    try:
        workspace = workspace_from(args)
        if args.action == "resume":
            recorded = _recorded(args, workspace)
        running = args.action in ("run", "resume") and not args.dry_run
        plan, settings, registry = _plan(args, workspace, streams, need_provider=running, recorded=recorded)
        estimate, reuse = None, None
        if args.reuse:
            reuse = _reuse(args.reuse, plan, workspace)
        if args.action in ("run", "validate"):
            reused = [v.name for v in reuse.members.values() if v.reused] if reuse else ()
            estimate = estimate_of(plan, registry, workspace, _prices(settings), reused)
            if running and not args.accept_estimate:
                check_estimate(estimate, plan, args.team or "the team file")
    except TeamError as e:
        return _report_invalid(args, streams, e)
    except ZeroError as e:
        if args.output_format == "stream-json":
            StreamJsonWriter.setup_failure(out, run_id, e)
        else:
            print_error(str(e), streams.stderr)
        return e.exit_code
    from zero.cli import swarm_ray  # (Ray is imported only for a run on it)

    on_ray = swarm_ray.wants_ray(args, plan)
    try:
        with swarm_ray.cluster(args, plan) if on_ray else contextlib.nullcontext(args) as args:
            if args.action == "validate" or args.dry_run:
                _print_plan(plan, settings, out, args.json or args.output_format == "json", estimate, reuse)
                return 0
            assert settings is not None
            body = functools.partial(
                _run, plan, settings, registry, workspace, args, run_id=run_id, recorded=recorded, on_ray=on_ray,
                estimate=estimate, reuse=reuse,
            )  # fmt: skip
            return _start(body, args, streams, run_id)
    except TeamError as e:  # a member no node of the cluster can run
        return _report_invalid(args, streams, e)
    except ZeroError as e:
        print_error(str(e), streams.stderr)
        return e.exit_code


def validate_team(args: SwarmOptions, workspace: Path, streams: Streams) -> TeamPlan:
    """``zero swarm validate`` of ``args.team``: its plan, printed with its estimate as validate prints it; a
    ``TeamError`` lists every problem (``zero swarm plan`` checks the planner's team with it, having said the
    warnings of the configs and specialists once; a member's narrowed mode shows in its line)."""
    plan, settings, registry = _plan(args, workspace, streams, need_provider=False, warn=False)
    estimate = estimate_of(plan, registry, workspace, _prices(settings))
    _print_plan(plan, settings, streams.stdout, False, estimate)
    return plan


def _start(body: Callable[..., Awaitable[int]], args: SwarmOptions, streams: Streams, run_id: str) -> int:
    """Run the team (``body``, given the streams it may write) on an event loop of its own; a Zero error that
    ends it is said as the output format says errors."""
    with streams.unblocked() as unblocked:
        try:
            return anyio.run(functools.partial(body, streams=unblocked))
        except Exception as group:
            error = unwrap(group)
            if not isinstance(error, ZeroError):
                raise
            if args.output_format == "stream-json":
                StreamJsonWriter.setup_failure(unblocked.stdout, run_id, error)
            else:
                print_error(str(error), unblocked.stderr)
            return error.exit_code


def _recorded(args: SwarmOptions, workspace: Path) -> RecordedTeam:
    """The team run ``swarm resume`` continues, in this workspace; with ``--team``, an edited file
    that has the same members."""
    store = session_store(writable=True)
    team_id = resolve_session_id(store, args.session_id, here=workspace if args.here else None, kind="team")
    session_workspace(store.metadata(team_id), workspace)
    recorded = read_team(store, team_id)
    if args.team:
        edited, _, _ = load_team(Path(args.team))
        names, before = [m.name for m in edited.members], list(recorded.members)
        if sorted(names) != sorted(before):
            raise UsageError(
                f"{args.team} has members {', '.join(names)}, but the run {team_id} had {', '.join(before)}: "
                "a resumed team keeps its members (start a new run with zero swarm run instead)"
            )
    return recorded


@dataclass(frozen=True)
class _Reusing:
    team_id: str  # the run it reuses members of
    members: dict[str, Reuse]


def _reuse(given: str, plan: TeamPlan, workspace: Path) -> _Reusing:
    """What ``--reuse TEAM_ID`` takes from that run of the team, in this workspace."""
    store = session_store()
    team_id = resolve_session_id(store, given, kind="team")
    meta = store.metadata(team_id)
    if meta.session_kind != "team":
        raise UsageError(
            f"--reuse {given}: {team_id} is not a team run; name a run of this team (zero sessions list --kind team)"
        )
    session_workspace(meta, workspace)
    recorded = read_team(store, team_id)
    if recorded.team.name != plan.name:
        raise UsageError(
            f"--reuse {given}: {team_id} is a run of team {recorded.team.name!r}, not {plan.name!r}; "
            "name a run of this team (zero sessions list --kind team)"
        )
    verdicts = anyio.run(plan_reuse, plan, recorded, store, Workspace([workspace]), Redactor())
    return _Reusing(team_id, verdicts)


def _plan(
    args: SwarmOptions,
    workspace: Path,
    streams: Streams,
    *,
    need_provider: bool,
    recorded: RecordedTeam | None = None,
    warn: bool = True,
) -> tuple[TeamPlan, RunSettings | None, SpecialistRegistry]:
    """The plan of the team file (or of the run ``recorded``), its members' settings and the specialists;
    ``warn``: say the warnings of the configs, the specialists and the members' modes."""
    from_file = recorded is None or bool(args.team)
    if recorded is not None and not args.team:
        path, team = Path(recorded.file or "(recorded team)"), recorded.team
    else:
        path = Path(args.team or "")  # (run and validate require it)
        team = load_team(path)[0]
    configs = load_config(workspace)
    # The flag (else the user's config) is the ceiling; the project's config and the team file may only narrow it.
    ceiling = permission_ceiling(args.run.permission_mode, configs)
    mode, note = within(ceiling, configs.project.permission_mode, "the project's .zero/config.toml")
    settings: RunSettings | None = None
    try:
        settings = team_settings(configs, args.run, team.defaults)
    except ConfigError:
        if need_provider:
            raise
    registry = load_specialists(workspace, configs, settings)
    base = recorded.budget if recorded is not None and not args.team else team.budget
    limits = with_limits(
        base,
        tokens=args.budget_tokens,
        cost_usd=args.budget_cost,
        wall_seconds=args.budget_seconds,
    )
    prices = _prices(settings)
    plan = build_plan(
        path,
        registry,
        provider=settings.provider if settings else (team.defaults.provider or "(not configured)"),
        model=settings.model if settings else (args.run.model or team.defaults.model or "(provider default)"),
        permission_mode=mode,
        prices=prices,
        budget=limits,
        max_concurrency=args.max_concurrency,
        goal=args.goal,
        recorded=None if from_file else team,
        workspace=workspace,
    )
    warnings = [
        *configs.warnings,
        *([note] if note else []),
        *(m.narrowed for m in plan.members.values() if m.narrowed),
        *specialist_warnings(registry),
    ]
    if warn:
        print_warnings(tuple(w for w in warnings if w), streams.stderr)
    return plan, settings, registry


def _prices(settings: RunSettings | None) -> PriceTable:
    """The built-in prices with the config's own over them."""
    return PriceTable.builtin().with_overrides(settings.prices if settings else {})


def _report_invalid(args: SwarmOptions, streams: Streams, e: TeamError) -> int:
    if args.json:
        streams.stdout.write(
            json.dumps(
                {
                    "valid": False,
                    "problems": [
                        {"path": p.path, "line": p.line, "about": p.subject, "key": p.key, "message": p.message}
                        for p in e.problems
                    ],
                },
                indent=2,
            )
            + "\n"
        )
    elif len(e.problems) == 1:
        print_error(str(e.problems[0]), streams.stderr)
    else:
        streams.stderr.write(f"zero: error: {args.team} is not a valid team file ({len(e.problems)} problems):\n")
        for problem in e.problems:
            streams.stderr.write(f"  {problem}\n")
    return 2


def _print_plan(
    plan: TeamPlan,
    settings: RunSettings | None,
    out: TextIO,
    as_json: bool,
    estimate: TeamEstimate | None,
    reuse: _Reusing | None = None,
) -> None:
    budget = plan.budget.model_dump()
    if as_json:
        out.write(
            json.dumps(
                {
                    "valid": True,
                    "team": plan.name,
                    "goal": plan.team.goal,
                    "budget": budget,
                    "maxConcurrency": plan.max_concurrency,
                    "onFailure": plan.team.scheduler.on_failure,
                    "retries": plan.team.scheduler.retries,
                    "waves": plan.waves,
                    "land": plan.team.land.model_dump(),
                    "members": [
                        {
                            "name": m.name,
                            "specialist": m.specialist.name,
                            "provider": m.provider,
                            "model": m.model,
                            "permissionMode": m.permission_mode,
                            "askedPermissionMode": m.spec.permission_mode or plan.team.defaults.permission_mode,
                            "maxTurns": m.max_turns,
                            "dependsOn": m.spec.depends_on,
                            "wave": m.wave + 1,
                            "isolation": m.isolation,
                            "budget": m.spec.budget.model_dump() if m.spec.budget else None,
                            "owns": m.spec.owns,
                            "outputSchema": m.output_schema.schema if m.output_schema else None,
                            "outputRetries": m.output_schema.retries if m.output_schema else None,
                        }
                        for m in plan.members.values()
                    ],
                    "overlaps": [o.to_json() for o in plan.overlaps],
                    "estimate": estimate.to_json() if estimate is not None else None,
                    "reuse": None
                    if reuse is None
                    else {"from": reuse.team_id, "members": [v.to_json() for v in reuse.members.values()]},
                },
                indent=2,
            )
            + "\n"
        )
        return
    console = Console(file=out, highlight=False, soft_wrap=True)
    console.print(
        f"Team [bold]{plan.name}[/bold]: {len(plan.members)} members in {len(plan.waves)} waves, "
        f"at most {plan.max_concurrency} at once, on_failure = {plan.team.scheduler.on_failure}, "
        f"retries = {plan.team.scheduler.retries}"
    )
    if plan.team.goal:
        console.print(f"Goal: {plan.team.goal.strip()}")
    for number, wave in enumerate(plan.waves, 1):
        console.print(f"Wave {number}:")
        for name in wave:
            m = plan.members[name]
            deps = f" after {', '.join(m.spec.depends_on)}" if m.spec.depends_on else ""
            grant = ""
            if m.spec.budget:
                grant = " · budget " + ", ".join(f"{k} {v:,}" for k, v in m.spec.budget.model_dump().items() if v)
            asked = m.spec.permission_mode or plan.team.defaults.permission_mode
            mode = f"{m.permission_mode} (asked for {asked})" if m.narrowed else m.permission_mode
            where = " · in a worktree" if m.isolated else ""
            # (one line each: a glob from a planner with a newline in it printed a line of its own)
            shown = [printable(g).replace("\n", "\\n") for g in m.spec.owns or ()]
            owns = f" · owns {', '.join(shown)}" if shown else ""
            waits = f" · not beside {', '.join(m.waits_for)}" if m.waits_for else ""
            typed = ""
            if m.output_schema is not None:
                retries = m.output_schema.retries
                typed = f" · typed result ({retries} retr{'y' if retries == 1 else 'ies'})"
            console.print(
                f"  {name:<16} {m.specialist.name} · {m.provider}/{m.model} · {mode} · "
                f"max {m.max_turns} turns{where}{typed}{grant}{owns}{deps}{waits}",
                markup=False,
            )
    if plan.overlaps:
        console.print("Owns that overlap (these members never run at the same time):")
        for o in plan.overlaps:
            globs = "; ".join(f"{a} and {b}" for a, b in o.globs)
            console.print(f"  {o.first}, then {o.then} ({o.by}): {globs}", markup=False)
    if any(m.isolated for m in plan.members.values()):
        land = plan.team.land
        check = f"check `{land.check}` (at most {land.timeout_seconds:g}s)" if land.check else "no check"
        console.print(f"Landing: {land.mode}, onto zero/<run>/land, {check}, into {land.into}", markup=False)
    limits = [f"{k} {v:,}" for k, v in budget.items() if v is not None]
    console.print(f"Budget: {', '.join(limits) if limits else 'none (no shared limit)'}")
    if reuse is not None:
        console.print(f"Reuse of {reuse.team_id}:")
        for v in reuse.members.values():
            console.print(f"  {v.name:<16} {'reused' if v.reused else 'runs'}: {v.reason}", markup=False)
    if estimate is not None:
        print_estimate(estimate, console)
    if settings is None:
        console.print("Provider: not configured (set a key, or pass --provider) - needed to run, not to validate")


async def _run(
    plan: TeamPlan,
    settings: RunSettings,
    registry: SpecialistRegistry,
    workspace: Path,
    args: SwarmOptions,
    *,
    streams: Streams,
    run_id: str,
    recorded: RecordedTeam | None = None,
    on_ray: bool = False,
    estimate: TeamEstimate | None = None,
    reuse: _Reusing | None = None,
) -> int:
    out = streams.stdout
    async with _context(plan, settings, registry, workspace, args, streams, on_ray) as (ctx, executor):
        # --retries overrides [scheduler] retries
        runner = TeamRunner(
            plan,
            ctx,
            executor=executor,
            retries=args.run.retries,
            resume=recorded,
            reuse=reuse.members if reuse else None,
        )
        freeze_startup_heap(streams)
        warnings = WarningLog()
        live = args.output_format == "text" and out.isatty() and not args.no_live
        async with anyio.create_task_group() as consumers:
            if args.output_format == "stream-json":
                writer = StreamJsonWriter(out, run_id, runner.session_id)
                consumers.start_soon(writer.consume, runner.events())
            else:
                consumers.start_soon(warnings.consume, runner.events())
            if live:
                console = Console(file=out)
                console.print(
                    f"team [bold]{plan.name}[/bold] · follow it from another terminal with: "
                    f"zero swarm watch {runner.session_id}",
                    highlight=False,
                )
                if estimate is not None:
                    console.print(estimate_line(estimate), highlight=False, markup=False)
                tree = TeamTree(TreeNode(session_id=runner.session_id, name=plan.name, kind="team", status="running"))
                if recorded is not None:  # a resumed run goes on from what its sessions hold
                    seed = functools.partial(tree_from_store, ctx.store, runner.session_id, clock=time.time)
                    tree = await anyio.to_thread.run_sync(seed)
                consumers.start_soon(draw_live, tree, runner.events(), console)
            elif args.output_format == "text":
                console = Console(file=streams.stderr, highlight=False, soft_wrap=True)
                spent = {m.session_id: m.usage for m in recorded.members.values()} if recorded else {}
                if estimate is not None:  # before the first call (json: the result carries it)
                    console.print(estimate_line(estimate), markup=False)
                progress = PlainProgress(plan, console, spent=spent)
                consumers.start_soon(progress.consume, runner.events())
            async with serve_control(runner, default_data_dir()):  # zero swarm stop, send, pause, continue
                result = await interruptible(runner.run, runner.interrupt, out)
    code = result.exit_code
    if args.output_format == "json":
        summary = {
            "type": "result",
            "runId": run_id,
            "team": plan.name,
            "exitCode": code,
            **result.to_json(),
            "estimate": estimate.to_json() if estimate is not None else None,
            "warnings": warnings.to_json(),
        }
        out.write(json.dumps(redact_values(Redactor(), summary), ensure_ascii=False) + "\n")
    elif args.output_format == "text":
        _print_summary(result, plan, out)
        if live:  # (the plain progress said them as they came)
            streams.stderr.write("".join(line + "\n" for line in warnings.lines()))
    return code


@contextlib.asynccontextmanager
async def _context(
    plan: TeamPlan,
    settings: RunSettings,
    registry: SpecialistRegistry,
    workspace: Path,
    args: SwarmOptions,
    streams: Streams,
    on_ray: bool,
) -> AsyncIterator[tuple[AgentContext, MemberExecutor | None]]:
    """The run's context and where its members run (None: in this process)."""
    if on_ray:
        from zero.cli.swarm_ray import on_ray as ray_context

        async with ray_context(args, plan, settings, workspace, streams, registry) as (ctx, executor):
            yield ctx, executor
    else:
        async with open_context(args.run, settings, workspace, streams, registry) as ctx:
            yield ctx, None


def _print_summary(result: TeamResult, plan: TeamPlan, out: TextIO) -> None:
    console = Console(file=out, highlight=False, soft_wrap=True, width=None if out.isatty() else 120)
    table = Table(title=f"team {plan.name} · {result.status} · session {result.session_id}", title_justify="left")
    for column in ("member", "status", "specialist", "model", "turns", "tokens", "cost", "time"):
        table.add_column(column, justify="right" if column in ("turns", "tokens", "cost", "time") else "left")
    for m in result.members:
        style = STATUS[m.status].style
        table.add_row(
            m.name,
            f"[{style}]{m.status}[/{style}]",
            m.plan.specialist.name,
            m.plan.model,
            f"{m.turns:,}",
            f"{m.total.total_tokens:,}",
            format_cost(m.total),
            f"{m.duration:.1f}s",
        )
    console.print(table)
    for m in result.members:
        console.rule(f"{m.name} · {m.status}", align="left")
        if m.reason:
            console.print(printable(m.reason), style="red", markup=False)
        console.print(printable(m.output.strip()) or "(no output)", markup=False)
    ledger = result.ledger
    limits = plan.budget
    parts = [
        f"tokens {result.usage.total_tokens:,}" + (f" of {limits.tokens:,}" if limits.tokens else ""),
        f"cost {format_cost(result.usage)}" + (f" of ${limits.cost_usd:.2f}" if limits.cost_usd else ""),
        f"model calls {int(ledger.used.turns):,}" + (f" of {limits.turns:,}" if limits.turns else ""),
        f"retries {int(ledger.used.retries):,}" + (f" of {limits.retries:,}" if limits.retries is not None else ""),
        f"time {result.duration:.1f}s" + (f" of {limits.wall_seconds:g}s" if limits.wall_seconds else ""),
    ]
    console.rule()
    console.print("Totals: " + " · ".join(parts))
    if result.trip:
        console.print(f"[red]Budget exhausted: {result.trip}[/red]")
    if result.land is not None:
        isolated = [name for name, m in plan.members.items() if m.isolated]
        print_landing(result.land, plan.team, console, team_id=result.session_id, isolated=isolated)


CONTROLS = ("stop", "send", "pause", "continue")


def _control(args: SwarmOptions, streams: Streams) -> int:
    """Ask a running team to stop, message, pause or continue a member (or every member): one line back."""
    try:
        store = session_store()
        team_id = resolve_session_id(store, args.session_id, kind="team")
        meta = store.metadata(team_id)
        if meta.session_kind != "team":
            raise UsageError(f"session {team_id} is a {meta.session_kind or 'top-level'} session, not a team run")
        text = args.text
        if text == "-":
            text = streams.stdin.read()
        told = request(store, default_data_dir(), team_id, args.action, args.member, text)
    except ZeroError as e:
        print_error(str(e), streams.stderr)
        return e.exit_code
    streams.stdout.write(printable(told) + "\n")
    return 0


def _watch(args: SwarmOptions, streams: Streams) -> int:
    try:
        store = session_store()
        here = workspace_from(args) if args.here else None
        session_id = resolve_session_id(store, args.session_id, here=here, kind="team")
        meta = store.metadata(session_id)
    except ZeroError as e:
        print_error(str(e), streams.stderr)
        return e.exit_code
    if meta.session_kind in ("member", "child"):
        root = meta.root_session_id or meta.parent_session_id
        print_error(
            f"session {session_id} is a {meta.session_kind} of the run {root}, not a run of its own; "
            f"watch the whole run with: zero swarm watch {root}",
            streams.stderr,
        )
        return 2
    console = Console(file=streams.stdout, width=None if streams.stdout.isatty() else 120)
    try:
        tree = anyio.run(follow_run, store, session_id, console)
    except Exception as group:
        error = unwrap(group)
        if not isinstance(error, ZeroError):
            raise
        print_error(str(error), streams.stderr)
        return error.exit_code
    if tree.root.status == "pending":
        print_error(f"the run {session_id} never started, and no process runs it", streams.stderr)
    return exit_code(tree.root.status, tree.root.error_code)
