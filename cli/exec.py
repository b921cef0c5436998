"""``zero exec``: one headless run, printed as text, one JSON object, or stream-json."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio

from zero.agent import AgentRun, PriceTable, Provider, RunEvent
from zero.agent.prompts import default_system_prompt
from zero.cli.common import (
    Providers,
    exit_code,
    freeze_startup_heap,
    make_provider,
    print_error,
    settings_from_args,
    workspace_from_args,
)
from zero.cli.config import RunSettings
from zero.cli.progress import TextProgress
from zero.cli.streamjson import StreamJsonWriter, new_run_id, read_input
from zero.errors import UsageError, ZeroError
from zero.sessions import SessionMetadata, SessionRecorder, SessionStore, new_session_id
from zero.specialists import AgentContext, Delegator, SpecialistRegistry, delegating_agent, format_cost
from zero.tools import Workspace

__all__ = ["run_exec"]


@dataclass
class _Setup:
    workspace: Path
    prompt: str
    settings: RunSettings
    provider: Provider
    prices: PriceTable


def _read_prompt(args: argparse.Namespace, stdin: TextIO) -> str:
    if args.prompt is not None and args.file:
        raise UsageError("give the prompt as an argument or with --file, not both")
    if args.file:
        try:
            text = Path(args.file).read_text("utf-8")
        except OSError as e:
            raise UsageError(f"--file {args.file}: {e.strerror}") from e
        source = args.file
    elif args.prompt is not None:
        text, source = args.prompt, "prompt"
    elif not stdin.isatty():
        text, source = stdin.read(), "stdin"
    else:
        raise UsageError(
            'no prompt: pass it as an argument (zero exec "fix the failing test"), with --file, or on stdin'
        )
    if args.input_format == "stream-json":
        return read_input(text.splitlines(), source)
    if not text.strip():
        raise UsageError(f"the prompt from {source} is empty")
    return text


def run_exec(args: argparse.Namespace, stdout: TextIO | None = None, stdin: TextIO | None = None) -> int:
    out = stdout or sys.stdout
    run_id = new_run_id()
    try:
        workspace = workspace_from_args(args)
        prompt = _read_prompt(args, stdin or sys.stdin)
        if args.max_turns is not None and args.max_turns < 1:
            raise UsageError("--max-turns must be at least 1")
        settings = settings_from_args(args, workspace)
        provider, prices = make_provider(settings, args)
    except ZeroError as e:
        return _fail_early(args.output_format, out, run_id, e)
    setup = _Setup(workspace, prompt, settings, provider, prices)
    freeze_startup_heap()
    try:
        return anyio.run(_execute, setup, args, out, run_id)
    except ZeroError as e:  # the session store failed, or similar: nothing was left half-written
        if args.debug:
            traceback.print_exc()
        return _fail_early(args.output_format, out, run_id, e)


def _fail_early(fmt: str, out: TextIO, run_id: str, e: ZeroError) -> int:
    if fmt == "stream-json":
        StreamJsonWriter.setup_failure(out, run_id, e)
    elif fmt == "json":
        out.write(
            json.dumps(
                {
                    "type": "result",
                    "runId": run_id,
                    "status": "failed",
                    "exitCode": e.exit_code,
                    "error": {"code": e.code, "message": str(e)},
                }
            )
            + "\n"
        )
    else:
        print_error(str(e))
    return e.exit_code


async def _execute(setup: _Setup, args: argparse.Namespace, out: TextIO, run_id: str) -> int:
    store = SessionStore.default()
    session_id = new_session_id()
    title = setup.prompt.strip().splitlines()[0][:80]
    await anyio.to_thread.run_sync(
        store.create,
        SessionMetadata(
            session_id=session_id,
            title=title,
            cwd=str(setup.workspace),
            provider=setup.settings.provider,
            model_id=setup.settings.model,
            root_session_id=session_id,
            agent_name="zero",
        ),
    )
    sinks: list[Any] = [SessionRecorder(store, session_id)]
    writer: StreamJsonWriter | None = None
    if args.output_format == "stream-json":
        writer = StreamJsonWriter(out, run_id, session_id)
        sinks.append(writer)
    elif args.output_format == "text":
        sinks.append(TextProgress())

    async def sink(event: RunEvent) -> None:
        for s in sinks:
            await s(event)

    workspace = Workspace([setup.workspace])
    registry = await anyio.to_thread.run_sync(SpecialistRegistry.load, setup.workspace)
    for problem in registry.errors:
        sys.stderr.write(f"zero: warning: skipped specialist manifest {problem}\n")
    providers = Providers(args, setup.settings, setup.provider)
    context = AgentContext(
        store=store,
        registry=registry,
        workspace=workspace,
        provider=setup.provider,
        model=setup.settings.model,
        providers=providers,
        sink=sink,
        prices=setup.prices,
        max_depth=setup.settings.max_depth,
        max_concurrency=setup.settings.max_concurrency,
    )
    run, delegator = delegating_agent(
        context,
        session_id=session_id,
        system_prompt=default_system_prompt(str(setup.workspace)),
        permission_mode=setup.settings.permission_mode,
        max_turns=setup.settings.max_turns,
        sink=sink,
    )
    try:
        async with anyio.create_task_group() as tg:

            async def body() -> None:
                async with delegator:
                    await run.run(setup.prompt)
                tg.cancel_scope.cancel()

            tg.start_soon(_stop_on_signal, run, delegator, tg.cancel_scope)
            tg.start_soon(body)
    finally:
        with anyio.CancelScope(shield=True):
            await providers.aclose()
            await anyio.to_thread.run_sync(store.flush)  # every session's final status, on disk
    assert run.result is not None  # the loop records a result even when interrupted
    result = run.result
    status, output, error_code, error = result.status, result.output, result.error_code, result.error
    usage, turns = result.usage, result.turns
    code = exit_code(status, error_code)
    total = (await anyio.to_thread.run_sync(store.metadata, session_id)).subtree_usage
    if writer is not None:
        if status != "completed":
            message = error or _incomplete_message(status, turns)
            writer.error(error_code or status, message, recoverable=status in ("max_turns", "interrupted"))
        writer.run_end(status, code)
    elif args.output_format == "json":
        out.write(
            json.dumps(
                {
                    "type": "result",
                    "runId": run_id,
                    "sessionId": session_id,
                    "status": status,
                    "exitCode": code,
                    "result": output,
                    "usage": usage.to_json(),
                    "subtreeUsage": total.to_json(),
                    "costUsd": total.to_json()["costUsd"],
                    "turns": turns,
                    "error": {"code": error_code or status, "message": error or _incomplete_message(status, turns)}
                    if status != "completed"
                    else None,
                },
                ensure_ascii=False,
            )
            + "\n"
        )
    else:
        if output:
            out.write(output.rstrip("\n") + "\n")
        if status != "completed":
            print_error(error or _incomplete_message(status, turns))
        cost = format_cost(total.cost_usd)
        children = total.total_tokens - usage.total_tokens
        tokens = f"{total.total_tokens} tokens" + (f" ({children} in specialists)" if children else "")
        sys.stderr.write(
            f"[session {session_id} · {status} · {turns} turn{'' if turns == 1 else 's'} · {tokens} · cost {cost}]\n"
        )
    out.flush()
    return code


def _incomplete_message(status: str, turns: int) -> str:
    return {
        "max_turns": f"stopped after {turns} model calls (max turns); the answer above is partial",
        "interrupted": "interrupted; the session keeps everything up to this point",
        "cancelled": "cancelled; the session keeps everything up to this point",
    }.get(status, status)


async def _stop_on_signal(run: AgentRun, delegator: Delegator, scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            run.cancel_status = "interrupted"
            delegator.mark_stopping("interrupted")
            scope.cancel()
            return
