"""Which MCP servers a run starts: the user's ``[mcp.servers]``, and the project's once approved.

A project's config comes with a repository, so its servers are code someone else wrote: each starts
only after the user approved it (``zero mcp trust NAME``, which shows what it runs), and then its
tools run as a trusted server's do. The approval is remembered per workspace in
``$ZERO_HOME/mcp-approved.json`` with a fingerprint of the entry and of the repository's files it
runs, so an edited entry, or edited code, asks again; the entry cannot say how far it is trusted. A
project's server runs in the workspace (or its ``cwd`` there). ``add``, ``remove`` and ``trust`` edit
a config file's text table by table, so the rest of the file, comments included, stays as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path

from zero.agent.mcpconfig import McpServer
from zero.cli.config import Configs, McpServerEntry, user_config_dir
from zero.cli.trust import approved
from zero.errors import ToolError, UsageError
from zero.tools import Workspace

__all__ = [
    "configured_servers",
    "edit_table",
    "fingerprint",
    "repository_files",
    "run_servers",
    "server_cwd",
    "server_table",
]


def fingerprint(entry: McpServerEntry, workspace: Path) -> str:
    """What the approval of a project's server covers: how it is started, then the repository's files it runs."""
    started = entry.model_dump(include={"command", "args", "env", "cwd", "url", "headers"})
    return f"{_digest(started)}.{_digest(repository_files(entry, workspace))}"


def _digest(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def server_cwd(entry: McpServerEntry, workspace: Path) -> Path:
    """Where a project's server runs: its ``cwd`` in the workspace, else the workspace."""
    return workspace / entry.cwd if entry.cwd else workspace


def repository_files(entry: McpServerEntry, workspace: Path) -> dict[str, str]:
    """The files of ``workspace`` a server runs, each with a hash of its content: its command if that is a
    path there, and the arguments that name files there (what those files import is not followed)."""
    files: dict[str, str] = {}
    here, cwd = Workspace([workspace]), server_cwd(entry, workspace)
    for item in ([entry.command] if entry.command and "/" in entry.command else []) + entry.args:
        path = str(cwd / item)  # an absolute item stays itself
        try:
            fd = here.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except ToolError:  # not a file, or not the repository's
            continue
        with os.fdopen(fd, "rb") as f:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                files[here.shown(path)] = hashlib.file_digest(f, "sha256").hexdigest()[:16]
    return files


def configured_servers(configs: Configs) -> dict[str, tuple[McpServerEntry, str]]:
    """Every configured server by name, with where it is configured (``user`` or ``project``)."""
    found = {name: (entry, "user") for name, entry in configs.user.mcp.servers.items()}
    for name, entry in configs.project.mcp.servers.items():
        found.setdefault(name, (entry, "project"))
    return found


def run_servers(configs: Configs, workspace: Path) -> tuple[list[McpServer], list[str]]:
    """The servers a run in ``workspace`` starts, and warnings about the ones it does not."""
    servers, warnings = [], []
    allowed = approved("mcp", workspace)
    project_file = workspace / ".zero" / "config.toml"
    for name, (entry, where) in configured_servers(configs).items():
        if not entry.enabled:
            continue
        if where == "project" and name in configs.user.mcp.servers:
            continue
        if where == "project" and (why := _unapproved(allowed.get(name), entry, workspace)):
            warnings.append(
                f"MCP server {name!r} of {project_file} not started: {why}; zero mcp trust {name} shows what it "
                "runs and asks"
            )
            continue
        servers.append(
            McpServer(
                name=name,
                command=entry.command,
                args=tuple(entry.args),
                env=dict(entry.env),
                cwd=str(server_cwd(entry, workspace)) if where == "project" else entry.cwd,
                url=entry.url,
                headers=dict(entry.headers),
                timeout_seconds=entry.timeout_seconds,
                call_timeout_seconds=entry.call_timeout_seconds,
                trusted=entry.trust or where == "project",  # a project's: approved, or it would not start
                side_effect=entry.side_effect if where == "user" else "network",
                config_path=str(user_config_dir() / "config.toml" if where == "user" else project_file),
            )
        )
    return servers, warnings


def _unapproved(approval: str | None, entry: McpServerEntry, workspace: Path) -> str:
    """Why a project's server may not start (its approval is missing or out of date), or ''."""
    now = fingerprint(entry, workspace)
    if approval == now:
        return ""
    if approval is None:
        return "a project's servers start once you approve them"
    if approval.split(".")[0] != now.split(".")[0]:
        return "its entry changed since you approved it"
    files = ", ".join(repository_files(entry, workspace)) or "a file it runs"
    return f"the code it runs from the repository ({files}) changed since you approved it"


_TABLE = re.compile(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$")


def edit_table(path: Path, table: str, body: str | None) -> bool:
    """Replace (or add, or with ``body`` None remove) the TOML table ``[table]`` in ``path``, leaving the
    other lines as they are; False if there was nothing to remove."""
    lines = path.read_text("utf-8").splitlines() if path.exists() else []
    start = next((i for i, line in enumerate(lines) if (m := _TABLE.match(line)) and m.group(1).strip() == table), None)
    if start is None:
        if body is None:
            return False
        out = [*lines, *([""] if lines and lines[-1].strip() else []), f"[{table}]", *body.splitlines()]
    else:
        end = next(
            (i for i in range(start + 1, len(lines)) if _TABLE.match(lines[i]) or lines[i].startswith("[[")), len(lines)
        )
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        replacement = [] if body is None else [f"[{table}]", *body.splitlines()]
        out = lines[:start] + replacement + lines[end:]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out).strip("\n") + "\n", encoding="utf-8")
    return True


def server_table(entry: McpServerEntry) -> str:
    """The lines of a ``[mcp.servers.NAME]`` table for ``entry`` (the keys that differ from the defaults)."""
    data = entry.model_dump(exclude_defaults=True)
    lines = []
    for key, value in data.items():
        lines.append(f"{key} = {_toml(value)}")
    return "\n".join(lines)


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    raise UsageError(f"cannot write {value!r} to TOML")
