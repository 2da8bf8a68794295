"""`run --remote` decides from each service's health whether the stack is there: a service that answers slowly
(a busy machine) or is still warming up (NOT_SERVING) is waited for until SERVING, and only an address where
nothing listens is "not reachable". The services here are real gRPC servers speaking grpc.health.v1."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.cli.stack import open_stack
from services.common.errors import UnavailableError
from services.common.settings import Config
from tests.support.cluster import free_port


class ScriptedHealth(health_pb2_grpc.HealthServicer):
    """Answers every Check after `delay_s`; NOT_SERVING for the first `warming` checks, SERVING after."""

    def __init__(self, delay_s: float = 0.0, warming: int = 0):
        self.delay_s = delay_s
        self.warming = warming
        self.checks = 0

    async def Check(self, request, context):
        self.checks += 1
        await asyncio.sleep(self.delay_s)
        serving = self.checks > self.warming
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING if serving
                                              else health_pb2.HealthCheckResponse.NOT_SERVING)


async def _serve(health: ScriptedHealth) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


def _config(tmp_path, port: int) -> Config:
    return Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides(
        {"addresses": {"sandbox": f"127.0.0.1:{port}"}})


@pytest.mark.parametrize("health", [ScriptedHealth(delay_s=1.5), ScriptedHealth(warming=3)],
                         ids=["slow-to-answer", "warming-up"])
async def test_a_remote_service_that_answers_is_waited_for_until_serving(tmp_path, health):
    server, port = await _serve(health)
    try:
        stack = await open_stack(_config(tmp_path, port), ["sandbox"], mode="remote")
        await stack.close()
        assert stack.servers == {}  # used the running one, booted nothing
        assert health.checks > health.warming
    finally:
        await server.stop(0)


async def test_nothing_listening_is_not_reachable(tmp_path):
    with pytest.raises(UnavailableError) as caught:
        await open_stack(_config(tmp_path, free_port()), ["sandbox"], mode="remote")
    assert "sandbox is not reachable" in caught.value.message
