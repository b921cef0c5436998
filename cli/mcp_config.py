"""Which MCP servers a run starts: the user's ``[mcp.servers]``, and the project's once approved.

A project's config comes with a repository, so its servers are code someone else wrote: each starts
only after the user approved it (``zero mcp trust NAME``, remembered per workspace in
``$ZERO_HOME/mcp-approved.json`` with a fingerprint of the entry, so an edited entry asks again), and
it cannot say how far it is trusted. ``add``, ``remove`` and ``trust`` edit a config file's text
table by table, so the rest of the file, comments included, stays as it was.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from zero.agent.mcpconfig import McpServer
from zero.cli.config import Configs, McpServerEntry, user_config_dir
from zero.cli.trust import approved
from zero.errors import UsageError

__all__ = ["configured_servers", "edit_table", "fingerprint", "run_servers", "server_table"]


def fingerprint(entry: McpServerEntry) -> str:
    """What an approval covers: how the server is started."""
    what = entry.model_dump(include={"command", "args", "env", "cwd", "url", "headers"})
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


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
        if where == "project" and allowed.get(name) != fingerprint(entry):
            warnings.append(
                f"MCP server {name!r} of {project_file} not started: a project's servers start once you "
                f"approve them (zero mcp trust {name})"
            )
            continue
        servers.append(
            McpServer(
                name=name,
                command=entry.command,
                args=tuple(entry.args),
                env=dict(entry.env),
                cwd=entry.cwd,
                url=entry.url,
                headers=dict(entry.headers),
                timeout_seconds=entry.timeout_seconds,
                call_timeout_seconds=entry.call_timeout_seconds,
                trusted=entry.trust and where == "user",
                side_effect=entry.side_effect if where == "user" else "network",
                config_path=str(user_config_dir() / "config.toml" if where == "user" else project_file),
            )
        )
    return servers, warnings


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
