"""The real canvas_store, in this process on a loopback port, for orchestrator tests that need its gRPC API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from agentcanvas.v1 import canvas_store_pb2_grpc

from services.canvas_store.app import build_service
from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.clients import create_channel
from services.common.settings import Config


@asynccontextmanager
async def running_store(data_dir: str, database_url: str, tokens: list[dict[str, Any]],
                        **store: Any) -> AsyncIterator[tuple[str, canvas_store_pb2_grpc.CanvasStoreStub]]:
    """(address, stub) of a store over `database_url` that knows `tokens` (more `store` settings as keywords),
    stopped on exit."""
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": data_dir}).with_overrides({
        "auth": {"embedded": False, "tokens": tokens},
        "store": {"database_url": database_url, "watch_poll_interval_ms": 20, "seed_templates": False, **store}})
    definition, _ = build_service(config)
    running = await start_server(definition, config, authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = create_channel(f"127.0.0.1:{running.port}")
    try:
        yield f"127.0.0.1:{running.port}", canvas_store_pb2_grpc.CanvasStoreStub(channel)
    finally:
        await channel.close()
        await running.stop(0)
