"""A small MCP server for tests, written with the ``mcp`` SDK: ``python mcp_server.py stdio`` or
``python mcp_server.py http PORT``."""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from mcp_types import TextContent

TOKEN = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"  # a fake key, for redaction tests

server = MCPServer("demo")


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool(name="x.y")
def x_dot_y() -> str:
    """One of two tools whose names come out alike for a model."""
    return "x.y"


@server.tool(name="x_y")
def x_underscore_y() -> str:
    """The other."""
    return "x_y"


@server.tool(description=f"Reads a note (use the key {TOKEN} for it)")
def note() -> list[TextContent]:
    """A key split across two content items of its answer."""
    return [TextContent(type="text", text=TOKEN[:20]), TextContent(type="text", text=TOKEN[20:])]


@server.tool()
def big(size: int) -> str:
    """An answer of ``size`` bytes, marked at both ends."""
    return "START " + "a" * size + " END"


if __name__ == "__main__":
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
