"""An MCP server as configured, and the names its tools get: what is known before the SDK is needed
(``zero.agent.mcp`` imports the SDK, and only a run that starts servers imports it)."""

from __future__ import annotations

import hashlib
import re
from contextvars import ContextVar
from dataclasses import dataclass, field

import anyio

from zero.tools import SideEffect

__all__ = ["GRACE_SECONDS", "HOST_ENDING", "HURRY_SECONDS", "MAX_TOOL_NAME", "McpServer", "tool_name"]

MAX_TOOL_NAME = 64  # what the providers accept
GRACE_SECONDS = 2.0  # a stdio server stopped gets this long to exit once its stdin closes, as long after SIGTERM
HURRY_SECONDS = 0.1  # and this long for each when its host is ending
HOST_ENDING: ContextVar[anyio.Event | None] = ContextVar("zero_mcp_host_ending", default=None)
"""The event a host sets when its process is ending (``zero acp`` once its editor is gone): the servers it
stops from then on get HURRY_SECONDS. Set the variable before the servers start: their tasks inherit it."""


@dataclass(frozen=True, kw_only=True)
class McpServer:
    """One configured server: a command (stdio) or a URL (streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout_seconds: float = 15.0
    call_timeout_seconds: float = 120.0
    trusted: bool = False
    side_effect: SideEffect = "network"
    config_path: str = ""  # where it is configured (to say how to trust it)

    def describe(self) -> str:
        return self.url or " ".join([self.command or "", *self.args]).strip()


def tool_name(server: str, tool: str) -> str:
    """``mcp__SERVER__TOOL``, in the characters providers accept, shortened (deterministically) to 64."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", f"mcp__{server}__{tool}")
    if len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME - 9]}_{digest}"
