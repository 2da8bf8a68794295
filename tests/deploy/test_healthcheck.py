"""deploy/docker/healthcheck.py against a real agent-canvas server (services.common.bootstrap)."""

from __future__ import annotations

import asyncio
import os
import socket
import sys

import pytest

from services.common.bootstrap import ServiceDefinition, start_server
from services.common.settings import Config
from tests.deploy.support import ROOT

PROBE = ROOT / "deploy" / "docker" / "healthcheck.py"


async def run_probe(*args: str, port: int | None = None) -> tuple[int, str]:
    """Run the probe as the image does: a separate process, exit code and one line of output."""
    env = {k: v for k, v in os.environ.items() if k != "PORT"}
    if port is not None:
        env["PORT"] = str(port)
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(PROBE), *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    return process.returncode, (out + err).decode()


@pytest.fixture
async def loading_server(tmp_path):
    """A server that accepts connections while its start() is still running (like the gateway)."""
    loaded = asyncio.Event()

    async def start() -> None:
        await loaded.wait()

    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({"auth": {"embedded": False, "tokens": []}})
    definition = ServiceDefinition(
        name="llm_gateway",
        proto_services=["agentcanvas.v1.LlmGateway"],
        register=lambda server: None,
        start=start,
        serve_before_ready=True,
    )
    running = await start_server(definition, config)
    yield running, loaded
    loaded.set()
    await running.stop(0)


async def test_probe_follows_the_service_from_loading_to_serving_to_draining(loading_server):
    running, loaded = loading_server
    code, output = await run_probe(port=running.port)
    assert (code, output.strip()) == (1, f"127.0.0.1:{running.port} (overall): NOT_SERVING")

    loaded.set()
    await asyncio.wait_for(running.ready.wait(), timeout=30)
    code, output = await run_probe("--service", "agentcanvas.v1.LlmGateway", port=running.port)
    assert (code, output.strip()) == (0, f"127.0.0.1:{running.port} agentcanvas.v1.LlmGateway: SERVING")
    code, _ = await run_probe("--addr", f"127.0.0.1:{running.port}")
    assert code == 0

    # SIGTERM's first step: health flips to NOT_SERVING so probes fail before the socket closes.
    await running.health.enter_graceful_shutdown()
    code, output = await run_probe(port=running.port)
    assert code == 1 and "NOT_SERVING" in output


async def test_unknown_service_and_unreachable_port_are_rpc_errors(loading_server):
    running, loaded = loading_server
    loaded.set()
    await asyncio.wait_for(running.ready.wait(), timeout=30)
    code, output = await run_probe("--service", "agentcanvas.v1.Nope", port=running.port)
    assert code == 2 and "NOT_FOUND" in output

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    code, output = await run_probe("--timeout", "1", port=free)
    assert code == 2 and "rpc failed: UNAVAILABLE" in output


async def test_bad_arguments_exit_3():
    assert (await run_probe("--timeout", "0"))[0] == 3
    assert (await run_probe("--bogus"))[0] == 3


async def test_http_probe_reports_the_facades_healthz(tmp_path):
    """`--http` (the http-api image): 0 on a 200 from /healthz, 1 on 503, 2 when nothing answers."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    answers = {"status": 503}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            status = answers["status"] if self.path == "/healthz" else 404
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"code":0}')

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        code, output = await run_probe("--http", port=port)
        assert code == 1 and "/healthz: 503" in output
        answers["status"] = 200
        code, output = await run_probe("--http", port=port)
        assert code == 0 and "/healthz: 200" in output
    finally:
        server.shutdown()
        server.server_close()
    code, output = await run_probe("--http", port=port)
    assert code == 2 and "request failed" in output
