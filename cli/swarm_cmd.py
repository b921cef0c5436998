"""``zero swarm run TEAM.toml`` and ``zero swarm validate TEAM.toml``."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.to_thread
from rich.console import Console
from rich.table import Table

from zero.agent import PriceTable, RunEvent
from zero.cli.common import Providers, freeze_startup_heap, make_provider, print_error, workspace_from_args
from zero.cli.config import RunSettings, load_config, resolve_settings
from zero.cli.streamjson import StreamJsonWriter, new_run_id
from zero.cli.swarm_progress import PlainProgress
from zero.errors import ConfigError, UsageError, ZeroError
from zero.orchestrator import TeamBudget, TeamError, TeamPlan, TeamResult, TeamRunner, build_plan, load_team
from zero.orchestrator.live import LiveTeamView, follow_run
from zero.sessions import SessionStore, validate_session_id
from zero.specialists import SpecialistRegistry, format_cost
from zero.tools import Workspace

__all__ = ["run_swarm"]

EXIT = {"completed": 0, "failed": 1, "budget_exhausted": 4, "interrupted": 130, "cancelled": 1}


def run_swarm(args: argparse.Namespace, stdout: TextIO | None = None) -> int:
    out = stdout or sys.stdout
    if args.swarm_command == "watch":
        return _watch(args.session_id, out)
    run_id = new_run_id()
    try:
        check_overrides(args)
        workspace = workspace_from_args(args)
        plan, settings, registry = _plan(
            args, workspace, need_provider=args.swarm_command == "run" and not args.dry_run
        )
    except TeamError as e:
        return _report_invalid(args, out, e)
    except ZeroError as e:
        if getattr(args, "output_format", "text") == "stream-json":
            StreamJsonWriter.setup_failure(out, run_id, e)
        else:
            print_error(str(e))
        return e.exit_code
    if args.swarm_command == "validate" or args.dry_run:
        _print_plan(plan, settings, out, args.json if args.swarm_command == "validate" else False)
        return 0
    assert settings is not None
    freeze_startup_heap()
    return anyio.run(_run, plan, settings, registry, workspace, args, out, run_id)


def _plan(
    args: argparse.Namespace, workspace: Path, *, need_provider: bool
) -> tuple[TeamPlan, RunSettings | None, SpecialistRegistry]:
    path = Path(args.team)
    team, _, _ = load_team(path)  # a broken shape stops here, with every problem listed
    config = load_config(workspace)
    settings: RunSettings | None = None
    try:
        settings = resolve_settings(
            config,
            provider=args.provider or team.defaults.provider,
            model=args.model or team.defaults.model,
            base_url=args.base_url,
            permission_mode=args.permission_mode or team.defaults.permission_mode,
            max_turns=None,
        )
    except ConfigError:
        if need_provider:
            raise
    registry = SpecialistRegistry.load(workspace)
    limits = team.budget.model_copy(
        update={
            k: v
            for k, v in (
                ("tokens", getattr(args, "budget_tokens", None)),
                ("cost_usd", getattr(args, "budget_cost", None)),
                ("wall_seconds", getattr(args, "budget_seconds", None)),
            )
            if v is not None
        }
    )
    prices = PriceTable.builtin().with_overrides(settings.prices if settings else {})
    plan = build_plan(
        path,
        registry,
        provider=settings.provider if settings else (team.defaults.provider or "(not configured)"),
        model=settings.model if settings else (args.model or team.defaults.model or "(provider default)"),
        permission_mode=settings.permission_mode if settings else (team.defaults.permission_mode or "auto"),
        prices=prices,
        budget=TeamBudget.model_validate(limits.model_dump()),
        max_concurrency=getattr(args, "max_concurrency", None),
        goal=getattr(args, "goal", None),
    )
    return plan, settings, registry


def _report_invalid(args: argparse.Namespace, out: TextIO, e: TeamError) -> int:
    if getattr(args, "json", False):
        out.write(
            json.dumps(
                {
                    "valid": False,
                    "problems": [
                        {"path": p.path, "line": p.line, "member": p.member, "key": p.key, "message": p.message}
                        for p in e.problems
                    ],
                },
                indent=2,
            )
            + "\n"
        )
    else:
        sys.stderr.write(f"zero: {args.team} is not a valid team file ({len(e.problems)} problems):\n")
        for problem in e.problems:
            sys.stderr.write(f"  {problem}\n")
    return 2


def _print_plan(plan: TeamPlan, settings: RunSettings | None, out: TextIO, as_json: bool) -> None:
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
                    "members": [
                        {
                            "name": m.name,
                            "specialist": m.specialist.name,
                            "provider": m.provider,
                            "model": m.model,
                            "permissionMode": m.permission_mode,
                            "maxTurns": m.max_turns,
                            "dependsOn": m.spec.depends_on,
                            "wave": m.wave + 1,
                            "budget": m.spec.budget.model_dump() if m.spec.budget else None,
                        }
                        for m in plan.members.values()
                    ],
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
                grant = " · budget " + ", ".join(f"{k} {v}" for k, v in m.spec.budget.model_dump().items() if v)
            console.print(
                f"  {name:<16} {m.specialist.name} · {m.provider}/{m.model} · {m.permission_mode} · "
                f"max {m.max_turns} turns{grant}{deps}"
            )
    limits = [f"{k} {v}" for k, v in budget.items() if v is not None]
    console.print(f"Budget: {', '.join(limits) if limits else 'none (no shared limit)'}")
    if settings is None:
        console.print("Provider: not configured (set a key, or pass --provider) - needed to run, not to validate")


async def _run(
    plan: TeamPlan,
    settings: RunSettings,
    registry: SpecialistRegistry,
    workspace: Path,
    args: argparse.Namespace,
    out: TextIO,
    run_id: str,
) -> int:
    main_provider, prices = make_provider(settings, args)
    providers = Providers(args, settings, main_provider)
    sinks: list[Any] = []
    writer: StreamJsonWriter | None = None
    store = SessionStore.default()

    async def sink(event: RunEvent) -> None:
        for s in sinks:
            await s(event)

    runner = TeamRunner(
        plan,
        store=store,
        registry=registry,
        workspace=Workspace([workspace]),
        providers=providers,
        prices=prices,
        sink=sink,
        max_depth=settings.max_depth,
    )
    if args.output_format == "stream-json":
        writer = StreamJsonWriter(out, run_id, runner.session_id)
        sinks.append(writer)
    live: LiveTeamView | None = None
    if args.output_format == "text":
        if out.isatty() and not args.no_live:
            live = LiveTeamView(runner, Console(file=out))
            sinks.append(live)
        else:
            sinks.append(PlainProgress(runner, Console(stderr=True, highlight=False)))
    result: TeamResult | None = None
    try:
        async with anyio.create_task_group() as tg:

            async def body() -> None:
                nonlocal result
                if live is not None:
                    async with live:
                        result = await runner.run()
                else:
                    result = await runner.run()
                tg.cancel_scope.cancel()

            tg.start_soon(_interrupt_on_signal, runner)
            tg.start_soon(body)
    finally:
        with anyio.CancelScope(shield=True):
            await providers.aclose()
    assert result is not None
    code = EXIT.get(result.status, 1)
    if writer is not None:
        if result.status != "completed":
            message = str(result.trip) if result.trip else _failure_summary(result)
            writer.error(result.status, message, recoverable=result.status == "budget_exhausted")
        writer.run_end(result.status, code)
    elif args.output_format == "json":
        out.write(
            json.dumps(
                {"type": "result", "runId": run_id, "team": plan.name, "exitCode": code, **result.to_json()},
                ensure_ascii=False,
            )
            + "\n"
        )
    else:
        _print_summary(result, plan, out)
    out.flush()
    return code


def _failure_summary(result: TeamResult) -> str:
    bad = [
        f"{m.name} {m.status}" + (f" ({m.reason})" if m.reason else "")
        for m in result.members
        if m.status != "completed"
    ]
    return "; ".join(bad) or result.status


def _print_summary(result: TeamResult, plan: TeamPlan, out: TextIO) -> None:
    console = Console(file=out, highlight=False, soft_wrap=True, width=None if out.isatty() else 120)
    table = Table(title=f"team {plan.name} · {result.status} · session {result.session_id}", title_justify="left")
    for column in ("member", "status", "specialist", "model", "turns", "tokens", "cost", "time"):
        table.add_column(column, justify="right" if column in ("turns", "tokens", "cost", "time") else "left")
    for m in result.members:
        style = {"completed": "green", "running": "cyan", "pending": "dim"}.get(m.status, "red")
        table.add_row(
            m.name,
            f"[{style}]{m.status}[/{style}]",
            m.plan.specialist.name,
            m.plan.model,
            str(m.turns),
            str(m.usage.total_tokens),
            format_cost(m.usage.cost_usd),
            f"{m.duration:.1f}s",
        )
    console.print(table)
    for m in result.members:
        console.rule(f"{m.name} · {m.status}", align="left")
        if m.reason:
            console.print(f"[red]{m.reason}[/red]")
        console.print(m.output.strip() or "(no output)", markup=False)
    ledger = result.ledger
    limits = plan.budget
    parts = [
        f"tokens {result.usage.total_tokens}" + (f" of {limits.tokens}" if limits.tokens else ""),
        f"cost {format_cost(result.usage.cost_usd)}" + (f" of ${limits.cost_usd:.2f}" if limits.cost_usd else ""),
        f"model calls {int(ledger.used.turns)}" + (f" of {limits.turns}" if limits.turns else ""),
        f"time {result.duration:.1f}s" + (f" of {limits.wall_seconds:g}s" if limits.wall_seconds else ""),
    ]
    console.rule()
    console.print("Totals: " + " · ".join(parts))
    if result.trip:
        console.print(f"[red]Budget exhausted: {result.trip}[/red]")


async def _interrupt_on_signal(runner: TeamRunner) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            runner.interrupt()
            return


def check_overrides(args: argparse.Namespace) -> None:
    for name in ("budget_tokens", "budget_cost", "budget_seconds", "max_concurrency"):
        value = getattr(args, name, None)
        if value is not None and value <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be positive")


def _watch(session_id: str, out: TextIO) -> int:
    store = SessionStore.default()
    try:
        validate_session_id(session_id)
        store.metadata(session_id)
    except ZeroError as e:
        print_error(str(e))
        return 2
    tree = anyio.run(follow_run, store, session_id, Console(file=out, width=None if out.isatty() else 120))
    status = tree.root.status
    return EXIT.get(status, 1)
