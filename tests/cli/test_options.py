"""The typed options records: every argument of every command lands in a field of its command's record."""

from __future__ import annotations

import argparse
from dataclasses import fields

import pytest

from zero.cli.arguments import options_of, shell_parser
from zero.cli.main import build_parser
from zero.cli.options import (
    Command,
    ExecOptions,
    McpOptions,
    ReplayOptions,
    ResumeOptions,
    RunOptions,
    SessionsOptions,
    ShellOptions,
    SpecialistsOptions,
    SwarmOptions,
)

RECORDS: dict[str, type[Command]] = {
    "exec": ExecOptions,
    "specialists": SpecialistsOptions,
    "swarm": SwarmOptions,
    "sessions": SessionsOptions,
    "mcp": McpOptions,
    "replay": ReplayOptions,
}


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], set[str]]]:
    """Each command line's words and the destinations of its own arguments."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    dests = {a.dest for a in parser._actions if not isinstance(a, argparse._SubParsersAction)} - {"help", "version"}
    if not subs:
        return [(path, dests)]
    return [leaf for name, sub in subs[0].choices.items() for leaf in _leaves(sub, (*path, name))]


def _record(path: tuple[str, ...]) -> type[Command]:
    if not path:
        return ShellOptions
    return ResumeOptions if path == ("sessions", "resume") else RECORDS.get(path[0], ShellOptions)


def test_every_argument_of_every_command_has_a_field_of_its_record() -> None:
    leaves = _leaves(build_parser()) + _leaves(shell_parser())
    assert len(leaves) >= 26  # (the walk reaches every action)
    run = {f.name for f in fields(RunOptions)}
    for path, dests in leaves:
        if path == ("acp",):
            continue
        own = {f.name for f in fields(_record(path))}
        assert dests <= own | run, (path, dests - own - run)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["exec", "hi", "--model", "m", "--retries", "2"],
            ExecOptions(prompt="hi", run=RunOptions(model="m", retries=2)),
        ),
        (["specialists", "new", "x", "--model", "m"], SpecialistsOptions(action="new", name="x", model="m")),
        (["sessions", "resume", "last", "--here"], ResumeOptions(session_id="last", here=True)),
        (
            ["mcp", "add", "srv", "--env", "A=1"],
            McpOptions(action="add", name="srv", env=["A=1"], server_command=["c"]),
        ),
        (["--resume"], ShellOptions(resume="")),
    ],
)
def test_a_command_line_becomes_its_record(argv: list[str], expected: Command) -> None:
    parser = shell_parser() if argv[0].startswith("-") else build_parser(argv[0])
    assert options_of(parser.parse_args(argv), ["c"] if argv[0] == "mcp" else None) == expected


def test_an_argument_without_a_field_is_a_bug_said_at_once() -> None:
    namespace = argparse.Namespace(command="exec", prompt="hi", no_such_flag=True)
    with pytest.raises(AssertionError, match="ExecOptions has no field for the arguments no_such_flag"):
        options_of(namespace)
