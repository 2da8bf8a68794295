"""Each service is its own process (`agent-canvas serve NAME`): it reports SERVING over
grpc.health.v1 and, on SIGTERM, finishes open streams and exits 0."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import sys
from pathlib import Path

import grpc
import pytest
from agentcanvas.v1 import sandbox_pb2, sandbox_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.auth import ensure_local_token
from services.common.health import wait_until_serving
from services.sandbox.core.settings import SandboxSettings
from tests.sandbox.harness import BLOCKING_PYTHON, release_local

ROOT = Path(__file__).resolve().parents[2]
PROTO_SERVICES = {"store": "agentcanvas.v1.CanvasStore", "orchestrator": "agentcanvas.v1.Orchestrator",
                  "gateway": "agentcanvas.v1.LlmGateway", "sandbox": "agentcanvas.v1.Sandbox"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _serve(name: str, data_dir: Path) -> tuple[asyncio.subprocess.Process, str]:
    port = _free_port()
    env = dict(os.environ, AGENT_CANVAS_DATA_DIR=str(data_dir), PYTHONPATH=f"{ROOT}:{ROOT / 'gen' / 'python'}",
               AGENT_CANVAS__LOG__LEVEL="WARNING")
    env.pop("PORT", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli.main", "serve", name, "--port", str(port), "--host", "127.0.0.1", env=env)
    address = f"127.0.0.1:{port}"
    await wait_until_serving(address, timeout=180)
    return process, address


@pytest.mark.parametrize("name", ["store", "orchestrator", "gateway", "sandbox"])
async def test_serves_health_and_exits_zero_on_sigterm(name, tmp_path):
    process, address = await _serve(name, tmp_path)
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=PROTO_SERVICES[name]), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), timeout=60)
    assert code == 0


async def test_sigterm_lets_an_open_stream_finish(tmp_path):
    process, address = await _serve("sandbox", tmp_path)
    token = ensure_local_token(tmp_path)
    job = secrets.token_hex(4)
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            health = health_pb2_grpc.HealthStub(channel).Watch(
                health_pb2.HealthCheckRequest(service=PROTO_SERVICES["sandbox"]))
            assert (await asyncio.wait_for(health.read(), 30)).status == health_pb2.HealthCheckResponse.SERVING
            call = sandbox_pb2_grpc.SandboxStub(channel).Execute(
                sandbox_pb2.ExecuteRequest(language="python", code=BLOCKING_PYTHON.format(token=job),
                                           mode=sandbox_pb2.EXEC_MODE_SCRIPT,
                                           limits=sandbox_pb2.ResourceLimits(wall_time_ms=120_000)),
                metadata=[("authorization", f"Bearer {token}")])
            events = []
            while not any(e.WhichOneof("event") == "stdout" for e in events):
                events.append(await asyncio.wait_for(call.read(), 60))
            process.send_signal(signal.SIGTERM)
            # The job blocks until released, so it is certainly still running once the server drains.
            while (await asyncio.wait_for(health.read(), 30)).status != health_pb2.HealthCheckResponse.NOT_SERVING:
                pass
            health.cancel()  # an open watch would hold the drain back for the whole grace period
            assert not call.done()
            release_local(SandboxSettings.from_section({}).work_root_path / "jobs", job)
            while (event := await asyncio.wait_for(call.read(), 60)) != grpc.aio.EOF:
                events.append(event)
        code = await asyncio.wait_for(process.wait(), timeout=60)
    finally:
        if process.returncode is None:  # a failure above must not leave the server running
            process.kill()
            await process.wait()
    stdout = b"".join(e.stdout.data for e in events if e.WhichOneof("event") == "stdout")
    assert b"second" in stdout
    assert events[-1].exit.reason == sandbox_pb2.EXIT_REASON_OK
    assert code == 0
