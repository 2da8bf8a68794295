"""Wires the orchestrator: settings → adapters → core → gRPC service definition."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
from agentcanvas.v1 import orchestrator_pb2_grpc

from services.common.auth import client_token
from services.common.bootstrap import ServiceDefinition
from services.common.settings import Config
from services.orchestrator.adapters.gateway_grpc import GatewayLlmClient
from services.orchestrator.adapters.memory import InMemoryRunStore
from services.orchestrator.adapters.admission_redis import RedisSlots
from services.orchestrator.adapters.store_grpc import GrpcRunStore
from services.orchestrator.core.admission import Admission, InMemorySlots
from services.orchestrator.core.context import Services
from services.orchestrator.core.loop import LoopSettings
from services.orchestrator.core.orchestrator import Orchestrator
from services.orchestrator.core.ports import acting_as
from services.orchestrator.core.runner import Limits
from services.orchestrator.server import OrchestratorServicer
from services.orchestrator.settings import OrchestratorSettings
from services.orchestrator.tools import ToolRuntime, ToolsSettings

SERVICE_NAME = "agentcanvas.v1.Orchestrator"


def build_orchestrator(config: Config, *, store=None, llm=None) -> tuple[Orchestrator, list]:
    """The core plus the resources to close on shutdown."""
    settings = OrchestratorSettings.from_section(config.section("orchestrator"))
    closables: list = []

    def token() -> str | None:
        # Resolved per call: in embedded mode the token file appears when the first server starts.
        return settings.service_token or client_token(config)

    if store is None:
        if settings.store == "memory":
            store = InMemoryRunStore()
        else:
            store = GrpcRunStore(config.address("canvas_store"), own_token=token)
            closables.append(store)
    if llm is None:
        llm = GatewayLlmClient(config.address("llm_gateway"), own_token=token)
        closables.append(llm)
    http = httpx.AsyncClient(follow_redirects=False)
    pool = ThreadPoolExecutor(max_workers=settings.thread_pool_size, thread_name_prefix="orchestrator")
    # A takeover runs outside any RPC: its CodeExec calls act for the run's creator with the service token.
    tools = ToolRuntime(ToolsSettings.from_config(config), service_identity=lambda: (token(), acting_as.get()))
    services = Services(llm=llm, http=http, pool=pool, tools=tools, conversation_max_turns=settings.conversation_max_turns)
    loop_settings = LoopSettings(
        holder=settings.replica, lease_ttl_ms=settings.lease_ttl_ms, flush_interval_s=settings.flush_interval_ms / 1000,
        history_window=settings.history_window,
        limits=Limits(max_concurrency=settings.max_concurrency, max_backoff_s=settings.max_backoff_s,
                      node_timeout_s=settings.node_timeout_s),
    )
    if settings.redis_url:
        slots = RedisSlots(settings.redis_url)
    else:
        slots = InMemorySlots()
    admission = Admission(slots, settings.max_runs_per_tenant, settings.admission_slot_ttl_ms)
    orchestrator = Orchestrator(store, services, loop_settings, takeover_interval_s=settings.takeover_interval_s,
                                admission=admission)
    closables.append(http)
    closables.append(pool)
    closables.append(tools)
    return orchestrator, closables


def build_definition(config: Config, *, store=None, llm=None) -> ServiceDefinition:
    orchestrator, closables = build_orchestrator(config, store=store, llm=llm)
    settings = OrchestratorSettings.from_section(config.section("orchestrator"))

    def register(server) -> None:
        servicer = OrchestratorServicer(orchestrator, heartbeat_interval_s=settings.heartbeat_interval_s)
        orchestrator_pb2_grpc.add_OrchestratorServicer_to_server(servicer, server)

    async def start() -> None:
        await orchestrator.start()

    async def stop(grace: float) -> None:
        await orchestrator.stop(grace)
        for resource in closables:
            if isinstance(resource, ThreadPoolExecutor):
                resource.shutdown(wait=False, cancel_futures=True)
            elif isinstance(resource, (httpx.AsyncClient, ToolRuntime)):
                await resource.aclose()
            else:
                await resource.close()

    definition = ServiceDefinition(name="orchestrator", proto_services=[SERVICE_NAME], register=register, start=start, stop=stop)
    definition.orchestrator = orchestrator  # type: ignore[attr-defined]  # tests reach the core through it
    return definition
