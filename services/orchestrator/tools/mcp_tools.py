"""MCP tools through the official `mcp` SDK (2.x): stdio commands and streamable-HTTP servers.

A canvas Agent lists MCP servers as `params.mcp = [{mcp_id, tools: {<name>: {name, description,
inputSchema}}}]`. `mcp_id` names a server under `tools.mcp.servers` in the config. Each tool becomes
an `McpTool` whose function name is the MCP tool's own name (stable; see naming.py for collisions)
and whose argument schema is its `inputSchema`. An empty `tools` map means "every tool the server
lists".

`McpConnections` keeps one live client per server: a background task owns the SDK's context manager
(anyio requires it to be entered and exited by the same task) and other tasks call through it. A
broken connection is reopened on the next call. `check_mcp_server` is the load-time probe: a missing
or unreachable server becomes a per-node validation problem, never a crash.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from services.common.logging import redact_text
from services.orchestrator.tools.base import ParamProblem, Tool, ToolResult
from services.orchestrator.tools.config import McpServerSettings
from services.orchestrator.tools.errors import (
    ToolConfigError,
    ToolError,
    ToolExecutionError,
    ToolTimeoutError,
    ToolUpstreamError,
)
from services.orchestrator.tools.runtime import ToolContext

logger = logging.getLogger(__name__)

TOOL = "MCP"
# What the SDK raises when a server cannot be started or reached, or goes away mid-call. Its task
# groups wrap transport errors in ExceptionGroup; each case is listed rather than catching Exception.
_CONNECTION_ERRORS = (
    OSError,
    TimeoutError,
    MCPError,
    httpx2.HTTPError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
    ExceptionGroup,
)


@dataclass(frozen=True)
class McpToolSpec:
    server_id: str
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class McpProblem:
    """Why an MCP server cannot be used; becomes a per-node validation error."""

    server_id: str
    description: str

    def as_param_problem(self, index: int = 0) -> ParamProblem:
        return ParamProblem(f"mcp[{index}].mcp_id", f"MCP server '{self.server_id}': {self.description}")


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def describe(error: BaseException) -> str:
    leaf = _leaf(error)
    if isinstance(leaf, TimeoutError):
        return "did not answer in time"
    if isinstance(leaf, FileNotFoundError):
        return "command not found"
    text = str(leaf) or type(leaf).__name__
    return f"{type(leaf).__name__}: {text}"[:300]


def _transport(server: McpServerSettings, stack: AsyncExitStack, errlog_dir: Path | None) -> Any:
    if server.transport == "http":
        http = httpx2.AsyncClient(headers=dict(server.headers), timeout=httpx2.Timeout(server.timeout_s, connect=server.connect_timeout_s))
        stack.push_async_callback(http.aclose)
        return streamable_http_client(server.url, http_client=http)
    # The server's stderr goes to a per-server log file (or nowhere), never into our JSON logs.
    if errlog_dir is not None:
        errlog_dir.mkdir(parents=True, exist_ok=True)
        errlog = open(errlog_dir / f"mcp-{server.id}.stderr.log", "a")  # noqa: SIM115 - closed by the exit stack
    else:
        errlog = open(os.devnull, "w")  # noqa: SIM115 - closed by the exit stack
    stack.callback(errlog.close)
    params = StdioServerParameters(command=server.command, args=list(server.args), env=dict(server.env) or None, cwd=server.cwd or None)
    return stdio_client(params, errlog=errlog)


async def _open(server: McpServerSettings, stack: AsyncExitStack, errlog_dir: Path | None) -> Client:
    client = Client(_transport(server, stack, errlog_dir), read_timeout_seconds=server.timeout_s)
    return await stack.enter_async_context(client)


def _specs(server_id: str, listed: Any) -> list[McpToolSpec]:
    return [
        McpToolSpec(server_id, t.name, t.description or "", dict(t.input_schema or {"type": "object", "properties": {}}))
        for t in listed.tools
    ]


async def list_mcp_tools(server: McpServerSettings, *, errlog_dir: Path | None = None) -> list[McpToolSpec]:
    """One-shot: connect, list the server's tools, disconnect. Raises ToolUpstreamError/ToolTimeoutError."""
    try:
        async with asyncio.timeout(server.connect_timeout_s + server.timeout_s):
            async with AsyncExitStack() as stack:
                client = await _open(server, stack, errlog_dir)
                return _specs(server.id, await client.list_tools())
    except _CONNECTION_ERRORS as error:
        raise _connection_error(server, error) from None


def _connection_error(server: McpServerSettings, error: BaseException) -> ToolError:
    if isinstance(_leaf(error), TimeoutError):
        return ToolTimeoutError(TOOL, f"MCP server '{server.id}' did not answer in time")
    return ToolUpstreamError(TOOL, f"MCP server '{server.id}' is unreachable ({describe(error)})")


async def check_mcp_server(
    server: McpServerSettings | None, *, server_id: str = "", timeout_s: float | None = None
) -> McpProblem | None:
    """None when the server answers `tools/list` within a short timeout, else the problem.

    `server` None means the id is not configured under `tools.mcp.servers`.
    """
    if server is None:
        return McpProblem(server_id, "is not configured (add it under tools.mcp.servers)")
    limit = timeout_s if timeout_s is not None else server.connect_timeout_s
    try:
        async with asyncio.timeout(limit):
            async with AsyncExitStack() as stack:
                client = await _open(server, stack, None)
                await client.list_tools()
    except _CONNECTION_ERRORS as error:
        return McpProblem(server.id, f"cannot be reached ({describe(error)})")
    return None


def result_text(result: Any) -> str:
    """Only text content goes back to the model (as RAGFlow does); other blocks are named."""
    parts = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        else:
            parts.append(f"[{kind or 'non-text'} content omitted]")
    return "\n".join(parts)


@dataclass
class _Connection:
    server: McpServerSettings
    client: Client | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    owner: asyncio.Task[None] | None = None
    error: BaseException | None = None


class McpConnections:
    """Live MCP clients, one per configured server, opened on first use."""

    def __init__(self, servers: Mapping[str, McpServerSettings], *, errlog_dir: Path | None = None):
        self.servers = dict(servers)
        self._errlog_dir = errlog_dir
        self._connections: dict[str, _Connection] = {}
        self._lock = asyncio.Lock()

    def server(self, server_id: str) -> McpServerSettings:
        try:
            return self.servers[server_id]
        except KeyError:
            raise ToolConfigError(TOOL, f"tools.mcp.servers.{server_id}", f"MCP server '{server_id}' is not configured") from None

    async def check(self, server_id: str, *, timeout_s: float | None = None) -> McpProblem | None:
        return await check_mcp_server(self.servers.get(server_id), server_id=server_id, timeout_s=timeout_s)

    async def _own(self, conn: _Connection) -> None:
        """Owner task: enter the SDK client, publish it, hold it open until closing."""
        try:
            async with AsyncExitStack() as stack:
                conn.client = await _open(conn.server, stack, self._errlog_dir)
                conn.ready.set()
                await conn.closing.wait()
        except _CONNECTION_ERRORS as error:
            conn.error = error
            logger.info("mcp: connection to %s ended: %s", conn.server.id, describe(error))
        finally:
            conn.client = None
            conn.ready.set()

    async def _client(self, server_id: str) -> Client:
        server = self.server(server_id)
        async with self._lock:
            conn = self._connections.get(server_id)
            if conn is None or (conn.owner is not None and conn.owner.done()):
                conn = _Connection(server)
                conn.owner = asyncio.create_task(self._own(conn), name=f"mcp-{server_id}")
                self._connections[server_id] = conn
        try:
            async with asyncio.timeout(server.connect_timeout_s):
                await conn.ready.wait()
        except TimeoutError:
            await self._drop(server_id, conn)
            raise ToolTimeoutError(TOOL, f"MCP server '{server_id}' did not start in time") from None
        if conn.client is None:
            await self._drop(server_id, conn)
            raise _connection_error(server, conn.error or ConnectionError("connection closed"))
        return conn.client

    async def _drop(self, server_id: str, conn: _Connection) -> None:
        conn.closing.set()
        if self._connections.get(server_id) is conn:
            del self._connections[server_id]
        if conn.owner is not None:
            await asyncio.gather(conn.owner, return_exceptions=True)

    async def list_tools(self, server_id: str) -> list[McpToolSpec]:
        client = await self._client(server_id)
        try:
            async with asyncio.timeout(self.servers[server_id].timeout_s):
                return _specs(server_id, await client.list_tools())
        except _CONNECTION_ERRORS as error:
            await self._drop_current(server_id)
            raise _connection_error(self.servers[server_id], error) from None

    async def call_tool(self, server_id: str, name: str, arguments: Mapping[str, Any]) -> str:
        """Call a tool; return its text. Tool-reported errors raise ToolExecutionError with that text."""
        client = await self._client(server_id)
        server = self.servers[server_id]
        try:
            async with asyncio.timeout(server.timeout_s):
                result = await client.call_tool(name, dict(arguments), read_timeout_seconds=server.timeout_s)
        except _CONNECTION_ERRORS as error:
            await self._drop_current(server_id)
            raise _connection_error(server, error) from None
        # A server may echo the headers it was sent; its text goes to the model and into events.
        text = redact_text(result_text(result))
        if result.is_error:
            raise ToolExecutionError(TOOL, f"{name}: {text or 'the MCP tool reported an error'}")
        return text

    async def _drop_current(self, server_id: str) -> None:
        conn = self._connections.get(server_id)
        if conn is not None:
            await self._drop(server_id, conn)

    async def aclose(self) -> None:
        for server_id, conn in list(self._connections.items()):
            await self._drop(server_id, conn)


class McpTool(Tool):
    """One tool of one MCP server, usable by an Agent like any other tool."""

    component_name = "MCP"
    output_names = ("content",)

    def __init__(self, spec: McpToolSpec):
        self.spec = spec
        self.function_name = spec.name
        self.description = spec.description or f"MCP tool {spec.name} of server {spec.server_id}"
        schema = dict(spec.input_schema or {})
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        self.arguments_schema = schema

    async def run(self, args: dict[str, Any], params: dict[str, Any], context: ToolContext) -> ToolResult:
        text = await context.runtime.mcp.call_tool(self.spec.server_id, self.spec.name, args)
        return ToolResult(content=text, outputs={"content": text})


async def mcp_tools_for(entry: Mapping[str, Any], context: ToolContext) -> list[McpTool]:
    """Tools for one `params.mcp` entry: the DSL's tool map, or everything the server lists when empty."""
    server_id = str(entry.get("mcp_id") or "")
    declared = entry.get("tools") or {}
    connections = context.runtime.mcp
    connections.server(server_id)  # unknown id -> ToolConfigError
    if isinstance(declared, Mapping) and declared:
        specs = [
            McpToolSpec(
                server_id,
                str((spec or {}).get("name") or name),
                str((spec or {}).get("description") or ""),
                dict((spec or {}).get("inputSchema") or (spec or {}).get("input_schema") or {}),
            )
            for name, spec in declared.items()
        ]
    else:
        specs = await connections.list_tools(server_id)
    return [McpTool(spec) for spec in specs]


async def check_mcp_entries(entries: Sequence[Mapping[str, Any]], context: ToolContext) -> list[ParamProblem]:
    """Per-node validation of an Agent's `params.mcp`: one problem per missing or unreachable server."""
    problems = []
    for index, entry in enumerate(entries):
        server_id = str((entry or {}).get("mcp_id") or "")
        problem = await context.runtime.mcp.check(server_id)
        if problem is not None:
            problems.append(problem.as_param_problem(index))
    return problems
