"""Each service is its own process (`agent-canvas serve NAME`): it reports SERVING over
grpc.health.v1 and, on SIGTERM, finishes open streams and exits 0."""

from __future__ import annotations

import asyncio
import os
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
    code = "import time\nprint('started', flush=True)\ntime.sleep(3)\nprint('finished', flush=True)\n"
    async with grpc.aio.insecure_channel(address) as channel:
        call = sandbox_pb2_grpc.SandboxStub(channel).Execute(
            sandbox_pb2.ExecuteRequest(language="python", code=code, mode=sandbox_pb2.EXEC_MODE_SCRIPT),
            metadata=[("authorization", f"Bearer {token}")])
        events = []
        async for event in call:
            events.append(event)
            if event.WhichOneof("event") == "stdout" and b"started" in event.stdout.data:
                process.send_signal(signal.SIGTERM)
    stdout = b"".join(e.stdout.data for e in events if e.WhichOneof("event") == "stdout")
    assert b"finished" in stdout
    assert events[-1].exit.reason == sandbox_pb2.EXIT_REASON_OK
    assert await asyncio.wait_for(process.wait(), timeout=60) == 0
