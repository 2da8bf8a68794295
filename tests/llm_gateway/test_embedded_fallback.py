"""The embedded model is started when its turn comes: as a fallback it neither holds up the primary while it
starts nor fails the call when it cannot start; as the primary that cannot start, the call falls back or gets
its status. The embedded model here is the real adapter with a model file that does not exist."""

from __future__ import annotations

import grpc
import pytest
from agentcanvas.v1 import llm_gateway_pb2 as pb
from agentcanvas.v1 import llm_gateway_pb2_grpc

from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.errors import FailedPreconditionError
from services.common.settings import Config
from services.llm_gateway.adapters.embedded import EmbeddedModelServer
from services.llm_gateway.app import build_definition, build_provider
from services.llm_gateway.core.gateway import LlmGateway
from services.llm_gateway.core.registry import ModelRegistry
from services.llm_gateway.core.settings import GatewaySettings
from services.llm_gateway.core.types import ChatRequest, FinishReason, Message, TextEvent
from tests.llm_gateway.conftest import collect
from tests.support.openai_server import Reply


@pytest.fixture
def gateway(litellm_module, scripted, sleeps, tmp_path):
    raw = {"models": {"remote": {"model": "openai/remote-model", "api_base": scripted.base_url},
                      "local": {"model": "openai/smollm2", "api_base": "embedded"}},
           "embedded": {"model_path": str(tmp_path / "missing.gguf"), "eager": False}}
    settings = GatewaySettings.from_section(Config().with_overrides({"gateway": raw}).section("gateway"))
    embedded = EmbeddedModelServer(settings.embedded)
    gateway = LlmGateway(ModelRegistry(settings.models, settings.factories, env={}), build_provider(settings), settings,
                         embedded=embedded, sleep=sleeps)
    return gateway, embedded


def _ask(model: str, *fallbacks: str) -> ChatRequest:
    return ChatRequest(model=model, messages=[Message("user", "hi")], fallback_models=list(fallbacks))


async def test_an_embedded_fallback_is_not_started_while_the_primary_answers(gateway, scripted):
    gw, embedded = gateway
    scripted.queue(Reply(content="from remote"))
    events = await collect(gw, _ask("remote", "local"))
    assert "".join(e.text for e in events if isinstance(e, TextEvent)) == "from remote"
    assert events[-1].reason == FinishReason.STOP
    assert embedded._starting is None  # never asked for its address


async def test_an_embedded_primary_that_cannot_start_falls_back(gateway, scripted):
    gw, _ = gateway
    scripted.queue(Reply(content="from remote"))
    events = await collect(gw, _ask("local", "remote"))
    assert "".join(e.text for e in events if isinstance(e, TextEvent)) == "from remote"
    assert [body["model"] for body in scripted.chat_bodies] == ["remote-model"]


async def test_an_embedded_model_that_cannot_start_and_has_no_fallback_gets_its_status(gateway, scripted):
    gw, _ = gateway
    with pytest.raises(FailedPreconditionError) as caught:
        await collect(gw, _ask("local"))
    assert caught.value.reason == "EMBEDDED_MODEL_MISSING" and scripted.chat_bodies == []


async def test_over_grpc_the_status_is_failed_precondition_on_both_calls(scripted, tmp_path, litellm_module):
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({
        "auth": {"embedded": False, "tokens": [{"token": "t1", "tenant": "acme", "user": "alice"}]},
        "gateway": {"embedded": {"model_path": str(tmp_path / "missing.gguf"), "eager": False},
                    "models": {"local": {"model": "openai/smollm2", "api_base": "embedded"}}}})
    running = await start_server(build_definition(config), config, authenticator=TokenAuthenticator.from_config(config, env={}))
    await running.ready.wait()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    stub = llm_gateway_pb2_grpc.LlmGatewayStub(channel)
    request = pb.ChatRequest(model="local", messages=[pb.ChatMessage(role="user", content="hi")])
    auth = [("authorization", "Bearer t1")]
    try:
        for call in (lambda: stub.Chat(request, metadata=auth, timeout=30),
                     lambda: _drain(stub.ChatStream(request, metadata=auth, timeout=30))):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call()
            assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION, caught.value.details()
            assert "model_path" in caught.value.details()
    finally:
        await channel.close()
        await running.stop(0)


async def _drain(call) -> None:
    async for _ in call:
        pass
