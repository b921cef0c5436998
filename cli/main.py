"""``zero`` argument parsing and dispatch.

This module imports nothing heavy: ``zero --help`` must stay fast, so each command
module (and the SDKs behind it) is imported only when that command runs.
"""

from __future__ import annotations

import argparse
import signal
import sys

from zero import __version__
from zero.cli._choices import PERMISSION_MODES, PROVIDERS
from zero.cli._streams import CheckedOutput, Streams

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (~2 ms of zero --help)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import TextIO

    from zero.cli.options import Command
    from zero.errors import ZeroError

__all__ = ["PERMISSION_MODES", "PROVIDERS", "build_parser", "main"]


COMMAND_HELP = {
    "exec": "run one task headless",
    "specialists": "list, show, create and check specialist manifests",
    "swarm": "run a team of specialists under one shared budget",
    "sessions": "read, resume, fork, export and remove recorded sessions",
    "mcp": "MCP servers for Zero's agents, and Zero as an MCP server",
    "acp": "serve an editor over the Agent Client Protocol (stdio)",
    "replay": "run a recorded run again offline and report where it diverges",
}
COMMANDS = tuple(COMMAND_HELP)
_STOPS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``zero COMMAND ...``; ``only``: the arguments of that command alone ("" none: ``--help``
    lists the commands; None all of them)."""
    parser = argparse.ArgumentParser(
        prog="zero",
        description="Zero: a terminal coding agent built around multi-agent orchestration. "
        "Without a command, zero [PROMPT] opens the interactive shell (--continue, --resume ID).",
        epilog="Exit codes: 0 success, 1 run failed, 2 usage or configuration error, 3 provider error, "
        "4 incomplete (budget or max turns), 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"zero {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    subs = {name: commands.add_parser(name, help=text) for name, text in COMMAND_HELP.items()}
    if only != "":
        from zero.cli.arguments import ARGUMENTS

        for name, sub in subs.items():
            if only is None or only == name:
                ARGUMENTS[name](sub)
                _debuggable(sub)
    return parser


def _debuggable(parser: argparse.ArgumentParser) -> None:
    """``--debug`` on every command (an internal error says to run it again with it)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for sub in (p for action in subs for p in action.choices.values()):
        _debuggable(sub)
    if not subs and "--debug" not in parser._option_string_actions:
        parser.add_argument("--debug", action="store_true", help="show tracebacks")


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    stdin: TextIO | None = None,
) -> int:
    """Run the ``zero`` command line; returns the exit code.

    ``argv`` None means this is Zero's own process (the console script); tests pass ``argv``
    and their own streams.
    """
    out = stdout or (CheckedOutput(sys.stdout) if argv is None else sys.stdout)
    streams = Streams(out, stderr or sys.stderr, stdin or sys.stdin, real=argv is None)  # type: ignore[arg-type]
    words = list(sys.argv[1:] if argv is None else argv)
    if words in (["help"], ["version"]):  # as commands, not a first message sent to a paid model
        words = ["--" + words[0]]
    shell = not words or (words[0] not in COMMANDS and words[0] not in ("-h", "--help", "--version"))
    if shell:
        from zero.cli.arguments import shell_parser

        parser = shell_parser()
    else:
        parser = build_parser(words[0] if words[0] in COMMANDS else "")
    server_command: list[str] = []
    if words[:2] == ["mcp", "add"] and "--" in words:  # the server's own command line, after --, as it is
        at = words.index("--")
        words, server_command = words[:at], words[at + 1 :]
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = streams.stdout, streams.stderr  # where argparse prints help and usage errors
    try:
        namespace = parser.parse_args(words)
    except SystemExit as e:  # --help, --version, or a usage error (already printed)
        return int(e.code or 0)
    except Exception as e:  # (the help could not be written)
        if (unwritten := _unwritten(e)) is None:
            raise
        return _said(streams, unwritten)
    finally:
        sys.stdout, sys.stderr = saved
    from zero.cli.arguments import options_of

    options = options_of(namespace, server_command)
    if streams.real and sys.stdout is None:  # (closed: nothing the command does could be told, so it does nothing)
        from zero.errors import OutputError

        return _said(streams, OutputError("cannot write to standard output: the descriptor is closed"))
    try:
        # Ctrl-C, SIGTERM and SIGHUP wait while the command's modules load (pydantic-core's set-up, interrupted by
        # one, panics: exit 1 and a Rust backtrace), and are taken the moment they are loaded (130).
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS) if streams.real else None
        try:
            command = _command(options)
        finally:
            if held is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return command(streams)
    except KeyboardInterrupt:  # Ctrl-C (or SIGTERM) before a run could take it over: quietly
        return 130
    except BrokenPipeError:  # the reader went away (``| head``): nothing more to say, to anyone
        _quiet(streams)
        return 141
    except Exception as e:
        if options.debug:
            raise
        if (unwritten := _unwritten(e)) is not None:  # (raised where no command's own handler was)
            return _said(streams, unwritten)
        streams.stderr.write(
            f"zero: internal error (a bug in Zero; please report it): {type(e).__name__}: {e}\n"
            "zero: run the same command with --debug to see where it happened\n"
        )
        return 1


def _command(options: Command) -> Callable[[Streams], int]:
    """The command ``options`` asks for, its modules loaded (the one place each is imported)."""
    from functools import partial
    from typing import assert_never

    from zero.cli import options as kinds

    match options:
        case kinds.ShellOptions():
            from zero.cli.shell import run_shell

            return partial(run_shell, options)
        case kinds.ResumeOptions():
            from zero.cli.exec import run_resume

            return partial(run_resume, options)
        case kinds.ExecOptions():
            from zero.cli.exec import run_exec

            return partial(run_exec, options)
        case kinds.SpecialistsOptions():
            from zero.cli.specialists_cmd import run_specialists

            return partial(run_specialists, options)
        case kinds.SwarmOptions() if options.action == "plan":
            from zero.cli.swarm_plan import run_plan

            return partial(run_plan, options)
        case kinds.SwarmOptions() if options.replay:
            from zero.cli.replay_cmd import replay_team_file

            return partial(replay_team_file, options)
        case kinds.SwarmOptions():
            from zero.cli.swarm_cmd import run_swarm

            return partial(run_swarm, options)
        case kinds.AcpOptions():
            import anyio

            from zero.cli.acp_agent import serve

            return lambda streams: anyio.run(serve, options, streams)
        case kinds.McpOptions():
            from zero.cli.mcp_cmd import run_mcp

            return partial(run_mcp, options)
        case kinds.SessionsOptions():
            from zero.cli.sessions_cmd import run_sessions

            return partial(run_sessions, options)
        case kinds.ReplayOptions():
            from zero.cli.replay_cmd import run_replay

            return partial(run_replay, options)
        case _:
            assert_never(options)


def _said(streams: Streams, error: ZeroError) -> int:
    streams.stderr.write(f"zero: error: {error}\n")
    return error.exit_code


def _unwritten(error: Exception) -> ZeroError | None:
    """``error`` if it says stdout could not be written."""
    from zero.errors import OutputError

    return error if isinstance(error, OutputError) else None


def _quiet(streams: Streams) -> None:
    """After a closed pipe: point stdout at /dev/null, so Python's own last flush has nowhere to fail."""
    if streams.real:
        import os

        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM or SIGHUP before a run installs its own handler: end as Ctrl-C does (130)


def _standard_streams() -> None:
    """Descriptors 0-2 as a run needs them. One the caller closed (``<&-``, ``2>&-``) is /dev/null: else the next
    file Zero opens takes its number, and a tool's process writing to its stderr writes into that file (a
    session's log). A closed stdin reads as empty, a closed stderr takes what is said; a closed stdout stays
    None for ``CheckedOutput`` to report. Text the output's encoding cannot hold (``PYTHONIOENCODING=ascii``)
    is written as JSON-style escapes (valid inside stream-json's strings), not an error or silence."""
    import codecs
    import os

    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)  # (the lowest free number: fd)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            if fd == 0:
                sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 (the process's, for its life)
            elif fd == 2:
                sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    codecs.register_error("zero-escape", _escaped)
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and stream.errors == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="zero-escape")


def _escaped(error: UnicodeError) -> tuple[str, int]:
    """``\\uXXXX`` for each character an encoding could not take (a pair for one beyond the BMP)."""
    assert isinstance(error, UnicodeEncodeError)
    out = []
    for char in error.object[error.start : error.end]:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out), error.end


def entry() -> None:
    """The ``zero`` console script."""
    import resource

    for signum in (signal.SIGTERM, signal.SIGHUP):  # (one the process was started ignoring stays so: nohup)
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, _terminated)
    _standard_streams()
    # As many descriptors as the system lets this process have (as Go's runtime does): each running agent
    # holds its session's lease and log, and each call a connection; a soft limit of 1,024 ends a team of
    # a thousand members with "too many open files".
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 1 << 20), hard))
        except (ValueError, OSError):
            pass  # the limit stays as it was
    try:
        code = main()
    except KeyboardInterrupt:  # (Ctrl-C while the command line is read, before main's own handler is reached)
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    entry()
