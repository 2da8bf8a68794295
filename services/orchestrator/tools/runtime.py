"""Process-wide resources the tools share, and the per-call context handed to `Tool.invoke`.

`ToolRuntime` is created once per orchestrator process (or per test) and owns the pooled HTTP
client, the bounded thread pool for blocking work (SQLite, SQLAlchemy, file parsing), the embedded
knowledge base, the sandbox channel and the MCP connections. `runtime.context(...)` makes the
light per-call `ToolContext` carrying the run's reference bucket and an idempotency key.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from services.orchestrator.tools.citations import ReferenceBucket
from services.orchestrator.tools.config import ToolsSettings

if TYPE_CHECKING:
    from services.orchestrator.tools.code_exec import SandboxClient
    from services.orchestrator.tools.kb.store import KnowledgeBase
    from services.orchestrator.tools.mcp_tools import McpConnections

logger = logging.getLogger(__name__)

T = TypeVar("T")


class ToolRuntime:
    """Shared, long-lived tool resources. Close with `await runtime.aclose()`."""

    def __init__(self, settings: ToolsSettings, *, max_threads: int = 4,
                 service_identity: Callable[[], tuple[str | None, str]] | None = None):
        self.settings = settings
        self._service_identity = service_identity
        """(service token, "tenant/user" acted for) for calls outside an RPC (a takeover): see SandboxClient."""
        self.http = httpx.AsyncClient(
            headers={"User-Agent": settings.http.user_agent},
            follow_redirects=False,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
        )
        self._executor = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="tools")
        self._kb: KnowledgeBase | None = None
        self._sandbox: SandboxClient | None = None
        self._mcp: McpConnections | None = None

    async def run_blocking(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    @property
    def kb(self) -> "KnowledgeBase":
        if self._kb is None:
            from services.orchestrator.tools.kb.store import KnowledgeBase

            self._kb = KnowledgeBase(self.settings.retrieval.embedded)
        return self._kb

    @property
    def sandbox(self) -> "SandboxClient":
        if self._sandbox is None:
            from services.orchestrator.tools.code_exec import SandboxClient

            self._sandbox = SandboxClient(self.settings.code_exec.address, token=self.settings.code_exec.token,
                                          service_identity=self._service_identity)
        return self._sandbox

    @property
    def mcp(self) -> "McpConnections":
        if self._mcp is None:
            from services.orchestrator.tools.mcp_tools import McpConnections

            self._mcp = McpConnections(self.settings.mcp_servers, errlog_dir=self.settings.data_dir / "logs")
        return self._mcp

    def context(self, *, references: ReferenceBucket | None = None, request_id: str = "") -> "ToolContext":
        return ToolContext(runtime=self, references=references, request_id=request_id)

    async def aclose(self) -> None:
        if self._mcp is not None:
            await self._mcp.aclose()
        if self._sandbox is not None:
            await self._sandbox.aclose()
        await self.http.aclose()
        if self._kb is not None:
            self._kb.close()
        self._executor.shutdown(wait=False, cancel_futures=True)


@dataclass
class ToolContext:
    """What one tool call may use.

    Attributes:
        runtime: the shared resources.
        references: the run's reference bucket; Retrieval and web tools add their chunks to it, which
            assigns citation ids. None outside a run (chunks then carry positional ids).
        request_id: idempotency key such as "run:node:attempt", passed to the sandbox.
    """

    runtime: ToolRuntime
    references: ReferenceBucket | None = None
    request_id: str = ""

    @property
    def settings(self) -> ToolsSettings:
        return self.runtime.settings

    @property
    def http(self) -> httpx.AsyncClient:
        return self.runtime.http

    async def run_blocking(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self.runtime.run_blocking(fn, *args, **kwargs)

    def cite(self, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Give chunks citation ids: from the run's bucket, else their position."""
        if self.references is not None:
            return self.references.add(chunks)
        return [dict(chunk, citation_id=i) for i, chunk in enumerate(chunks)]
