"""A real MCP server built with the SDK (mcp 2.x `MCPServer`, formerly FastMCP), for tests.

    python mcp_server.py            # serve over stdio
    build_server().streamable_http_app()   # ASGI app for streamable HTTP
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def build_server() -> MCPServer:
    server = MCPServer("agent-canvas-test")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def shout(text: str, times: int = 1) -> str:
        """Upper-case the text, repeated `times` times."""
        return " ".join([text.upper()] * times)

    @server.tool()
    def refuse(reason: str) -> str:
        """Always fails with the given reason."""
        raise ToolError(f"refused: {reason}")

    return server


if __name__ == "__main__":
    build_server().run("stdio")
