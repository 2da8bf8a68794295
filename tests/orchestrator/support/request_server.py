"""The orchestrator's real gRPC server over an in-memory run store and a scripted model, and helpers to
run canvases on it; shared by the request-check and malformed-input tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from agentcanvas.v1 import orchestrator_pb2, orchestrator_pb2_grpc

from services.common import status
from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.errors import InvalidArgumentError
from services.common.settings import Config
from services.orchestrator.adapters.memory import InMemoryRunStore
from services.orchestrator.app import build_definition
from tests.orchestrator.support.scripted_llm import ScriptedLlm

AUTH = [("authorization", "Bearer t1")]


@contextlib.asynccontextmanager
async def request_server(tmp_path: Path) -> AsyncIterator[tuple[orchestrator_pb2_grpc.OrchestratorStub, InMemoryRunStore]]:
    """(stub, store): token t1 is alice of tenant acme; a node `m` of type LLM answers "A"."""
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({
        "auth": {"embedded": False, "tokens": [{"token": "t1", "tenant": "acme", "user": "alice"}]},
        "orchestrator": {"flush_interval_ms": 5},
    })
    store = InMemoryRunStore()
    definition = build_definition(config, store=store, llm=ScriptedLlm({"m": [[("text", "A")]]}))
    running = await start_server(definition, config, authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        yield orchestrator_pb2_grpc.OrchestratorStub(channel), store
    finally:
        await channel.close()
        await running.stop(0)


async def run(stub, **fields):
    """Every event of a RunCanvas call but heartbeats."""
    return [e async for e in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(**fields), metadata=AUTH)
            if not e.HasField("heartbeat")]


async def refused(stub, **fields) -> InvalidArgumentError:
    """A RunCanvas call that must be INVALID_ARGUMENT; returns its decoded error."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await run(stub, **fields)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    error = status.from_rpc_error(caught.value)
    assert isinstance(error, InvalidArgumentError)
    return error


def final(events):
    assert events[-1].WhichOneof("event") == "workflow_finished"
    return events[-1].workflow_finished
