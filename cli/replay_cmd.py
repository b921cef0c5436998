"""``zero replay ID|SCRIPT`` and ``zero swarm run TEAM.toml --replay ID|SCRIPT``: a recorded run again, offline,
on the script of its model calls with the real tools, and where it went another way than the recording.

The replay is a run like any other (``zero exec``'s, or ``zero swarm run``'s, with the scripted provider and
the user's own flags, so never a wider permission mode than they give), its top session linked to the
recording (``replayOf``); then its sessions are compared with the script's, session by session and call by
call (``zero.sessions.script.divergences``).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

import tomli_w

from zero.cli.common import Streams, current_folder, print_error, session_store
from zero.cli.options import ExecOptions, ReplayOptions, ResumeOptions, RunOptions, SwarmOptions
from zero.cli.session_ids import resolve_session_id
from zero.errors import UsageError, ZeroError
from zero.sessions.script import (
    NO_TURN,
    Divergence,
    answered,
    counted,
    divergences,
    export_script,
    moved,
    recorded_sessions,
)
from zero.strictfile import FileError, write_file
from zero.tools.describe import printable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from zero.agent.providers.scripted import Script, ScriptRecording

__all__ = ["replay_team_file", "run_replay", "write_script"]


def run_replay(args: ReplayOptions, streams: Streams) -> int:
    """``zero replay``: the recorded run (an agent's or a team's) again, and the report."""
    try:
        with _script(args.source) as (script, folder):
            recording = _recording(script, args.source)
            if recording.kind == "team":  # the team file as it ran, beside the script (never in the workspace)
                team = folder / "team.json"
                team.write_text(json.dumps(recording.team), encoding="utf-8")
                what = SwarmOptions(action="run", team=str(team), cwd=_workspace(args))
                return _replay(script, folder, what, args.run, args.output_format, streams)
            return _replay(script, folder, _agent(args, recording), args.run, args.output_format, streams)
    except ZeroError as e:  # (which may quote the script: its session id, a kind)
        print_error(printable(str(e)), streams.stderr)
        return e.exit_code


def replay_team_file(args: SwarmOptions, streams: Streams) -> int:
    """``zero swarm run TEAM.toml --replay ID|SCRIPT``: the team file (as it is now) on that run's model calls."""
    assert args.replay is not None
    try:
        if args.output_format == "stream-json":
            raise UsageError("--replay prints a report: give --output-format text or json")
        if args.dry_run or args.reuse:
            flag = "--dry-run" if args.dry_run else "--reuse"
            raise UsageError(f"--replay runs every member on the recorded calls: leave out {flag}")
        with _script(args.replay) as (script, folder):
            recording = _recording(script, args.replay)
            if recording.kind != "team":
                raise UsageError(
                    f"--replay {args.replay}: the recording is an agent's run, not a team's; "
                    f"replay it with: zero replay {args.replay}"
                )
            what = replace(args, replay=None)  # in this folder (or --cwd), as swarm run runs
            fmt = "json" if args.output_format == "json" else "text"
            return _replay(script, folder, what, args.run, fmt, streams)
    except ZeroError as e:  # (which may quote the script: its session id, a kind)
        print_error(printable(str(e)), streams.stderr)
        return e.exit_code


def write_script(script: Script, path: Path | None, out: TextIO, *, force: bool = False) -> None:
    """``script`` as TOML (JSON for a ``.json`` path) to ``path`` (a new file, or with ``force`` an existing one;
    see ``write_file``), whole or not at all; None: to ``out``."""
    try:
        data = script.model_dump(mode="json", exclude_defaults=True)
    except ValueError as e:  # (pydantic's depth limit: no session's log can hold such a call either)
        raise UsageError(f"the script's tool calls nest too deeply to run or record ({e})") from None
    try:
        text = json.dumps(data, indent=2) + "\n" if path and path.suffix == ".json" else tomli_w.dumps(data)
    except TypeError:  # a value TOML has no form for (a null in a tool call's arguments)
        raise UsageError(
            "this run's tool calls hold a value TOML cannot write (null): export it as JSON, with -o FILE.json"
        ) from None
    if path is None:
        out.write(text)
        return
    try:
        write_file(path, text.encode(), force=force)
    except OSError as e:
        raise UsageError(f"-o {path}: {e.strerror or e}") from None


@contextmanager
def _script(source: str) -> Iterator[tuple[Script, Path]]:
    """The script ``source`` names (a script file, else a session, exported) and a temporary folder for the
    run's files (the script it runs on, a team's file)."""
    from zero.agent.providers.scripted import load_script

    with tempfile.TemporaryDirectory(prefix="zero-replay-") as name:
        folder, given = Path(name), Path(source)
        if is_script_file(source):
            try:
                script = load_script(given)
            except FileError as e:
                raise UsageError(f"{source} is not a script of a recorded run:\n  {e}") from None
            yield script, folder
            return
        store = session_store(writable=True)  # (a run found dead is marked interrupted: it can be replayed)
        yield export_script(store, resolve_session_id(store, source)), folder


def is_script_file(source: str) -> bool:
    """Whether ``source`` names a script file (it ends in ``.toml`` or ``.json``, or holds a ``/``) rather than
    a session (an id, a prefix or ``last``): by its form alone, so a file named ``last`` that a cloned
    repository ships never stands for your newest session."""
    return source.endswith((".toml", ".json")) or "/" in source or os.sep in source


def _recording(script: Script, source: str) -> ScriptRecording:
    if script.recording is None:
        raise UsageError(
            f"{source} is a script without a recording (no [recording] table): only a script that "
            "zero sessions export --as-script wrote can be replayed"
        )
    recording = script.recording
    if recording.kind == "agent" and not recording.prompts:
        raise UsageError(f"the recording {recording.session_id} has no prompt: its run never began")
    if recording.kind == "team" and not recording.team:
        raise UsageError(f"the team run {recording.session_id} did not record its team file, so it cannot be replayed")
    return recording


def _workspace(args: ReplayOptions) -> str:
    """Where the replay runs: ``--workspace``, else the current folder. Never the recorded workspace: a script
    is a file anyone can edit or ship (a cloned repository's), and its ``workspace`` could name your home."""
    workspace = args.cwd or str(current_folder("--workspace"))
    if not Path(workspace).is_dir():
        raise UsageError(f"--workspace {workspace} is not a folder: give the folder to replay in")
    return str(Path(workspace).resolve())


def _agent(args: ReplayOptions, recording: ScriptRecording) -> ExecOptions:
    """An agent's replay: its first prompt as ``zero exec`` runs it (the others follow as resumes)."""
    if recording.session_kind in ("child", "member", "fork"):
        top = "the run it belongs to" if recording.session_kind != "fork" else "the session it was forked from"
        raise UsageError(
            f"{recording.session_id} is a {recording.session_kind} session: a replay starts a run from its top, so "
            f"replay {top} (zero sessions lineage {recording.session_id} names it)"
        )
    return ExecOptions(prompt=recording.prompts[0], cwd=_workspace(args), debug=args.debug)


def _replay(
    script: Script,
    folder: Path,
    what: ExecOptions | SwarmOptions,
    flags: RunOptions,
    fmt: str,
    streams: Streams,
) -> int:
    """Run ``what`` on ``script`` (written in ``folder``) with the user's ``flags``, then compare and report."""
    recording = script.recording
    assert recording is not None
    if flags.provider not in (None, "scripted") or flags.base_url or flags.script:
        raise UsageError("a replay's model is its recording: leave out --provider, --base-url and --script")
    workspace = what.cwd or str(current_folder())  # (swarm run --replay runs in this folder, or --cwd)
    path = folder / "script.json"
    write_script(moved(script, workspace), path, io.StringIO())
    run = replace(
        flags,
        provider="scripted",
        script=str(path),
        model=flags.model or recording.model or None,
        replay_of=recording.session_id,
    )
    result = _run(replace(what, run=run), streams)
    if "sessionId" not in result:  # it could not start: said already, as the run says it
        code = int(result.get("exitCode", 1))
        error = result.get("error") or {}
        if error:
            print_error(str(error.get("message", "")), streams.stderr)
        return code
    replay_id = str(result["sessionId"])
    stopped = _error(result)
    if isinstance(what, ExecOptions):  # the recorded session's later runs, each on its own prompt
        for prompt in recording.prompts[1:]:
            later = ResumeOptions(session_id=replay_id, prompt=prompt, cwd=what.cwd, run=run, debug=what.debug)
            result = _run(later, streams)
            if int(result.get("exitCode", 0)) == 130:
                return _interrupted(recording, replay_id, workspace, fmt, streams.stdout)
            stopped = stopped or _error(result)
    if int(result.get("exitCode", 0)) == 130:
        return _interrupted(recording, replay_id, workspace, fmt, streams.stdout)
    store = session_store()
    found = divergences(script, recorded_sessions(store, replay_id))
    status = store.metadata(replay_id).status
    _report(found, recording, replay_id, status, workspace, stopped, script, fmt, streams.stdout)
    return 1 if found else 0


def _interrupted(recording: ScriptRecording, replay_id: str, workspace: str, fmt: str, out: TextIO) -> int:
    """Say that the replay was stopped (Ctrl-C, SIGTERM) before it was compared: its session, nothing to judge."""
    if fmt == "json":
        report = {
            "type": "replay",
            "recorded": recording.session_id,
            "sessionId": replay_id,
            "status": "interrupted",
            "workspace": workspace,
            "exitCode": 130,
        }
        out.write(json.dumps(report, ensure_ascii=False) + "\n")
    else:
        out.write(
            f"the replay of {printable(recording.session_id)} as {replay_id} was interrupted in "
            f"{printable(workspace)}: not compared with the recording\n"
        )
    return 130


def _error(result: dict[str, Any]) -> str:
    """The message of the error a run's JSON result says it ended on ("" if none, or if it is the scripted
    provider's for a call the script lacks: the report's ``extra_call`` says that one)."""
    error = result.get("error")
    message = str(error.get("message") or "") if isinstance(error, dict) else ""
    return "" if message.startswith(NO_TURN) else message


def _run(what: ExecOptions | SwarmOptions, streams: Streams) -> dict[str, Any]:
    """Run ``what`` as its command does, with one JSON result (which this reads) instead of its output."""
    from zero.cli.exec import run_exec, run_resume
    from zero.cli.swarm_cmd import run_swarm

    buffer = io.StringIO()
    inner = Streams(buffer, streams.stderr, streams.stdin, streams.real)
    if isinstance(what, SwarmOptions):
        code = run_swarm(replace(what, output_format="json", accept_estimate=True, no_live=True), inner)
    elif isinstance(what, ResumeOptions):
        code = run_resume(replace(what, output_format="json"), inner)
    else:
        code = run_exec(replace(what, output_format="json"), inner)
    lines = [line for line in buffer.getvalue().splitlines() if line.startswith("{")]
    try:
        result: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        result = {}
    result.setdefault("exitCode", code)
    return result


def _report(
    found: list[Divergence],
    recording: ScriptRecording,
    replay_id: str,
    status: str,
    workspace: str,
    stopped: str,
    script: Script,
    fmt: str,
    out: TextIO,
) -> None:
    """The report, as text or one JSON object. Everything in it that comes from the script (its session ids,
    labels, recorded outputs) is printed with its control characters escaped: an escape sequence there could
    clear the lines above it, the divergences. ``stopped``: the error the replayed run ended on, said first (what
    a "never made" below follows from)."""
    calls = answered(script.turns)
    tools = sum(len(t.results) for t in calls)
    if fmt == "json":
        report = {
            "type": "replay",
            "recorded": recording.session_id,
            "sessionId": replay_id,
            "status": status,
            "workspace": workspace,
            "error": stopped or None,
            "diverged": bool(found),
            "exitCode": 1 if found else 0,
            "modelCalls": len(calls),
            "toolCalls": tools,
            "divergences": [d.to_json() for d in found],
        }
        out.write(json.dumps(report, ensure_ascii=False) + "\n")
        return
    out.write(f"replayed {printable(recording.session_id)} as {replay_id} ({status}) in {printable(workspace)}\n")
    if stopped:
        out.write(f"the replayed run stopped on an error: {printable(stopped)}\n")
    if not found:
        out.write(
            f"no divergence: {counted(len(calls), 'model call')} and {counted(tools, 'tool result')} as "
            f"recorded, in {counted(len(recording.sessions), 'session')}\n"
        )
        return
    out.write(f"{counted(len(found), 'divergence')} from the recording:\n")
    for d in found:
        out.write(f"- {printable(d.message)} [session {printable(d.session_id)}]\n")
        for line in d.diff.splitlines():
            out.write(f"    {printable(line)}\n")
