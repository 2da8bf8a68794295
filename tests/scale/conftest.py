"""One loopback deployment per module: canvas_store on PostgreSQL, two llm_gateway replicas in front
of the scripted OpenAI-compatible server, two orchestrator replicas sharing Redis admission slots.

Tenants are unique per test run (uuid), so the Redis keys of parallel runs never collide.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

import pytest

from tests.support.cluster import REDIS_URL, Process, ProcessCluster, postgres_database
from tests.support.openai_server import ScriptedOpenAIServer

os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")

MAX_RUNS_PER_TENANT = 3
RUN = uuid.uuid4().hex[:8]
TENANT_A, TENANT_B, TENANT_C = f"acme-{RUN}", f"globex-{RUN}", f"initech-{RUN}"
SECRET_KEY = f"sk-scaletest-{uuid.uuid4().hex}"
TOKENS = [
    {"token": "t-alice", "tenant": TENANT_A, "user": "alice"},
    {"token": "t-bob", "tenant": TENANT_B, "user": "bob"},
    {"token": "t-carol", "tenant": TENANT_C, "user": "carol"},
    {"token": "t-svc", "tenant": "ops", "user": "orchestrator", "role": "service"},
]
ALICE = [("authorization", "Bearer t-alice")]
BOB = [("authorization", "Bearer t-bob")]
CAROL = [("authorization", "Bearer t-carol")]


@dataclass
class Stack:
    cluster: ProcessCluster
    provider: ScriptedOpenAIServer
    store: Process
    gateways: list[Process]
    a: Process
    b: Process

    async def orchestrator(self, name: str) -> Process:
        """Another orchestrator replica on the same store, gateways and Redis."""
        return await self.cluster.spawn(name, "orchestrator", orchestrator_section(name), addresses=self.addresses())

    def addresses(self) -> dict[str, str]:
        return {"canvas_store": self.store.address,
                "llm_gateway": "ipv4:" + ",".join(g.address for g in self.gateways)}


def orchestrator_section(name: str) -> dict:
    return {"holder": name, "service_token": "t-svc", "lease_ttl_ms": 1500, "takeover_interval_s": 0.2,
            "flush_interval_ms": 5, "redis_url": REDIS_URL, "max_runs_per_tenant": MAX_RUNS_PER_TENANT,
            "admission_slot_ttl_ms": 3000}


@pytest.fixture(scope="module")
async def stack(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("scale")
    cluster = ProcessCluster(workdir, TOKENS)
    with postgres_database() as url, ScriptedOpenAIServer() as provider:
        try:
            store = await cluster.spawn("store", "canvas_store", {
                "database_url": url, "seed_templates": False, "watch_poll_interval_ms": 50})
            model = {"scripted": {"model": "openai/test-model", "api_base": provider.base_url, "api_key": SECRET_KEY}}
            gateways = [await cluster.spawn(f"gateway-{i}", "llm_gateway", {"models": model, "embedded": {"enabled": False}})
                        for i in (1, 2)]
            deployment = Stack(cluster, provider, store, gateways, None, None)  # type: ignore[arg-type]
            deployment.a = await deployment.orchestrator("replica-a")
            deployment.b = await deployment.orchestrator("replica-b")
            yield deployment
        finally:
            cluster.close()
