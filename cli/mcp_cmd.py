"""``zero mcp list | add | remove | trust | serve``"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import anyio

from zero.cli.common import Streams, confirm, print_error, print_warnings, workspace_from
from zero.cli.config import McpServerEntry, load_config, user_config_dir
from zero.cli.mcp_config import (
    MAX_CODE_BYTES,
    MAX_CODE_FILES,
    RepositoryCode,
    configured_servers,
    edit_table,
    fingerprint,
    repository_code,
    run_servers,
    server_cwd,
    server_table,
    set_flag,
)
from zero.cli.options import McpOptions
from zero.cli.trust import approve, approved
from zero.errors import UsageError, ZeroError
from zero.strictfile import NAME_PATTERN
from zero.tools import secret_name

__all__ = ["run_mcp"]


def run_mcp(args: McpOptions, streams: Streams) -> int:
    try:
        if args.action == "serve":
            from zero.cli.mcp_serve import serve

            return serve(args, streams)
        workspace = workspace_from(args)
        if args.action == "list":
            return anyio.run(_list, workspace, args.json, streams)
        if args.action == "add":
            return _add(args, workspace, streams)
        if args.action == "remove":
            return _remove(args, workspace, streams)
        return _trust(args, workspace, streams)
    except ZeroError as e:
        print_error(str(e), streams.stderr)
        return e.exit_code


def _config_file(project: bool, workspace: Path) -> Path:
    return workspace / ".zero" / "config.toml" if project else user_config_dir() / "config.toml"


def _within(project: bool, workspace: Path) -> Path | None:
    """Where an edit of the file must land: a project's, in its workspace; yours, wherever it is."""
    return workspace if project else None


async def _list(workspace: Path, as_json: bool, streams: Streams) -> int:
    configs = load_config(workspace)
    print_warnings(configs.warnings, streams.stderr)
    servers, skipped = run_servers(configs, workspace)
    found: dict[str, list[str]] = {}
    problems: list[str] = []
    if servers:
        from zero.agent.mcp import open_servers

        async with open_servers(servers, problems.append) as tools:
            found = {name: [t.name for t in ts] for name, ts in tools.items()}
    trusted = {s.name for s in servers if s.trusted}
    rows: list[dict[str, Any]] = []
    for name, (entry, where) in configured_servers(configs).items():
        started = name in found
        why = next((p for p in [*problems, *skipped] if f"{name!r}" in p), "" if entry.enabled else "disabled")
        rows.append(
            {
                "name": name,
                "config": where,
                "command": entry.url or shlex.join([entry.command or "", *entry.args]),
                "trusted": name in trusted,
                "sideEffect": entry.side_effect,
                "started": started,
                "problem": None if started else why,
                "tools": found.get(name, []),
            }
        )
    if as_json:
        streams.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    if not rows:
        streams.stdout.write("no MCP servers configured: zero mcp add NAME -- COMMAND [ARGS...] adds one\n")
    for row in rows:
        state = "started" if row["started"] else f"not started: {row['problem']}"
        trust = "trusted" if row["trusted"] else "asks first"
        streams.stdout.write(f"{row['name']} ({row['config']}, {trust}) {row['command']}\n  {state}\n")
        for tool in row["tools"]:
            streams.stdout.write(f"  - {tool}\n")
    return 0


def _add(args: McpOptions, workspace: Path, streams: Streams) -> int:
    _check_name(args.name)
    command = list(args.server_command)
    if bool(command) == bool(args.url):
        raise UsageError("give the server's command after --, or --url for a streamable HTTP server (one of them)")
    _check_no_env_after(args.name, command)
    env = dict(_pair(item, "--env") for item in args.env)
    headers = dict(_pair(item, "--header") for item in args.header)
    entry = McpServerEntry(
        command=command[0] if command else None,
        args=command[1:],
        env=env,
        url=args.url,
        headers=headers,
        trust=args.trust and not args.project,
    )
    path = _config_file(args.project, workspace)
    load_config(workspace)  # the files read now (a broken one is named before anything is written)
    edit_table(path, f"mcp.servers.{args.name}", server_table(entry), new=True, within=_within(args.project, workspace))
    load_config(workspace)  # the edited file still reads
    streams.stdout.write(f"added MCP server {args.name} to {path}\n")
    if args.project:  # the user added it: it may start
        code = repository_code(entry, workspace)
        if code.too_much:
            streams.stderr.write(f"warning: {args.name} is not approved: {_too_much(args.name, code)}\n")
        else:
            approve("mcp", workspace, args.name, fingerprint(entry, code))
    return 0


def _remove(args: McpOptions, workspace: Path, streams: Streams) -> int:
    if not re.fullmatch(r"[A-Za-z0-9_-]+", args.name):  # (``a.env`` is server a's [env] table, not a server)
        raise UsageError(
            f"invalid server name {args.name!r}: a server's name is a bare TOML key (letters, digits, '_' and '-'); "
            "edit the file by hand for another"
        )
    path = _config_file(args.project, workspace)
    if not edit_table(path, f"mcp.servers.{args.name}", None, within=_within(args.project, workspace)):
        raise UsageError(f"there is no [mcp.servers.{args.name}] in {path}")
    streams.stdout.write(f"removed MCP server {args.name} from {path}\n")
    return 0


def _trust(args: McpOptions, workspace: Path, streams: Streams) -> int:
    configs = load_config(workspace)
    found = configured_servers(configs).get(args.name)
    if found is None:
        raise UsageError(f"no MCP server {args.name!r} is configured (zero mcp list shows them)")
    entry, where = found
    streams.stdout.writelines(f"{line}\n" for line in _described(args.name, entry, where, workspace))
    if where == "project":
        code = repository_code(entry, workspace)
        if code.too_much:
            raise UsageError(f"{args.name} cannot be approved: {_too_much(args.name, code)}")
        now = fingerprint(entry, code)  # what was shown is what the approval covers
        if approved("mcp", workspace).get(args.name) == now:
            streams.stdout.write(f"approved already, as it is now: it starts with every run in {workspace}\n")
            return 0
        question = f"Start {args.name} with every run in {workspace}, its tools running without asking?"
        if not confirm(question, streams, yes=args.yes, needs=f"trusting {args.name}"):
            streams.stderr.write(f"{args.name} is not approved\n")
            return 1
        approve("mcp", workspace, args.name, now)
        streams.stdout.write(
            f"approved the project's MCP server {args.name}: it starts with every run in {workspace} and its tools "
            "run without asking, until its entry or the code it runs changes\n"
        )
        return 0
    if not confirm(
        f"Let {args.name}'s tools run without asking?", streams, yes=args.yes, needs=f"trusting {args.name}"
    ):
        streams.stderr.write(f"{args.name} is not trusted\n")
        return 1
    path = _config_file(False, workspace)
    set_flag(path, f"mcp.servers.{args.name}", "trust")
    streams.stdout.write(f"trusted MCP server {args.name}: its tools run without asking ({path})\n")
    return 0


def _described(name: str, entry: McpServerEntry, where: str, workspace: Path) -> list[str]:
    """What a server runs, as the user approves it: its command, arguments, folder, environment and headers
    (with the variables of yours they take), and the repository's files it runs."""
    whose = f"the project's ({workspace / '.zero' / 'config.toml'})" if where == "project" else "yours"
    lines = [f"MCP server {name}, {whose}:"]
    if entry.url:
        lines.append(f"  url: {entry.url}")
    else:
        lines += [f"  command: {entry.command}", f"  args: {shlex.join(entry.args) or '(none)'}"]
        lines.append(f"  cwd: {server_cwd(entry, workspace) if where == 'project' else entry.cwd or '(zero’s)'}")
    for title, values in (("env", entry.env), ("headers", entry.headers)):
        for key, value in values.items():
            lines.append(f"  {title}: {key} = {value}{_takes(value)}")
    if where == "project":
        code = repository_code(entry, workspace).described()
        lines.append(f"  its code in the repository (any change there asks again): {code}")
    return lines


def _too_much(name: str, code: RepositoryCode) -> str:
    """Why a project's server whose code is too much cannot be approved, and what to do."""
    where = (
        "run it from a virtual environment outside the repository (its python as the command)"
        if code.environments
        else "move the server into a folder of its own"
    )
    return (
        f"the code it runs from the repository is {code.described()}, more than an approval covers "
        f"({MAX_CODE_FILES:,} files, {MAX_CODE_BYTES:,} bytes); {where}, or add it to your own config "
        f"(zero mcp add {name} -- COMMAND...), which trusts it as yours"
    )


def _takes(value: str) -> str:
    """Which variables of the user's environment ``value`` takes, the secret ones named as such."""
    names = [m.group(1) or m.group(2) for m in _VARIABLE.finditer(value)]
    if not names:
        return ""
    shown = [
        f"{n} (named like a secret: its value goes to this server)" if secret_name(n) else n
        for n in names
        if n in os.environ
    ]
    unset = [n for n in names if n not in os.environ]
    parts = ([f"from your environment: {', '.join(shown)}"] if shown else []) + (
        [f"not set here: {', '.join(unset)}"] if unset else []
    )
    return f"  ({'; '.join(parts)})"


_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _check_name(name: str) -> None:
    if not re.fullmatch(NAME_PATTERN, name):
        raise UsageError(f"invalid server name {name!r}: use lowercase letters, digits and '-', starting with a letter")


def _check_no_env_after(name: str, command: list[str]) -> None:
    """Refuse ``--env KEY=VALUE`` (or ``-e``) after ``--``: everything there is the server's command line, so it
    would become an argument of the server, not its environment. A container runtime's own ``-e`` is let be
    (``docker run -e KEY=VALUE image`` sets the container's environment)."""
    if not command or Path(command[0]).name in _CONTAINER_RUNTIMES:
        return
    for at, word in enumerate(command[1:], 1):
        if word.startswith("--env="):
            flag, pair, used = "--env", word.removeprefix("--env="), {at}
        elif word in ("--env", "-e") and at + 1 < len(command):
            flag, pair, used = word, command[at + 1], {at, at + 1}
        else:
            continue
        if _ASSIGNMENT.fullmatch(pair):
            rest = [w for i, w in enumerate(command) if i not in used]
            raise UsageError(
                f"{flag} {pair} comes after --, where it would be an argument of {command[0]}, not its environment: "
                f"give it before --: zero mcp add {name} --env {shlex.quote(pair)} -- {shlex.join(rest)}"
            )


_CONTAINER_RUNTIMES = frozenset({"docker", "podman", "nerdctl"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)


def _pair(item: str, flag: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise UsageError(f"{flag} {item!r}: give KEY=VALUE")
    return key, value
