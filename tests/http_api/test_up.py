"""`agent-canvas up` serves RAGFlow's API as its fifth service, on the embedded model with the embedded
local token, and the unmodified ragflow-sdk drives it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.http_api.support import HELLO, LOCAL_ENV, ROOT, run_sdk
from tests.support.cluster import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
NAMES = ("canvas_store", "orchestrator", "llm_gateway", "sandbox", "http_api")


def wait_for_line(log: Path, text: str, process: subprocess.Popen, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while text not in log.read_text(errors="replace"):
        assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        assert time.monotonic() < deadline, f"no {text!r} within {limit_s} s"
        time.sleep(0.2)


def test_the_sdk_drives_agent_canvas_up_with_the_local_token(tmp_path):
    ports = {name: free_port() for name in NAMES}
    config = tmp_path / "config.yaml"
    config.write_text("\n".join([f"data_dir: {tmp_path / 'data'}", "addresses:"]
                                + [f"  {name}: 127.0.0.1:{port}" for name, port in ports.items()]) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_ADDR") and not k.startswith("AGENT_CANVAS")}
    env.update(LOCAL_ENV)
    log = tmp_path / "up.log"
    with log.open("wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "services.cli.main", "up", "--config", str(config)], cwd=ROOT,
                                   env=env, stdout=subprocess.DEVNULL, stderr=sink)
    try:
        wait_for_line(log, "press Ctrl-C to stop", process, 300)
        assert f"http_api      serving on 127.0.0.1:{ports['http_api']}" in log.read_text()
        token = (tmp_path / "data" / "token").read_text().strip()
        base_url = f"http://127.0.0.1:{ports['http_api']}"
        seen = run_sdk(None, "crud", base_url=base_url, api_key=token, title="up agent", dsl=HELLO)
        assert seen["updated"]["title"] == "up agent (renamed)" and seen["after_delete_all"] == []
        created = run_sdk(None, "create_for_ask", base_url=base_url, api_key=token, title="up ask", dsl=HELLO)
        asked = run_sdk(None, "ask", base_url=base_url, api_key=token, agent_id=created["agent_id"],
                        question="What is the capital of France?")
        assert asked["blocking"][0]["content"].strip()  # the embedded model answered
        assert "".join(message["content"] for message in asked["streamed"]).strip()
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(120)
    assert code == 0, log.read_text(errors="replace")[-3000:]
