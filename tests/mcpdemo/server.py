"""A small MCP server for tests, written with the ``mcp`` SDK: ``python mcp_server.py stdio`` or
``python mcp_server.py http PORT``."""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("demo")


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


if __name__ == "__main__":
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
