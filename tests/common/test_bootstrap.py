"""services.common over a real socket: health, auth, error mapping, deadlines and graceful drain."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from agentcanvas.v1 import sandbox_pb2, sandbox_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common import context, errors, status
from services.common.auth import TokenAuthenticator
from services.common.bootstrap import LISTEN_HOST_ENV, ServiceDefinition, listen_host, start_server
from services.common.context import Identity
from services.common.settings import Config


class _Probe(sandbox_pb2_grpc.SandboxServicer):
    """A tiny servicer that exercises the interceptors."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def ListRuntimes(self, request, context_):
        identity = context.current_identity()
        if identity.user_id == "bad":
            raise errors.InvalidArgumentError.for_field("language", "unknown language 'cobol'")
        if identity.user_id == "boom":
            raise RuntimeError("secret internals")
        remaining = context.remaining_time()
        version = "deadline" if remaining is not None else "none"
        return sandbox_pb2.ListRuntimesResponse(
            runtimes=[sandbox_pb2.Runtime(language=identity.tenant_id, version=version, backend=identity.user_id)]
        )

    async def Execute(self, request, context_):
        yield sandbox_pb2.ExecEvent(started=sandbox_pb2.ExecStarted(job_id="j1"))
        await self.release.wait()
        yield sandbox_pb2.ExecEvent(exit=sandbox_pb2.ExecExit(code=0, reason=sandbox_pb2.EXIT_REASON_OK))


@pytest.fixture
async def probe_server(tmp_path):
    probe = _Probe()
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides(
        {
            "auth": {
                "embedded": False,
                "tokens": [
                    {"token": "t-alice", "tenant": "acme", "user": "alice"},
                    {"token": "t-bad", "tenant": "acme", "user": "bad"},
                    {"token": "t-boom", "tenant": "acme", "user": "boom"},
                    {"token": "t-svc", "tenant": "ops", "user": "orchestrator", "role": "service"},
                ],
            }
        }
    )
    definition = ServiceDefinition(
        name="sandbox",
        proto_services=["agentcanvas.v1.Sandbox"],
        register=lambda server: sandbox_pb2_grpc.add_SandboxServicer_to_server(probe, server),
    )
    running = await start_server(definition, config, authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    yield running, channel, probe
    await channel.close()
    await running.stop(0)


def _auth(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


async def test_health_is_serving_without_credentials(probe_server):
    running, channel, _ = probe_server
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "agentcanvas.v1.Sandbox"):
        reply = await health.Check(health_pb2.HealthCheckRequest(service=service))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_missing_and_bad_tokens_are_unauthenticated(probe_server):
    _, channel, _ = probe_server
    stub = sandbox_pb2_grpc.SandboxStub(channel)
    for metadata in ([], _auth("nope"), [("authorization", "Basic abc")]):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.ListRuntimes(sandbox_pb2.ListRuntimesRequest(), metadata=metadata)
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_identity_and_deadline_reach_the_handler(probe_server):
    _, channel, _ = probe_server
    stub = sandbox_pb2_grpc.SandboxStub(channel)
    reply = await stub.ListRuntimes(sandbox_pb2.ListRuntimesRequest(), metadata=_auth("t-alice"), timeout=30)
    assert (reply.runtimes[0].language, reply.runtimes[0].backend, reply.runtimes[0].version) == ("acme", "alice", "deadline")
    reply = await stub.ListRuntimes(sandbox_pb2.ListRuntimesRequest(), metadata=_auth("t-alice"))
    assert reply.runtimes[0].version == "none"


async def test_service_token_may_act_on_behalf_of_a_user_and_users_may_not(probe_server):
    _, channel, _ = probe_server
    stub = sandbox_pb2_grpc.SandboxStub(channel)
    header = [("x-agentcanvas-on-behalf-of", "acme/carol")]
    reply = await stub.ListRuntimes(sandbox_pb2.ListRuntimesRequest(), metadata=_auth("t-svc") + header)
    assert (reply.runtimes[0].language, reply.runtimes[0].backend) == ("acme", "carol")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.ListRuntimes(sandbox_pb2.ListRuntimesRequest(), metadata=_auth("t-alice") + header)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_domain_error_becomes_invalid_argument_with_field_violation(probe_server):
    _, channel, _ = probe_server
    stub = sandbox_pb2_grpc.SandboxStub(channel)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.ListRuntimes(sandbox_pb2.ListRuntimesRequest(), metadata=_auth("t-bad"))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    converted = status.from_rpc_error(caught.value)
    assert isinstance(converted, errors.InvalidArgumentError)
    assert [(v.field, v.description) for v in converted.violations] == [("language", "unknown language 'cobol'")]


async def test_unexpected_exception_is_internal_without_leaking_details(probe_server):
    _, channel, _ = probe_server
    stub = sandbox_pb2_grpc.SandboxStub(channel)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.ListRuntimes(sandbox_pb2.ListRuntimesRequest(), metadata=_auth("t-boom"))
    assert caught.value.code() == grpc.StatusCode.INTERNAL
    assert "secret" not in (caught.value.details() or "")


async def test_stop_lets_an_open_stream_finish(probe_server):
    running, channel, probe = probe_server
    stub = sandbox_pb2_grpc.SandboxStub(channel)
    call = stub.Execute(sandbox_pb2.ExecuteRequest(language="python", code="pass"), metadata=_auth("t-alice"))
    first = await call.read()
    assert first.WhichOneof("event") == "started"
    stopping = asyncio.create_task(running.stop(30))
    # Draining: new calls are refused while the open stream is still alive. The stop runs in its own
    # task and nothing reports when the gRPC server has begun refusing, so poll with a generous deadline.
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        try:
            await stub.ListRuntimes(sandbox_pb2.ListRuntimesRequest(), metadata=_auth("t-alice"), timeout=10)
        except grpc.aio.AioRpcError as exc:
            refused = exc.code()
            break
        assert asyncio.get_running_loop().time() < deadline, "new calls were still served while draining"
        await asyncio.sleep(0.01)
    assert refused in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
    assert not call.done() and not stopping.done()  # the open stream holds the stop back
    probe.release.set()
    last = await call.read()
    assert last.WhichOneof("event") == "exit"
    await stopping
    assert await call.code() == grpc.StatusCode.OK


def test_identity_is_value_object():
    assert Identity("t", "u") == Identity("t", "u", "user")


def test_listen_host_is_explicit_then_the_environment_then_every_interface():
    assert listen_host("10.0.0.5", {LISTEN_HOST_ENV: "127.0.0.1"}) == "10.0.0.5"
    assert listen_host(None, {LISTEN_HOST_ENV: "127.0.0.1"}) == "127.0.0.1"
    assert listen_host(None, {}) == "0.0.0.0"


def test_the_metrics_port_listens_where_the_service_does_unless_metrics_host_says_otherwise():
    from services.common.bootstrap import metrics_host

    assert metrics_host({}, "127.0.0.1") == "127.0.0.1"  # was 0.0.0.0 whatever the service's host
    assert metrics_host({"metrics_host": "0.0.0.0"}, "127.0.0.1") == "0.0.0.0"
