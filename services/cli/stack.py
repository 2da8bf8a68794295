"""Reach the services a command needs: connect to running ones, or boot them.

`open_stack` first asks the configured addresses whether they are SERVING (e.g. after
`agent-canvas up`). Whatever is not running is started in this process on ephemeral loopback ports,
with the embedded defaults (SQLite under the data directory, the local sandbox, the embedded model),
and torn down when the command ends. `spawn_processes` starts each service as its own child process,
which is what `agent-canvas up` does.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.auth import client_token
from services.common.bootstrap import LISTEN_HOST_ENV, RunningServer, start_server
from services.common.clients import create_channel
from services.common.errors import InvalidArgumentError, UnavailableError
from services.common.health import wait_until_http_ready, wait_until_serving
from services.common.settings import SERVICES, Config

# CLI names -> service names.
CLI_NAMES = {"store": "canvas_store", "orchestrator": "orchestrator", "gateway": "llm_gateway", "sandbox": "sandbox",
             "http": "http_api"}
# What each service calls; booting one boots its peers first.
PEERS = {"orchestrator": ("canvas_store", "llm_gateway", "sandbox"), "canvas_store": (), "llm_gateway": (), "sandbox": (),
         "http_api": ("canvas_store", "orchestrator")}
BOOT_ORDER = ("canvas_store", "llm_gateway", "sandbox", "orchestrator", "http_api")
HTTP_SERVICES = frozenset({"http_api"})
"""Services that answer HTTP, not gRPC health: `up` waits for their /healthz instead."""


def build_definition(service: str, config: Config):
    """The ServiceDefinition of one service (each service's app.build_definition)."""
    return importlib.import_module(f"services.{service}.app").build_definition(config)


def with_dependencies(needed: Iterable[str]) -> list[str]:
    wanted: set[str] = set()
    stack = list(needed)
    while stack:
        name = stack.pop()
        if name not in wanted:
            wanted.add(name)
            stack.extend(PEERS[name])
    return [name for name in BOOT_ORDER if name in wanted]


@dataclass
class Stack:
    """Addresses of reachable services plus whatever this process started."""

    config: Config
    servers: dict[str, RunningServer] = field(default_factory=dict)
    _channels: dict[str, object] = field(default_factory=dict)

    @property
    def token(self) -> str | None:
        return client_token(self.config)

    def address(self, service: str) -> str:
        return self.config.address(service)

    def channel(self, service: str):
        if service not in self._channels:
            self._channels[service] = create_channel(self.address(service))
        return self._channels[service]

    def metadata(self) -> list[tuple[str, str]]:
        token = self.token
        if token and not (token.isascii() and token.isprintable()):
            # gRPC cannot send it as a header (it fails with a traceback); never show the token itself.
            source = ("AGENT_CANVAS_TOKEN" if os.environ.get("AGENT_CANVAS_TOKEN") else "auth.client_token"
                      if self.config.section("auth").get("client_token") else str(self.config.data_dir / "token"))
            raise InvalidArgumentError.for_field(
                source, "the token holds a character a request header cannot carry (only printable ASCII)")
        return [("authorization", f"Bearer {token}")] if token else []

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        for name in reversed(BOOT_ORDER):
            if name in self.servers:
                await self.servers[name].stop(5)


PROBE_TIMEOUT_S = 30.0
"""The longest one health check may take at an address where something answers. Nothing listening fails at once
(connection refused), so this bounds only a hung peer: a busy machine is not mistaken for a missing service."""
READY_TIMEOUT_S = 120.0
"""How long a service that answers but is still warming up (NOT_SERVING) is waited for."""


async def _running(config: Config, service: str) -> bool:
    """True once the service at the configured address is SERVING; False when nothing answers there."""
    address = config.address(service)
    channel = create_channel(address)
    try:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=PROBE_TIMEOUT_S)
    except grpc.aio.AioRpcError:
        return False
    finally:
        await channel.close()
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        # up but warming (the gateway imports litellm first): wait for it rather than call it missing
        try:
            await wait_until_serving(address, timeout=READY_TIMEOUT_S)
        except TimeoutError:
            raise UnavailableError(f"{service} at {address} answers but did not report SERVING within "
                                   f"{READY_TIMEOUT_S:.0f} s") from None
    return True


async def open_stack(config: Config, needed: Iterable[str], *, mode: str = "auto") -> Stack:
    """Connect to or boot every service in `needed` (plus peers). mode: auto | embedded | remote."""
    order = with_dependencies(needed)
    stack = Stack(config)
    to_boot: list[str] = []
    for service in order:
        if mode == "embedded":
            to_boot.append(service)
        elif not await _running(config, service):
            if mode == "remote":
                raise UnavailableError(
                    f"{service} is not reachable at {config.address(service)}; start the services with `agent-canvas up`"
                )
            to_boot.append(service)
    try:
        for service in BOOT_ORDER:
            if service not in to_boot:
                continue
            definition = build_definition(service, stack.config)
            running = await start_server(definition, stack.config, port=0)
            stack.servers[service] = running
            stack.config = stack.config.with_overrides({"addresses": {service: f"127.0.0.1:{running.port}"}})
        for running in stack.servers.values():
            await running.ready.wait()
    except BaseException:
        await stack.close()
        raise
    return stack


@dataclass
class ChildProcess:
    service: str
    process: subprocess.Popen
    address: str


SAFE_PATH = "-P"
"""Python's flag that keeps the working directory (the `-m` module's "" entry) off sys.path. Without it a
`secrets.py` or `grpc.py` in the directory `up` is started from would be imported by the services in place
of the real modules. Not `-I`: that also drops PYTHONPATH and every PYTHON* variable deployments rely on,
and user site-packages. Nor a fixed cwd: relative paths in the config (`--config ./x.yaml`, a SQLite file)
are the caller's."""


def service_command(service: str, config_path: str | None = None) -> list[str]:
    """The command line of one service process."""
    command = [sys.executable, SAFE_PATH, "-m", f"services.{service}"]
    return command + ["--config", config_path] if config_path else command


def spawn_processes(config: Config, services: Iterable[str] = SERVICES, *, config_path: str | None = None) -> list[ChildProcess]:
    """Start each service as `python -P -m services.<name>` with the shared config and peer addresses."""
    children = []
    env = dict(os.environ)
    env.update(
        {
            "CANVAS_STORE_ADDR": config.address("canvas_store"),
            "ORCHESTRATOR_ADDR": config.address("orchestrator"),
            "LLM_GATEWAY_ADDR": config.address("llm_gateway"),
            "SANDBOX_ADDR": config.address("sandbox"),
            "AGENT_CANVAS_DATA_DIR": str(config.data_dir),
        }
    )
    env.pop("PORT", None)
    env.setdefault(LISTEN_HOST_ENV, "127.0.0.1")  # a local stack: not reachable from the network unless asked
    for service in BOOT_ORDER:
        if service not in services:
            continue
        command = service_command(service, config_path)
        child_env = dict(env, PORT=str(config.port(service, env={})))
        children.append(ChildProcess(service, subprocess.Popen(command, env=child_env), config.address(service)))
    return children


class ChildExited(Exception):
    """A service process ended on its own (while starting, or while `up` was serving)."""

    def __init__(self, child: ChildProcess, code: int | None):
        super().__init__(f"{child.service} exited with code {code}")
        self.child = child
        self.code = code


def first_exit(children: list[ChildProcess]) -> asyncio.Future:
    """A future that resolves to the first child that exits. Each child is waited on by a daemon
    thread, not by asyncio.to_thread: a thread of the loop's executor blocked in wait() would keep
    asyncio.run from returning after Ctrl-C/SIGTERM until that child exits, i.e. forever."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()

    def settle(child: ChildProcess) -> None:
        if not future.done():
            future.set_result(child)

    def watch(child: ChildProcess) -> None:
        child.process.wait()
        try:
            loop.call_soon_threadsafe(settle, child)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more

    for child in children:
        threading.Thread(target=watch, args=(child,), name=f"wait-{child.service}", daemon=True).start()
    return future


async def wait_for_children(children: list[ChildProcess], timeout: float = 120.0) -> None:
    """Until every child is SERVING; ChildExited as soon as one of them exits instead."""
    exited = first_exit(children)
    serving = asyncio.ensure_future(asyncio.gather(*(
        (wait_until_http_ready if child.service in HTTP_SERVICES else wait_until_serving)(child.address, timeout=timeout)
        for child in children)))
    try:
        await asyncio.wait({exited, serving}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not serving.done():
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
    if exited.done():
        child = exited.result()
        raise ChildExited(child, child.process.returncode)
    exited.cancel()
    serving.result()  # re-raises a timeout


def stop_children(children: list[ChildProcess], grace: float = 25.0) -> list[int]:
    """SIGTERM every child, wait for a clean drain, SIGKILL stragglers; returns exit codes. A second
    Ctrl-C/SIGTERM while waiting kills the children that are left at once (nothing is orphaned)."""
    for child in children:
        if child.process.poll() is None:
            child.process.send_signal(signal.SIGTERM)
    codes = []
    try:
        for child in children:
            try:
                codes.append(child.process.wait(timeout=grace))
            except subprocess.TimeoutExpired:
                child.process.kill()
                codes.append(child.process.wait())
    except KeyboardInterrupt:
        for child in children:
            if child.process.returncode is None:
                child.process.kill()
        for child in children:
            child.process.wait()
        raise
    return codes
