"""Run the facade on uvicorn until SIGTERM/SIGINT, then let open requests and streams finish
(`http.shutdown_grace_s`) and exit 0. Logging, tracing and metrics as every service has them."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import socket
from collections.abc import Iterator

import uvicorn

from services.common import event_loops, telemetry
from services.common import logging as structured_logging
from services.common.bootstrap import configuration_errors, listen_host, start_metrics
from services.common.errors import FailedPreconditionError
from services.common.settings import Config
from services.http_api.app import build_app
from services.http_api.settings import HttpSettings

logger = logging.getLogger(__name__)
SERVICE = "http_api"


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before uvicorn starts so a port in use is one clear error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise FailedPreconditionError(
                f"http_api: cannot listen on {host}:{port} ({exc.strerror}; is something else listening there? "
                "choose another with --port)") from None
        raise
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class Server(uvicorn.Server):
    """uvicorn's server, stopping on SIGTERM/SIGINT through the event loop. uvicorn's own handlers raise
    the signal again once it has drained, which would end the process by that signal instead of with 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.handle_exit, sig, None)
        try:
            yield
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)


def run(config: Config, *, host: str | None = None, port: int | None = None) -> int:
    log = config.section("log")
    structured_logging.configure(str(log.get("level", "INFO")), str(log.get("format", "json")), service=SERVICE)
    structured_logging.register_config_secrets(config.raw, os.environ)
    section = config.section("http")
    with configuration_errors(SERVICE):
        settings = HttpSettings.from_section(section)
        loop_factory = event_loops.loop_factory(section.get("event_loop", "auto"), "http.event_loop")
        app = build_app(config)
        port = config.port(SERVICE) if port is None else port
    host = listen_host(host)
    sock = bind(host, port)
    telemetry.configure_tracing(SERVICE, config)
    start_metrics(SERVICE, section, host)
    server = Server(uvicorn.Config(
        # httptools (C) parses requests; uvicorn's pure-Python h11 costs several times more CPU per request
        app, log_config=None, access_log=False, lifespan="on", loop="none", http="httptools", proxy_headers=False,
        timeout_graceful_shutdown=settings.shutdown_grace_s, server_header=False,
    ))

    async def serve() -> None:
        logger.info("%s serving on %s:%d (%s event loop)", SERVICE, host, sock.getsockname()[1],
                    event_loops.loop_name(asyncio.get_running_loop()))
        await server.serve(sockets=[sock])

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(serve())
    return 0
