"""The embedded model server's child process: its environment, concurrency and lifetime.

* The gateway runs with PORT (and HOST, ...) set in containers; llama_cpp.server reads those too, so the child
  must be started with them stripped and serve on the port the gateway chose.
* Overlapping requests queue on the model (`--interrupt_requests False`) instead of cutting each other off.
* The child does not outlive a SIGKILLed gateway (PR_SET_PDEATHSIG plus a parent-pid check).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import httpx
import pytest
from agentcanvas.v1 import llm_gateway_pb2 as pb
from agentcanvas.v1 import llm_gateway_pb2_grpc

from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.settings import Config
from services.llm_gateway.adapters.embedded import EmbeddedModelServer, server_command
from services.llm_gateway.adapters.embedded_server import (
    EXIT_PARENT_GONE, PARENT_PID_ENV, scrub_environment, settings_variables,
)
from services.llm_gateway.app import build_app, build_definition
from services.llm_gateway.core.settings import EmbeddedSettings

ROOT = Path(__file__).resolve().parents[2]
AUTH = [("authorization", "Bearer t1")]
SYSTEM = "You are a helpful assistant. Answer in one short sentence."


def _unused_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting for a reaper counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_gone(pid: int, bound_s: float) -> bool:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return not _alive(pid)


@pytest.fixture
def hostile_env(monkeypatch):
    """What the gateway's own environment looks like in a container, plus llama_cpp settings that would break
    the child if they leaked (a port nobody listens on, a missing model, an API key, a missing config file)."""
    wrong_port = _unused_port()
    monkeypatch.setenv("PORT", str(wrong_port))
    monkeypatch.setenv("HOST", "0.0.0.0")
    monkeypatch.setenv("model", "/nonexistent/model.gguf")  # pydantic-settings matches names case-insensitively
    monkeypatch.setenv("API_KEY", "must-not-reach-the-child")
    monkeypatch.setenv("CONFIG_FILE", "/nonexistent/config.json")
    monkeypatch.setenv("INTERRUPT_REQUESTS", "true")
    return wrong_port


def test_scrub_removes_llama_cpp_settings_case_insensitively():
    names = settings_variables()
    assert {"PORT", "HOST", "MODEL", "API_KEY", "INTERRUPT_REQUESTS", "N_CTX", "CONFIG_FILE"} <= names
    environ = {"PORT": "1", "host": "x", "Model": "m", "PATH": "/bin", "AGENT_CANVAS_CONFIG": "c", "METRICS_PORT": "9464"}
    assert scrub_environment(environ, names) == ["Model", "PORT", "host"]
    assert environ == {"PATH": "/bin", "AGENT_CANVAS_CONFIG": "c", "METRICS_PORT": "9464"}


def test_the_child_is_started_through_our_wrapper_without_interrupts():
    command = server_command(Path("/m.gguf"), 1234, 2048)
    assert command[1:4] == ["-P", "-m", "services.llm_gateway.adapters.embedded_server"]
    assert command[command.index("--port") + 1] == "1234" and command[command.index("--host") + 1] == "127.0.0.1"
    assert command[command.index("--interrupt_requests") + 1] == "False"


def test_a_module_planted_in_the_working_directory_is_not_imported_by_the_child(tmp_path):
    """The child runs in the gateway's working directory: a `services.py` there would shadow the package."""
    (tmp_path / "services.py").write_text("import pathlib\npathlib.Path(__file__).with_name('imported').write_text('x')\n")
    env = {**os.environ, PARENT_PID_ENV: str(2**22 + 7)}  # exit as soon as the wrapper runs
    done = subprocess.run(server_command(Path("/none.gguf"), 1, 512), cwd=tmp_path, env=env, capture_output=True, timeout=60)
    assert done.returncode == EXIT_PARENT_GONE, done.stderr.decode()
    assert not (tmp_path / "imported").exists()


def test_the_child_exits_when_its_parent_is_already_gone():
    """The pid handed over is not the child's parent (the gateway died before prctl ran): exit at once,
    before loading anything."""
    env = {**os.environ, PARENT_PID_ENV: str(2**22 + 7)}  # above any pid_max: never our pid
    done = subprocess.run([sys.executable, "-m", "services.llm_gateway.adapters.embedded_server", "--model", "/none"],
                          cwd=ROOT, env=env, capture_output=True, timeout=60)
    assert done.returncode == EXIT_PARENT_GONE, done.stderr.decode()


@pytest.mark.slow
async def test_the_child_serves_on_the_chosen_port_whatever_port_and_host_say(hostile_env):
    server = EmbeddedModelServer(EmbeddedSettings(startup_timeout_s=90))
    try:
        base = await server.api_base()
        port = int(base.rsplit(":", 1)[1].split("/")[0])
        assert base.startswith("http://127.0.0.1:") and port != hostile_env
        async with httpx.AsyncClient(timeout=10, trust_env=False) as client:
            reply = await client.get(f"{base}/models")  # no API key: API_KEY did not reach the child
            assert reply.status_code == 200
            assert [m["id"] for m in reply.json()["data"]] == ["smollm2-135m-instruct"]
            with pytest.raises(httpx.TransportError):
                await client.get(f"http://127.0.0.1:{hostile_env}/v1/models")
    finally:
        await server.stop()


@pytest.mark.slow
async def test_overlapping_generations_all_complete(hostile_env, tmp_path, litellm_module):
    """Through the whole gateway, with PORT/HOST set as under `agent-canvas up` or in Kubernetes: concurrent
    streams and calls to the embedded model queue on it and each ends normally with text."""
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides(
        {"auth": {"embedded": False, "tokens": [{"token": "t1", "tenant": "acme", "user": "alice"}]}})
    app = build_app(config)
    running = await start_server(build_definition(config, app), config, authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        await running.ready.wait()
        client = llm_gateway_pb2_grpc.LlmGatewayStub(channel)
        questions = ["What is the capital of France?", "Name a colour of the sky.", "What is two plus two?",
                     "Name a large animal."]

        def request(question: str) -> pb.ChatRequest:
            return pb.ChatRequest(model="", messages=[pb.ChatMessage(role="system", content=SYSTEM),
                                                      pb.ChatMessage(role="user", content=question)],
                                  generation=pb.GenerationConfig(temperature=0.1, max_tokens=40))

        async def stream(question: str) -> tuple[str, pb.ChatFinish]:
            events = [e async for e in client.ChatStream(request(question), metadata=AUTH, timeout=240)]
            text = "".join(e.text_delta.text for e in events if e.WhichOneof("event") == "text_delta")
            return text, events[-1].finish

        async def chat(question: str) -> tuple[str, pb.ChatFinish]:
            reply = await client.Chat(request(question), metadata=AUTH, timeout=240)
            return reply.text, pb.ChatFinish(reason=reply.finish_reason, error=reply.error)

        results = await asyncio.gather(*(stream(q) for q in questions[:3]), chat(questions[3]))
        for text, finish in results:
            assert finish.error.kind == pb.CHAT_ERROR_KIND_UNSPECIFIED, finish.error.message
            assert finish.reason in (pb.FINISH_REASON_STOP, pb.FINISH_REASON_LENGTH)
            assert text.strip()
    finally:
        await channel.close()
        await running.stop(0)


_SPAWNER = """
import asyncio, sys
from services.llm_gateway.adapters.embedded import EmbeddedModelServer
from services.llm_gateway.core.settings import EmbeddedSettings

async def main():
    server = EmbeddedModelServer(EmbeddedSettings(startup_timeout_s=90))
    base = await server.api_base()
    print(server._process.pid, base, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


@pytest.mark.slow
def test_the_child_does_not_outlive_a_killed_gateway(hostile_env):
    spawner = subprocess.Popen([sys.executable, "-c", _SPAWNER], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        line = spawner.stdout.readline()  # after the child answers; the spawner's own timeout bounds this
        child = int(line.split()[0])
        assert _alive(child)
        spawner.send_signal(signal.SIGKILL)
        spawner.wait(timeout=30)
        assert _wait_gone(child, 30), "the model server outlived its SIGKILLed parent"
    finally:
        if spawner.poll() is None:
            spawner.kill()
            spawner.wait()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)
