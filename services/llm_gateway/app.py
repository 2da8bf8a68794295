"""Wiring: settings -> registry, litellm provider, embedded model -> core -> gRPC servicer.

start() imports litellm in a worker thread (4-5 s on a small host) while the server already accepts
connections and reports NOT_SERVING (serve_before_ready), and launches the embedded model server in
the background when the registry uses it; SERVING does not wait for the embedded model.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from agentcanvas.v1 import llm_gateway_pb2_grpc

from services.common.bootstrap import ServiceDefinition
from services.common.settings import Config
from services.llm_gateway.adapters.embedded import EmbeddedModelServer
from services.llm_gateway.adapters.litellm_direct import LitellmDirectProvider
from services.llm_gateway.adapters.litellm_provider import LitellmProvider, load_litellm
from services.llm_gateway.core import context
from services.llm_gateway.core.gateway import LlmGateway
from services.llm_gateway.core.registry import ModelRegistry
from services.llm_gateway.core.settings import GatewaySettings
from services.llm_gateway.server import LlmGatewayServicer

logger = logging.getLogger(__name__)

PROTO_SERVICE = "agentcanvas.v1.LlmGateway"


@dataclass
class GatewayApp:
    settings: GatewaySettings
    registry: ModelRegistry
    provider: LitellmProvider | LitellmDirectProvider
    embedded: EmbeddedModelServer | None
    core: LlmGateway


def build_app(config: Config) -> GatewayApp:
    settings = GatewaySettings.from_section(config.section("gateway"))
    registry = ModelRegistry(settings.models, settings.factories)
    provider = build_provider(settings)
    embedded = EmbeddedModelServer(settings.embedded) if settings.embedded.enabled else None
    core = LlmGateway(registry, provider, settings, embedded)
    return GatewayApp(settings, registry, provider, embedded, core)


def build_provider(settings: GatewaySettings) -> LitellmProvider | LitellmDirectProvider:
    """gateway.litellm_direct (default on): the fast path for OpenAI-compatible streams, acompletion for the rest."""
    return LitellmDirectProvider(LitellmProvider()) if settings.litellm_direct else LitellmProvider()


def build_definition(config: Config, app: GatewayApp | None = None) -> ServiceDefinition:
    app = app or build_app(config)
    servicer = LlmGatewayServicer(app.core, app.registry)

    async def start() -> None:
        if app.embedded is not None and app.registry.uses_embedded and app.settings.embedded.eager:
            app.embedded.start_in_background()
        await asyncio.to_thread(load_litellm)
        await asyncio.to_thread(context.tokenizer, "cl100k_base")

    async def stop(grace: float) -> None:
        if app.embedded is not None:
            await app.embedded.stop()
        await app.provider.aclose()

    return ServiceDefinition(
        name="llm_gateway",
        proto_services=[PROTO_SERVICE],
        register=lambda server: llm_gateway_pb2_grpc.add_LlmGatewayServicer_to_server(servicer, server),
        start=start,
        stop=stop,
        serve_before_ready=True,
    )
