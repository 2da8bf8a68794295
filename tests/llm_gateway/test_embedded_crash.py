"""A crashed embedded model server is told apart from a network problem: the call that meets the dead child fails
UNAVAILABLE with reason EMBEDDED_MODEL_FAILED naming the signal, the child is restarted (at most once per
restart_interval_s) and the next call is answered by the new one. The child is the real llama_cpp server,
killed with a real SIGSEGV."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import AsyncIterator

import grpc
import pytest
from agentcanvas.v1 import llm_gateway_pb2 as pb
from agentcanvas.v1 import llm_gateway_pb2_grpc

from services.common import status
from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.settings import Config
from services.llm_gateway.adapters.embedded import READINESS_BODY, describe_exit
from services.llm_gateway.app import GatewayApp, build_app, build_definition

AUTH = [("authorization", "Bearer t1")]
SYSTEM = "You are a helpful assistant. Answer in one short sentence."


def test_exits_are_named_by_signal_or_code():
    assert describe_exit(-signal.SIGSEGV) == "SIGSEGV"
    assert describe_exit(-signal.SIGKILL) == "SIGKILL"
    assert describe_exit(139) == "exit code 139"


def test_readiness_asks_for_one_generated_token():
    assert READINESS_BODY["max_tokens"] == 1 and READINESS_BODY["messages"]


class Gateway:
    def __init__(self, app: GatewayApp, stub: llm_gateway_pb2_grpc.LlmGatewayStub):
        self.app = app
        self.stub = stub

    @property
    def embedded(self):
        assert self.app.embedded is not None
        return self.app.embedded

    async def ready_child(self) -> int:
        await self.embedded.api_base()
        pid = self.embedded.pid
        assert pid is not None
        return pid


def _request(question: str, max_tokens: int = 32) -> pb.ChatRequest:
    return pb.ChatRequest(model="", messages=[pb.ChatMessage(role="system", content=SYSTEM),
                                              pb.ChatMessage(role="user", content=question)],
                          generation=pb.GenerationConfig(temperature=0.1, max_tokens=max_tokens))


async def _gateway(tmp_path, restart_interval_s: float) -> AsyncIterator[Gateway]:
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({
        "auth": {"embedded": False, "tokens": [{"token": "t1", "tenant": "acme", "user": "alice"}]},
        "gateway": {"embedded": {"restart_interval_s": restart_interval_s, "startup_timeout_s": 180}}})
    app = build_app(config)
    running = await start_server(build_definition(config, app), config, authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        await running.ready.wait()
        yield Gateway(app, llm_gateway_pb2_grpc.LlmGatewayStub(channel))
    finally:
        await channel.close()
        await running.stop(0)


@pytest.fixture
async def gateway(tmp_path, litellm_module):
    async for gw in _gateway(tmp_path, restart_interval_s=60):
        yield gw


@pytest.fixture
async def strict_gateway(tmp_path, litellm_module):
    """Restarts at most once an hour: the second crash in a test is not restarted."""
    async for gw in _gateway(tmp_path, restart_interval_s=3600):
        yield gw


async def _answer(gw: Gateway) -> str:
    reply = await gw.stub.Chat(_request("What is the capital of France?"), metadata=AUTH, timeout=240)
    assert reply.error.kind == pb.CHAT_ERROR_KIND_UNSPECIFIED, reply.error.message
    assert reply.text.strip()
    return reply.text


def _assert_crash_status(error: grpc.aio.AioRpcError, how: str = "SIGSEGV") -> None:
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error.details()
    domain = status.from_rpc_error(error)
    assert domain.reason == "EMBEDDED_MODEL_FAILED", error.details()
    assert how in error.details() and domain.metadata.get("exit") == how


@pytest.mark.slow
async def test_a_child_killed_between_calls_fails_the_next_call_and_is_restarted(gateway, caplog):
    old_pid = await gateway.ready_child()
    await _answer(gateway)
    os.kill(old_pid, signal.SIGSEGV)
    with caplog.at_level(logging.WARNING, logger="services.llm_gateway.adapters.embedded"):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await gateway.stub.Chat(_request("What is the capital of France?"), metadata=AUTH, timeout=240)
    _assert_crash_status(caught.value)
    assert any("restarting the embedded model server" in r.getMessage() for r in caplog.records)
    assert "Paris" in await _answer(gateway)  # the call after the crash is answered by the restarted child
    assert gateway.embedded.pid not in (None, old_pid) and gateway.embedded.restarts == 1


@pytest.mark.slow
async def test_a_child_killed_mid_stream_ends_the_stream_unavailable_and_is_restarted(gateway):
    old_pid = await gateway.ready_child()
    stream = gateway.stub.ChatStream(_request("Write a long story about a cat who travels the world.", 400),
                                     metadata=AUTH, timeout=240)
    seen: list[str] = []
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for event in stream:
            kind = event.WhichOneof("event")
            seen.append(kind)
            if kind == "text_delta" and seen.count("text_delta") == 1:
                os.kill(old_pid, signal.SIGSEGV)
            assert kind != "finish", f"the stream finished before the crash reached it: {event}"
    _assert_crash_status(caught.value)
    assert "text_delta" in seen
    assert await _answer(gateway)
    assert gateway.embedded.pid not in (None, old_pid) and gateway.embedded.restarts == 1


@pytest.mark.slow
async def test_a_second_crash_within_the_interval_is_not_restarted(strict_gateway):
    gw = strict_gateway
    os.kill(await gw.ready_child(), signal.SIGKILL)
    with pytest.raises(grpc.aio.AioRpcError) as first:
        await gw.stub.Chat(_request("Hello"), metadata=AUTH, timeout=240)
    _assert_crash_status(first.value, "SIGKILL")
    os.kill(await gw.ready_child(), signal.SIGSEGV)  # the restarted child
    for _ in range(2):  # no restart within the hour: every call says so at once
        with pytest.raises(grpc.aio.AioRpcError) as again:
            await gw.stub.Chat(_request("Hello"), metadata=AUTH, timeout=240)
        _assert_crash_status(again.value)
        assert "next restart" in again.value.details()
    assert gw.embedded.pid is None and gw.embedded.restarts == 1
