"""Users' MCP servers as tools for Zero's agents. The ``mcp`` SDK is imported here only.

``open_servers`` starts the configured servers side by side, each within its start-up timeout, and
gives their tools (``mcp__SERVER__TOOL``) until it exits, when it stops them (their processes too).
A server that cannot be started, or does not answer in time, is reported once (its command, the
error, the end of its stderr) and skipped: the run goes on without it.

Permission: a server's tools are gated like network use (``auto`` asks, a headless run denies) unless
the user trusts the server; a trusted server's tools count as its ``side_effect`` (``read`` lets them
run in ``read-only`` mode; the default lets them run in ``auto`` without asking, like a write).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from zero.agent._mcp_stdio import stdio_transport
from zero.agent.mcpconfig import MAX_TOOL_NAME, McpServer, tool_name
from zero.errors import ToolError
from zero.tools import Redactor, SideEffect, Tool, ToolContext, ToolOutput, redact, redact_values
from zero.tools.redact import mask_across

__all__ = ["McpTool", "open_servers"]


class McpTool:
    """One tool of a server, called through the server's connection."""

    def __init__(self, server: McpServer, tool: mcp_types.Tool, client: Client):
        self.server = server
        self.remote = tool.name
        self.full_name = f"mcp__{server.name}__{tool.name}"  # what manifests grant
        self.name = tool_name(server.name, tool.name)
        # What the server says of its tools reaches the model: redacted like any other channel.
        self.description = redact(f"[MCP server {server.name}] {tool.description or tool.title or tool.name}")
        self.parameters: dict[str, Any] = redact_values(
            redact, dict(tool.input_schema or {"type": "object", "properties": {}})
        )
        self.parameters.setdefault("type", "object")
        trusted_effect: SideEffect = server.side_effect if server.side_effect != "network" else "write"
        self.side_effect: SideEffect = trusted_effect if server.trusted else "network"
        where = server.config_path or "config.toml"
        self.approval_hint = (
            ""
            if server.trusted
            else f"To let the MCP server {server.name!r} run without asking, trust it: zero mcp trust "
            f"{server.name} (or trust = true under [mcp.servers.{server.name}] in {where})."
        )
        self._client = client

    async def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            with anyio.fail_after(self.server.call_timeout_seconds):
                result = await self._client.call_tool(self.remote, arguments)
        except TimeoutError:
            raise ToolError(
                f"the MCP server {self.server.name!r} did not answer within {self.server.call_timeout_seconds:g} s"
            ) from None
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as e:  # a protocol error, or the server died: the model reads what happened
            raise ToolError(f"the MCP server {self.server.name!r} failed: {type(e).__name__}: {e}") from e
        return ToolOutput(text=_text_of(result), is_error=bool(result.is_error))


def _across_items(value: Any) -> Any:
    """``value`` (structured content) with a secret split across a list's strings masked in each
    (``["glpat-CCC", "CCCC..."]``): once dumped as JSON, the quotes between them would keep it whole to a
    reader and hidden from redaction."""
    if isinstance(value, dict):
        return {k: _across_items(v) for k, v in value.items()}
    if not isinstance(value, list):
        return value
    items = [_across_items(v) for v in value]
    at = [i for i, v in enumerate(items) if isinstance(v, str)]
    for i, masked in zip(at, mask_across([items[i] for i in at], redact), strict=True):
        items[i] = masked
    return items


def _json_across_items(text: str) -> str:
    """A text that is JSON (as a server dumps its structured result into its text) with a secret split across
    a list's strings masked (``_across_items``); any other text as it is."""
    if text[:1] not in "[{" or len(text) > 1 << 20:
        return text
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    masked = _across_items(value)
    return text if masked == value else json.dumps(masked, ensure_ascii=False, indent=2)


def _text_of(result: mcp_types.CallToolResult) -> str:
    """The result as one text; a secret split across two content items is masked in both (the text
    is redacted again as a whole, like every tool's output)."""
    parts: list[str] = []
    for item in result.content:
        if isinstance(item, mcp_types.TextContent):
            parts.append(_json_across_items(item.text))
        elif isinstance(item, mcp_types.ImageContent | mcp_types.AudioContent):
            kind = "image" if isinstance(item, mcp_types.ImageContent) else "audio"
            parts.append(f"[{kind}: {item.mime_type}, {len(item.data) * 3 // 4:,} bytes, not shown]")
        elif isinstance(item, mcp_types.EmbeddedResource):
            resource = item.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {resource.uri}: binary, not shown]")
        elif isinstance(item, mcp_types.ResourceLink):
            parts.append(f"[resource {item.name}: {item.uri}]")
    if result.structured_content is not None and not parts:
        parts.append(json.dumps(_across_items(result.structured_content), ensure_ascii=False, indent=2))
    return "\n".join(mask_across(parts, redact)) or "(no content)"


@dataclass(kw_only=True)
class _Slot:
    server: McpServer
    ready: anyio.Event = field(default_factory=anyio.Event)
    tools: list[McpTool] = field(default_factory=list)
    error: str = ""
    scope: anyio.CancelScope | None = None


@asynccontextmanager
async def open_servers(
    servers: Sequence[McpServer], report: Callable[[str], None], taken: Sequence[str] = ()
) -> AsyncIterator[dict[str, list[Tool]]]:
    """The tools of each server that started (by server name), until the block ends. Tools whose names
    come out alike for the model (``x.y`` and ``x_y``; or ``taken``, names already in use) are told apart."""
    if not servers:
        yield {}
        return
    stop = anyio.Event()
    slots = [_Slot(server=s) for s in servers]
    started = anyio.current_time()
    async with anyio.create_task_group() as tg:
        for slot in slots:
            tg.start_soon(_serve, slot, stop)
        for slot in slots:  # each within its own timeout, all counted from the same start
            with anyio.move_on_after(max(0.0, started + slot.server.timeout_seconds - anyio.current_time())):
                await slot.ready.wait()
            if not slot.ready.is_set():
                slot.error = f"it did not start within {slot.server.timeout_seconds:g} s (timeout_seconds)"
                if slot.scope is not None:
                    slot.scope.cancel()
            if slot.error:
                report(redact(f"MCP server {slot.server.name!r} ({slot.server.describe()}) skipped: {slot.error}"))
        started_slots = [slot for slot in slots if slot.tools and not slot.error]
        for problem in _unique_names([t for slot in started_slots for t in slot.tools], set(taken)):
            report(problem)
        try:
            yield {slot.server.name: list(slot.tools) for slot in started_slots}
        finally:
            stop.set()


async def _serve(slot: _Slot, stop: anyio.Event) -> None:
    """Connect, list the tools, and hold the connection until ``stop``; record any failure."""
    server = slot.server
    exited: list[int] = []  # the exit code of a stdio server that ended by itself
    with anyio.CancelScope() as scope, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        slot.scope = scope
        try:
            async with AsyncExitStack() as stack:
                transport = await _transport(server, errlog, stack, exited.append)
                client = await stack.enter_async_context(Client(transport))
                tools: list[mcp_types.Tool] = []
                cursor: str | None = None
                while True:
                    listed = await client.list_tools(cursor=cursor)
                    tools += listed.tools
                    cursor = listed.next_cursor
                    if not cursor:
                        break
                slot.tools = [McpTool(server, t, client) for t in tools]
                slot.ready.set()
                await stop.wait()
        except Exception as e:  # noqa: BLE001 - any failure to start is this server's, reported, never the run's
            slot.error = (_exited(exited[0]) if exited else _reason(e)) + _tail(errlog, server)
            slot.ready.set()
        finally:
            slot.ready.set()


async def _transport(server: McpServer, errlog: Any, stack: AsyncExitStack, exited: Callable[[int], None]) -> Any:
    if server.url:
        http = httpx2.AsyncClient(headers=_expand(server.headers), timeout=server.call_timeout_seconds)
        await stack.enter_async_context(http)
        return streamable_http_client(server.url, http_client=http)
    if not server.command:
        raise ToolError(f"MCP server {server.name!r} has neither command nor url")
    return stdio_transport(server.command, list(server.args), _expand(server.env), server.cwd, errlog, exited)


def _expand(values: dict[str, str]) -> dict[str, str]:
    """``$NAME`` and ``${NAME}`` in values from the user's environment (never written anywhere)."""
    return {key: os.path.expandvars(value) for key, value in values.items()}


def _tail(errlog: Any, server: McpServer, lines: int = 5) -> str:
    """The end of what the server wrote to stderr, its secrets masked: the values of its env and headers
    (they may have come from the user's environment), and what redaction finds."""
    try:
        errlog.seek(0)
        text = errlog.read()[-4000:].strip().splitlines()[-lines:]
    except (OSError, ValueError):
        return ""
    given = {
        f"SERVER_VALUE_{i}_KEY": v
        for i, v in enumerate([*_expand(server.env).values(), *_expand(server.headers).values()])
    }
    mask = Redactor({**os.environ, **given})
    return ("; its stderr ended with: " + mask(" | ".join(text))) if text else ""


def _exited(code: int) -> str:
    """A server that ended before it answered: what the SDK then raises ("Connection closed") says less."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"it was ended by {name} at start"
    return f"it exited at start with code {code}"


def _reason(error: BaseException) -> str:
    """What went wrong, without the task groups an error came out through (of several, the first that is
    not a cancellation)."""
    while isinstance(error, BaseExceptionGroup):
        leaves = [e for e in error.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
        error = (leaves or list(error.exceptions))[0]
    return f"{type(error).__name__}: {error}"


def _unique_names(tools: list[McpTool], taken: set[str]) -> list[str]:
    """Give each tool a name no other has (for the model; grants still name it ``mcp__SERVER__TOOL``): the
    first keeps its name, a later one that came out alike gets a suffix of its own. What was renamed."""
    problems = []
    for tool in tools:
        if tool.name in taken:
            digest = hashlib.sha256(tool.full_name.encode()).hexdigest()[:8]
            renamed = f"{tool.name[: MAX_TOOL_NAME - 9]}_{digest}"
            problems.append(
                f"MCP tool {tool.remote!r} of server {tool.server.name!r} comes out as {tool.name!r} for the "
                f"model, like another tool; it is called {renamed!r}"
            )
            tool.name = renamed
        taken.add(tool.name)
    return problems
