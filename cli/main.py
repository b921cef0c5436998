"""``zero`` argument parsing and dispatch.

This module imports nothing heavy: ``zero --help`` must stay fast, so each command
module (and the SDKs behind it) is imported only when that command runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]

PERMISSION_MODES = ("read-only", "ask", "auto", "unsafe")
PROVIDERS = ("openai", "anthropic", "openai-compatible", "scripted")


def _common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model and workspace")
    group.add_argument(
        "--provider",
        choices=PROVIDERS,
        help="model provider (default: ZERO_PROVIDER, config, or the first API key found)",
    )
    group.add_argument("--model", help="model name (default: ZERO_MODEL, config, or the provider's default)")
    group.add_argument(
        "--base-url", help="API base URL; alone, selects an OpenAI-compatible server (Ollama, vLLM, LM Studio)"
    )
    group.add_argument("--script", help="script of model turns for --provider scripted (TOML or JSON)")
    group.add_argument("--cwd", help="workspace folder (default: the current folder)")
    group.add_argument(
        "--permission-mode", choices=PERMISSION_MODES, help="what tools may do without approval (default: auto)"
    )
    group.add_argument("--debug", action="store_true", help="show tracebacks")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zero",
        description="Zero: a terminal coding agent built around multi-agent orchestration.",
        epilog="Exit codes: 0 success, 1 run failed, 2 usage or configuration error, 3 provider error, "
        "4 incomplete (budget or max turns), 130 interrupted.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    exec_ = commands.add_parser(
        "exec",
        help="run one task headless",
        description="Run one task headless and print the answer (text), one JSON object, or stream-json events.",
    )
    exec_.add_argument("prompt", nargs="?", help="the task (default: --file, or standard input)")
    exec_.add_argument("--file", "-f", help="read the prompt (or stream-json input) from this file")
    exec_.add_argument("--output-format", choices=("text", "json", "stream-json"), default="text")
    exec_.add_argument("--input-format", choices=("text", "stream-json"), default="text")
    exec_.add_argument("--max-turns", type=int, help="stop after this many model calls (default 50)")
    _common(exec_)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``zero`` command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "exec":
        from zero.cli.exec import run_exec

        return run_exec(args)
    parser.error(f"unknown command {args.command!r}")  # argparse exits with 2


if __name__ == "__main__":
    sys.exit(main())
