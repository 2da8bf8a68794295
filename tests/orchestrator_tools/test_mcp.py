"""MCP tools against a real SDK-built server over stdio and over streamable HTTP."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import uvicorn

from services.orchestrator.tools.config import parse_mcp_server
from services.orchestrator.tools.errors import ToolConfigError, ToolExecutionError, ToolUpstreamError
from services.orchestrator.tools.mcp_tools import check_mcp_entries, check_mcp_server, list_mcp_tools, mcp_tools_for
from services.orchestrator.tools.runtime import ToolRuntime
from tests.orchestrator_tools.conftest import make_settings
from tests.orchestrator_tools.support.mcp_server import build_server

SERVER_SCRIPT = str(Path(__file__).parent / "support" / "mcp_server.py")


SEEN_HEADERS: list[dict[str, str]] = []


def _recording(app):
    """ASGI wrapper that records request headers, to check configured headers reach the server."""

    async def wrapped(scope, receive, send):
        if scope["type"] == "http":
            SEEN_HEADERS.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await app(scope, receive, send)

    return wrapped


@pytest.fixture(scope="module")
def http_mcp_url() -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = build_server().streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(_recording(app), log_level="warning", lifespan="on"))
    done = threading.Event()

    def serve() -> None:
        try:
            asyncio.run(server.serve(sockets=[sock]))
        finally:
            done.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not (server.started or done.is_set()) and time.monotonic() < deadline:
        done.wait(0.01)
    assert server.started
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(10)
    sock.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
async def runtime(tmp_path: Path, http_mcp_url: str) -> AsyncIterator[ToolRuntime]:
    section = {
        "mcp": {
            "timeout_s": 15,
            "connect_timeout_s": 15,
            "servers": {
                "local": {"command": sys.executable, "args": [SERVER_SCRIPT], "env": {"PYTHONPATH": ":".join(sys.path)}},
                "remote": {"url": http_mcp_url, "headers": {"X-Test": "1"}},
            },
        }
    }
    rt = ToolRuntime(make_settings(section, tmp_path))
    yield rt
    await rt.aclose()


@pytest.mark.parametrize("server_id", ["local", "remote"])
async def test_list_and_call_tools(runtime: ToolRuntime, server_id: str):
    context = runtime.context()
    tools = await mcp_tools_for({"mcp_id": server_id, "tools": {}}, context)
    by_name = {t.function_name: t for t in tools}
    assert set(by_name) == {"add", "shout", "refuse"}
    add = by_name["add"]
    assert add.arguments_schema["required"] == ["a", "b"]
    assert add.arguments_schema["properties"]["a"]["type"] == "integer"
    assert add.function_spec()["function"]["name"] == "add"
    assert add.description == "Add two integers."

    result = await add.invoke({"a": 2, "b": 40}, params={}, context=context)
    assert result.ok, result.error
    assert result.content == "42" and result.outputs == {"content": "42"}
    shout = await by_name["shout"].invoke({"text": "hi", "times": 2}, params={}, context=context)
    assert shout.content == "HI HI"
    refused = await by_name["refuse"].invoke({"reason": "no"}, params={}, context=context)
    assert isinstance(refused.error, ToolExecutionError) and "refused: no" in refused.error.message
    if server_id == "remote":
        assert any(h.get("x-test") == "1" for h in SEEN_HEADERS)
    # Calls run concurrently over the one live connection.
    results = await asyncio.gather(*(add.invoke({"a": i, "b": i}, params={}, context=context) for i in range(5)))
    assert [r.content for r in results] == [str(2 * i) for i in range(5)]


async def test_declared_tool_map_is_used_without_listing(runtime: ToolRuntime):
    entry = {"mcp_id": "remote", "tools": {"add": {"name": "add", "description": "sum", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}}
    (tool,) = await mcp_tools_for(entry, runtime.context())
    assert tool.description == "sum"
    assert (await tool.invoke({"a": 1, "b": 1}, params={}, context=runtime.context())).content == "2"


async def test_one_shot_listing(http_mcp_url: str):
    specs = await list_mcp_tools(parse_mcp_server("remote", {"url": http_mcp_url}))
    assert sorted(s.name for s in specs) == ["add", "refuse", "shout"]


async def test_check_reports_missing_and_unreachable_servers(runtime: ToolRuntime, http_mcp_url: str, tmp_path: Path):
    assert await check_mcp_server(parse_mcp_server("remote", {"url": http_mcp_url})) is None
    assert await runtime.mcp.check("local") is None
    missing = await check_mcp_server(None, server_id="ghost")
    assert missing is not None and "not configured" in missing.description
    closed = await check_mcp_server(parse_mcp_server("down", {"url": f"http://127.0.0.1:{_closed_port()}/mcp"}), timeout_s=5)
    assert closed is not None and closed.server_id == "down" and "cannot be reached" in closed.description
    no_cmd = await check_mcp_server(parse_mcp_server("nocmd", {"command": str(tmp_path / "no-such-binary")}), timeout_s=5)
    assert no_cmd is not None and "command not found" in no_cmd.description
    dies = await check_mcp_server(parse_mcp_server("dies", {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}), timeout_s=10)
    assert dies is not None and "cannot be reached" in dies.description

    problems = await check_mcp_entries([{"mcp_id": "remote"}, {"mcp_id": "ghost", "tools": {}}], runtime.context())
    assert [p.field for p in problems] == ["mcp[1].mcp_id"]
    assert "ghost" in problems[0].description


async def test_calls_to_unknown_or_dead_servers_are_typed_errors(tmp_path: Path):
    section = {"mcp": {"connect_timeout_s": 5, "servers": {"down": {"url": f"http://127.0.0.1:{_closed_port()}/mcp"}}}}
    rt = ToolRuntime(make_settings(section, tmp_path))
    try:
        with pytest.raises(ToolConfigError) as unknown:
            await mcp_tools_for({"mcp_id": "ghost"}, rt.context())
        assert unknown.value.setting == "tools.mcp.servers.ghost"
        with pytest.raises(ToolUpstreamError):
            await mcp_tools_for({"mcp_id": "down", "tools": {}}, rt.context())
    finally:
        await rt.aclose()
