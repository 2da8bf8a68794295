"""Start a service: grpc.aio server, interceptors, health, reflection, graceful drain on SIGTERM.

    definition = ServiceDefinition(name="canvas_store", proto_services=[...], register=..., start=..., stop=...)
    running = await start_server(definition, config, port=0)   # tests: ephemeral port
    run_service(definition, config)                            # processes: blocks until SIGTERM, exits 0

Process-wide, `run_service` also picks the event loop (`<section>.event_loop`; the store's default is
uvloop, see event_loops.py), installs tracing and serves Prometheus metrics on the side port
`<section>.metrics_port` (or METRICS_PORT), on the service's listen host unless `<section>.metrics_host`
says otherwise. Health (grpc.health.v1) reports NOT_SERVING until `definition.start()` has finished (the gateway
imports litellm there), then SERVING for "" and for every proto service name. On SIGTERM or SIGINT:
health flips to NOT_SERVING, `definition.stop()` drains domain work, and `server.stop(grace)` lets
open streams finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from services.common import event_loops, telemetry
from services.common import logging as structured_logging
from services.common.auth import TokenAuthenticator
from services.common.clients import SERVER_OPTIONS
from services.common.errors import AgentCanvasError
from services.common.interceptors import ServerInterceptor
from services.common.settings import SECTION_BY_SERVICE, Config

logger = logging.getLogger(__name__)

OVERALL = ""


@dataclass
class ServiceDefinition:
    """What a service contributes to the shared bootstrap."""

    name: str
    """Short name, one of settings.SERVICES."""
    proto_services: Sequence[str]
    """Full proto service names, e.g. "agentcanvas.v1.CanvasStore" (health and reflection)."""
    register: Callable[[grpc.aio.Server], None]
    """Adds the servicer(s) to the server."""
    start: Callable[[], Awaitable[None]] | None = None
    """Warms dependencies; health turns SERVING once it returns."""
    stop: Callable[[float], Awaitable[None]] | None = None
    """Drains domain work within the given seconds, then closes engines and channels."""
    serve_before_ready: bool = False
    """Accept connections while start() runs (reporting NOT_SERVING) instead of waiting for it."""
    event_loop: str = "asyncio"
    """The default of `<section>.event_loop` (event_loops.py)."""
    uvloop_allowed: bool = True
    """False for a service that starts untrusted children: see event_loops.py."""


@dataclass
class RunningServer:
    """A started server. `port` is the bound port (useful with port 0)."""

    definition: ServiceDefinition
    server: grpc.aio.Server
    health: HealthServicer
    port: int
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    _start_task: asyncio.Task | None = None
    _stopped: bool = False

    async def set_serving(self) -> None:
        for name in (OVERALL, *self.definition.proto_services):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        self.ready.set()

    async def stop(self, grace: float = 10.0) -> None:
        """Idempotent graceful stop."""
        if self._stopped:
            return
        self._stopped = True
        await self.health.enter_graceful_shutdown()
        if self._start_task and not self._start_task.done():
            self._start_task.cancel()
        if self.definition.stop:
            await self.definition.stop(grace)
        await self.server.stop(grace)

    async def wait(self) -> None:
        await self.server.wait_for_termination()


async def start_server(
    definition: ServiceDefinition,
    config: Config,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    authenticator: TokenAuthenticator | None = None,
    reflection_enabled: bool = True,
) -> RunningServer:
    """Build, bind and start the server; returns once it accepts connections."""
    # Every secret the configuration holds or names is masked wherever upstream text is quoted (logs,
    # errors, events): services.common.logging.
    structured_logging.register_config_secrets(config.raw, os.environ)
    authenticator = authenticator or TokenAuthenticator.from_config(config)
    server = grpc.aio.server(
        interceptors=[ServerInterceptor(authenticator)],
        options=SERVER_OPTIONS,
    )
    definition.register(server)
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    for name in (OVERALL, *definition.proto_services):
        await health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    if reflection_enabled:
        reflection.enable_server_reflection(
            (*definition.proto_services, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME),
            server,
        )
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"could not bind {host}:{port}")
    running = RunningServer(definition=definition, server=server, health=health, port=bound)

    async def warm_up() -> None:
        if definition.start:
            await definition.start()
        await running.set_serving()
        logger.info("%s serving on %s:%d (%s event loop)", definition.name, host, bound,
                    event_loops.loop_name(asyncio.get_running_loop()))

    if definition.serve_before_ready:
        await server.start()
        running._start_task = asyncio.create_task(warm_up())
    else:
        await warm_up()
        await server.start()
    return running


LISTEN_HOST_ENV = "AGENT_CANVAS_LISTEN_HOST"
"""The interface a service process listens on when no host is given: all of them (0.0.0.0) by default, as
a container needs; `agent-canvas up` sets 127.0.0.1 for its children so a laptop's stack is not on the LAN."""


@contextlib.contextmanager
def configuration_errors(program: str) -> Iterator[None]:
    """Around a service entry point's loading of its configuration: a bad one is one line on stderr naming
    the key, and exit status 2, not a traceback."""
    try:
        yield
    except AgentCanvasError as exc:
        sys.stderr.write(f"{program}: {exc.message}\n")
        raise SystemExit(2) from None


def listen_host(explicit: str | None, env: Mapping[str, str] = os.environ) -> str:
    return explicit or env.get(LISTEN_HOST_ENV) or "0.0.0.0"


def metrics_host(section: Mapping[str, object], service_host: str) -> str:
    """Where the Prometheus side port listens: `<section>.metrics_host`, else the service's own listen host
    (under `up`, 127.0.0.1: the metrics are no more exposed than the service)."""
    return str(section.get("metrics_host") or service_host)


def start_metrics(service: str, section: Mapping[str, object], host: str) -> None:
    """The Prometheus side port, when `METRICS_PORT` or `<section>.metrics_port` asks for one (gRPC services and
    the HTTP facade alike)."""
    at = metrics_host(section, host)
    port = telemetry.start_metrics_server(int(os.environ.get("METRICS_PORT") or section.get("metrics_port", 0)), at)
    if port:
        logger.info("%s metrics on %s:%d/metrics", service, at, port)


def run_service(definition: ServiceDefinition, config: Config, *, host: str | None = None, port: int | None = None) -> int:
    """Run until SIGTERM/SIGINT, drain, and return the exit code (0 on a clean drain)."""
    host = listen_host(host)
    log = config.section("log")
    structured_logging.configure(str(log.get("level", "INFO")), str(log.get("format", "json")), service=definition.name)
    section_name = SECTION_BY_SERVICE[definition.name]
    section = config.section(section_name)
    grace = float(section.get("shutdown_grace_s", 20))
    with configuration_errors(definition.name):  # exits 2 with one line
        loop_factory = event_loops.loop_factory(section.get("event_loop", definition.event_loop),
                                                f"{section_name}.event_loop", uvloop_allowed=definition.uvloop_allowed)
        authenticator = TokenAuthenticator.from_config(config)
    telemetry.configure_tracing(definition.name, config)
    start_metrics(definition.name, section, host)

    async def main() -> int:
        running = await start_server(definition, config, host=host, port=config.port(definition.name) if port is None else port,
                                     authenticator=authenticator)
        stop_requested = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop_requested.set)
        waiter = asyncio.create_task(running.wait())
        stopper = asyncio.create_task(stop_requested.wait())
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        logger.info("%s draining (grace %.0fs)", definition.name, grace)
        await running.stop(grace)
        waiter.cancel()
        stopper.cancel()
        return 0

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(main())
