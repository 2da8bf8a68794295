"""Wires the sandbox: settings -> backend -> core facade -> gRPC servicer -> ServiceDefinition."""

from __future__ import annotations

import logging

from agentcanvas.v1 import sandbox_pb2_grpc

from services.common.bootstrap import ServiceDefinition
from services.common.settings import Config
from services.sandbox.core.ports import SandboxBackend
from services.sandbox.core.service import Sandbox
from services.sandbox.core.settings import SandboxSettings
from services.sandbox.core.supervisor import drain_teardowns
from services.sandbox.server import SandboxServicer

logger = logging.getLogger(__name__)


def build_backend(settings: SandboxSettings) -> SandboxBackend:
    if settings.backend == "docker":
        from services.sandbox.adapters.docker_backend import DockerBackend

        return DockerBackend(settings)
    from services.sandbox.adapters.local import LocalBackend

    return LocalBackend(settings)


def build_sandbox(config: Config) -> Sandbox:
    settings = SandboxSettings.from_section(config.section("sandbox"))
    return Sandbox(build_backend(settings), settings)


def build_definition(config: Config, sandbox: Sandbox | None = None) -> ServiceDefinition:
    sandbox = sandbox or build_sandbox(config)

    async def start() -> None:
        await sandbox.backend.start()

    async def stop(grace: float) -> None:
        await drain_teardowns()
        await sandbox.backend.stop()

    return ServiceDefinition(
        name="sandbox",
        proto_services=["agentcanvas.v1.Sandbox"],
        register=lambda server: sandbox_pb2_grpc.add_SandboxServicer_to_server(SandboxServicer(sandbox), server),
        start=start,
        stop=stop,
        uvloop_allowed=False,  # jobs started on uvloop would inherit our open descriptors (event_loops.py)
    )
