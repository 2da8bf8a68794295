"""The real llm_gateway and orchestrator in this process, the gateway talking HTTP to a scripted
OpenAI-compatible server, the orchestrator on the in-memory run store.

    async with llm_stack(tmp_path, llm_id="") as (stub, provider):
        ...
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
from agentcanvas.v1 import orchestrator_pb2_grpc

from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.settings import Config
from services.llm_gateway import app as gateway_app
from services.orchestrator import app as orchestrator_app
from services.orchestrator.adapters.memory import InMemoryRunStore
from tests.support.openai_server import ScriptedOpenAIServer

TOKEN = "t1"
AUTH = [("authorization", f"Bearer {TOKEN}")]
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")


@asynccontextmanager
async def llm_stack(data_dir: Path, *, llm_id: str = "", provider: ScriptedOpenAIServer | None = None,
                    gateway: dict[str, Any] | None = None, orchestrator: dict[str, Any] | None = None,
                    extra: dict[str, Any] | None = None,
                    store: InMemoryRunStore | None = None,
                    more_models: Callable[[ScriptedOpenAIServer], dict[str, Any]] | None = None,
                    ) -> AsyncIterator[tuple[Any, ScriptedOpenAIServer]]:
    """Yields (OrchestratorStub, scripted provider). `llm_id` names the registry entry pointing at the
    provider; `gateway`/`orchestrator` add settings to those sections, `extra` adds whole sections;
    `store` lets a test create sessions in the orchestrator's in-memory run store; `more_models`
    adds registry entries made from the started provider (another shape of it, say)."""
    with provider or ScriptedOpenAIServer() as scripted:
        base = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(data_dir)}).with_overrides({
            "auth": {"embedded": False, "tokens": [{"token": TOKEN, "tenant": "acme", "user": "alice"}]},
            "gateway": {"embedded": {"enabled": False},
                        "models": {llm_id: {"model": "openai/test-model", "api_base": scripted.base_url, "api_key": "sk-test"},
                                   **(more_models(scripted) if more_models else {})},
                        **(gateway or {})},
            **(extra or {}),
        })
        auth = TokenAuthenticator.from_config(base, env={})
        gateway_server = await start_server(gateway_app.build_definition(base), base, authenticator=auth)
        await gateway_server.ready.wait()
        config = base.with_overrides({"addresses": {"llm_gateway": f"127.0.0.1:{gateway_server.port}"},
                                      "orchestrator": {"flush_interval_ms": 5, **(orchestrator or {})}})
        orchestrator_server = await start_server(orchestrator_app.build_definition(config, store=store or InMemoryRunStore()),
                                                 config, authenticator=auth)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{orchestrator_server.port}")
        try:
            yield orchestrator_pb2_grpc.OrchestratorStub(channel), scripted
        finally:
            await channel.close()
            await orchestrator_server.stop(0)
            await gateway_server.stop(0)
