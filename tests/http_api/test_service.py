"""The facade as a process: `agent-canvas serve http`, SIGTERM, bad configuration, a port in use,
/healthz and /api/v1/openapi.json."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest
import yaml

from services.http_api.app import PREFIX, routes
from tests.http_api.support import LOCAL_ENV, ROOT
from tests.support.cluster import free_port

pytestmark = pytest.mark.timeout(300)


def env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CANVAS") and k not in ("PORT", "METRICS_PORT")}
    return {**clean, **LOCAL_ENV, "PYTHONPATH": f"{ROOT}:{ROOT / 'gen' / 'python'}", **extra}


def wait_ready(port: int, process: subprocess.Popen, limit_s: float = 60) -> httpx.Response:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2, trust_env=False)
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("the facade never answered")


def test_serve_http_answers_health_and_stops_cleanly_on_sigterm(cluster):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "services.cli.main", "serve", "http", "--port", str(port),
                                "--host", "127.0.0.1", "--config", str(cluster.config_path)],
                               env=env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        health = wait_ready(port, process)
        assert health.status_code == 200
        assert health.json() == {"code": 0, "message": "success", "data": {"canvas_store": True, "orchestrator": True}}
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        assert "Traceback" not in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_healthz_is_503_without_its_peers(tmp_path):
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(tmp_path), "addresses": {
        "canvas_store": f"127.0.0.1:{free_port()}", "orchestrator": f"127.0.0.1:{free_port()}"}}))
    process = subprocess.Popen([sys.executable, "-m", "services.http_api", "--config", str(config), "--port", str(port),
                                "--host", "127.0.0.1"], env=env(), cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        health = wait_ready(port, process)
        assert health.status_code == 503 and health.json()["data"] == {"canvas_store": False, "orchestrator": False}
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_bad_http_section_or_a_port_in_use_is_one_line_and_exit_2(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(tmp_path), "http": {"max_body_bytez": 5}}))
    bad = subprocess.run([sys.executable, "-m", "services.http_api", "--config", str(config)], env=env(), cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "http.max_body_bytez" in bad.stderr
    config.write_text(yaml.safe_dump({"data_dir": str(tmp_path)}))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        busy = subprocess.run([sys.executable, "-m", "services.cli.main", "serve", "http", "--port", str(port), "--host",
                               "127.0.0.1", "--config", str(config)], env=env(), cwd=ROOT, capture_output=True, text=True,
                              timeout=120)
    assert busy.returncode == 2 and "Traceback" not in busy.stderr
    assert f"error: FAILED_PRECONDITION: http_api: cannot listen on 127.0.0.1:{port}" in busy.stderr


def test_openapi_describes_every_route(cluster):
    document = httpx.get(f"{cluster.base_url}/api/v1/openapi.json", trust_env=False).json()
    assert document["openapi"].startswith("3.1")
    served = {route.path for route in routes(None) if route.path.startswith(PREFIX)}  # type: ignore[arg-type]
    assert served == set(document["paths"])
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert operation["responses"]["200"], (path, method)
