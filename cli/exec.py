"""``zero exec``: one headless run, printed as text, one JSON object, or stream-json."""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import anyio

from zero.agent import RunResult, Usage, exit_code, format_cost, incomplete_message
from zero.agent.prompts import default_system_prompt
from zero.cli._console import Console
from zero.cli._warnings import WarningLog
from zero.cli.common import (
    Opener,
    Streams,
    freeze_startup_heap,
    interruptible,
    open_context,
    print_error,
    print_warnings,
    settings_from,
    unwrap,
    workspace_from,
)
from zero.cli.config import RunSettings
from zero.cli.options import ExecOptions, OutputFormat, ResumeOptions, ShellOptions
from zero.cli.progress import TextProgress
from zero.cli.streamjson import StreamJsonWriter, new_run_id, read_input
from zero.errors import UsageError, ZeroError
from zero.specialists import open_agent
from zero.tools import Redactor, redact_values
from zero.tools.describe import printable

__all__ = ["run_exec"]


PROMPT_LIMIT = 32 * 2**20  # characters of a prompt: far past any model's context window


def _read_prompt(args: ExecOptions, stdin: TextIO) -> str:
    if args.prompt is not None and args.file:
        raise UsageError("give the prompt as an argument or with --file, not both")
    if args.file:
        try:
            with open(args.file, encoding="utf-8") as file:
                text = _bounded(file, f"--file {args.file}")
        except IsADirectoryError:
            raise UsageError(f"--file {args.file}: is a folder, not a file") from None
        except OSError as e:
            raise UsageError(f"--file {args.file}: {e.strerror}") from e
        except UnicodeDecodeError as e:
            raise UsageError(f"--file {args.file}: is not UTF-8 text (byte {e.start})") from None
        source, named = args.file, f"the file {args.file}"
    elif args.prompt is not None:
        text, source, named = args.prompt, "prompt", "the prompt argument"
    elif not stdin.isatty():
        try:
            text, source, named = _bounded(stdin, "the prompt on stdin"), "stdin", "standard input"
        except UnicodeDecodeError as e:
            raise UsageError(f"the prompt on stdin is not UTF-8 text (byte {e.start})") from None
    else:
        raise UsageError("no prompt: pass it as an argument, with --file, or on stdin")
    try:
        text.encode("utf-8")  # (an argument or stdin of other bytes comes with them escaped as surrogates)
    except UnicodeEncodeError as e:
        byte = len(text[: e.start].encode("utf-8", "surrogateescape"))
        raise UsageError(f"{named} is not UTF-8 text (byte {byte})") from None
    if args.input_format == "stream-json":
        return read_input(text.splitlines(), source)
    if not text.strip():
        what = "blank" if text else "empty"
        raise UsageError(f"{named} is {what}: give the prompt as an argument, with --file, or on standard input")
    return text


def _bounded(stream: TextIO, named: str) -> str:
    """What ``stream`` holds, read a megabyte at a time (Ctrl-C works between reads); more than PROMPT_LIMIT
    (``/dev/zero``, ``yes |``) is a usage error, not all the memory there is."""
    parts: list[str] = []
    size = 0
    while chunk := stream.read(2**20):
        size += len(chunk)
        if size > PROMPT_LIMIT:
            raise UsageError(f"{named} goes on past {PROMPT_LIMIT // 2**20} MB, more than any model reads")
        parts.append(chunk)
    return "".join(parts)


def run_exec(args: ExecOptions, streams: Streams) -> int:
    """``zero exec``: a new agent on the prompt."""

    def prepare(workspace: Path, settings: RunSettings, prompt: str) -> Opener:
        return lambda ctx: open_agent(
            ctx,
            title=prompt.strip().splitlines()[0],
            system_prompt=default_system_prompt(str(workspace)),
            permission_mode=settings.permission_mode,
            max_turns=settings.max_turns,
        )

    return _run(args, streams, prepare)


def run_resume(args: ResumeOptions, streams: Streams) -> int:
    """``zero sessions resume ID PROMPT``: a recorded session continued, headless, as ``exec`` runs;
    without a prompt, in a terminal, in the interactive shell."""
    if args.prompt is None and not args.file and streams.stdin.isatty():
        from zero.cli.shell import run_shell

        return run_shell(ShellOptions(cwd=args.cwd, debug=args.debug, run=args.run, resume=args.session_id), streams)
    from zero.cli.resume import resumed

    return _run(args, streams, lambda workspace, settings, prompt: resumed(args, workspace, settings))


def _run(args: ExecOptions, streams: Streams, prepare: Callable[[Path, RunSettings, str], Opener]) -> int:
    run_id = new_run_id()
    try:
        workspace = workspace_from(args)
        prompt = _read_prompt(args, streams.stdin)
        settings = settings_from(args.run, workspace)
        opener = prepare(workspace, settings, prompt)
    except ZeroError as e:
        return _fail_early(args.output_format, streams, run_id, e)
    print_warnings(settings.warnings, streams.stderr)
    with streams.unblocked() as out:
        try:
            return anyio.run(_execute, workspace, prompt, settings, args, out, run_id, opener)
        except Exception as group:  # the provider or the session store failed: nothing was half-written
            error = unwrap(group)
            if not isinstance(error, ZeroError):
                raise
            if args.debug:
                traceback.print_exception(error, file=out.stderr)
            return _fail_early(args.output_format, out, run_id, error)


def _fail_early(fmt: OutputFormat, streams: Streams, run_id: str, e: ZeroError) -> int:
    if fmt == "stream-json":
        StreamJsonWriter.setup_failure(streams.stdout, run_id, e)
    elif fmt == "json":
        error = {"code": e.code, "message": str(e)}
        result = {"type": "result", "runId": run_id, "status": "failed", "exitCode": e.exit_code, "error": error}
        streams.stdout.write(json.dumps(result) + "\n")
    else:
        print_error(str(e), streams.stderr)
    return e.exit_code


async def _execute(
    workspace: Path,
    prompt: str,
    settings: RunSettings,
    args: ExecOptions,
    streams: Streams,
    run_id: str,
    opener: Opener,
) -> int:
    async with open_context(args.run, settings, workspace, streams) as ctx:
        session = await opener(ctx)
        freeze_startup_heap(streams)
        warnings = WarningLog()
        async with anyio.create_task_group() as consumers:
            if args.output_format == "stream-json":
                writer = StreamJsonWriter(streams.stdout, run_id, session.session_id)
                consumers.start_soon(writer.consume, session.events())
            else:
                consumers.start_soon(warnings.consume, session.events())
            if args.output_format == "text":
                progress = TextProgress(Console(file=streams.stderr, highlight=False, soft_wrap=True))
                consumers.start_soon(progress.consume, session.events())
            async with session:
                result = await interruptible(
                    lambda: session.send(prompt), lambda: session.cancel("interrupted"), streams.stdout
                )
    total = session.run_usage  # with its children's
    code = exit_code(result.status, result.error_code)
    if args.output_format == "json":
        streams.stdout.write(_json_result(run_id, session.session_id, result, code, total, warnings) + "\n")
    elif args.output_format == "text":
        _print_text(result, session.session_id, total, streams)
    return code


def _json_result(run_id: str, session_id: str, result: RunResult, code: int, total: Usage, warnings: WarningLog) -> str:
    failed = result.status != "completed"
    return json.dumps(
        redact_values(
            Redactor(),
            {
                "type": "result",
                "runId": run_id,
                "sessionId": session_id,
                "status": result.status,
                "exitCode": code,
                "result": result.output,
                "usage": result.usage.to_json(),
                "subtreeUsage": total.to_json(),
                "costUsd": total.to_json()["costUsd"],
                "turns": result.turns,
                "error": {
                    "code": result.error_code or result.status,
                    "message": result.error or incomplete_message(result.status, result.turns),
                }
                if failed
                else None,
                "warnings": warnings.to_json(),
            },
        ),
        ensure_ascii=False,
    )


def _print_text(result: RunResult, session_id: str, total: Usage, streams: Streams) -> None:
    if result.output:
        streams.stdout.write(printable(result.output.rstrip("\n")) + "\n")
    if result.status != "completed":
        print_error(printable(result.error or incomplete_message(result.status, result.turns)), streams.stderr)
    children = total.total_tokens - result.usage.total_tokens
    tokens = f"{'~' if total.estimated else ''}{total.total_tokens:,} tokens" + (
        f" ({children:,} in specialists)" if children else ""
    )
    turns = f"{result.turns:,} turn{'' if result.turns == 1 else 's'}"
    streams.stderr.write(f"[session {session_id} · {result.status} · {turns} · {tokens} · cost {format_cost(total)}]\n")
