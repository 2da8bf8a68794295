"""Two orchestrator processes on one canvas_store backed by PostgreSQL.

kill -9 one replica mid-run: the other takes the run over from the journal and finishes it, and a
client reattaching with after_seq sees every event exactly once. A cancel sent to the other replica
ends the run CANCELLED. Needs the canvas_store service (skipped only when its package is absent).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from agentcanvas.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc

from services.canvas_store import app as store_app
from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.settings import Config
from services.common.structs import to_struct
from tests.orchestrator.support.harness import dsl
from tests.orchestrator.support.http_server import EchoServer
from tests.support.cluster import ProcessCluster, postgres_database


TOKENS = [{"token": "t-alice", "tenant": "acme", "user": "alice"},
          {"token": "t-svc", "tenant": "ops", "user": "orchestrator", "role": "service"}]
AUTH = [("authorization", "Bearer t-alice")]


class Replicas:
    """Orchestrator processes sharing one canvas_store (on PostgreSQL), through the shared process harness."""

    def __init__(self, tmp_path: Path, store_port: int):
        self.processes = ProcessCluster(tmp_path, TOKENS, log_level="WARNING")
        self.store_address = f"127.0.0.1:{store_port}"

    async def spawn(self, name: str) -> str:
        process = await self.processes.spawn(
            name, "orchestrator",
            {"lease_ttl_ms": 1500, "takeover_interval_s": 0.2, "holder": name, "service_token": "t-svc",
             "flush_interval_ms": 5},
            addresses={"canvas_store": self.store_address, "llm_gateway": "127.0.0.1:9"}, timeout=60)
        return process.address

    def kill(self, name: str) -> None:
        self.processes.kill(name)

    def close(self) -> None:
        self.processes.close()


@pytest.fixture
async def cluster(tmp_path):
    with postgres_database("ac_orch_test") as postgres_url:
        config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({
            "auth": {"embedded": False, "tokens": TOKENS},
            "store": {"database_url": postgres_url, "watch_poll_interval_ms": 50, "seed_templates": False}})
        store = await start_server(store_app.build_definition(config), config,
                                   authenticator=TokenAuthenticator.from_config(config, env={}))
        nodes = Replicas(tmp_path, store.port)
        yield nodes
        nodes.close()
        await store.stop(0)


def slow_canvas(url: str):
    return dsl({
        "begin": {"type": "Begin", "down": ["prep"]},
        "prep": {"type": "StringTransform", "params": {"method": "merge", "script": "prepared {sys.query}"}, "down": ["call"]},
        "call": {"type": "Invoke", "params": {"url": url + "/slow", "timeout": 120}, "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{prep@result} / {call@status_code}"]}},
    })


def _kind(event) -> str:
    return event.WhichOneof("event")


async def test_kill_one_replica_mid_run_and_the_other_finishes_it(cluster):
    a = await cluster.spawn("replica-a")
    b = await cluster.spawn("replica-b")
    with EchoServer() as http:
        async with grpc.aio.insecure_channel(a) as channel_a, grpc.aio.insecure_channel(b) as channel_b:
            stub_a = orchestrator_pb2_grpc.OrchestratorStub(channel_a)
            stub_b = orchestrator_pb2_grpc.OrchestratorStub(channel_b)
            seen = []
            call = stub_a.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(slow_canvas(http.url)), query="q"), metadata=AUTH)
            async for event in call:
                seen.append(event)
                if _kind(event) == "node_started" and event.node_started.component_id == "call":
                    break
            call.cancel()
            await asyncio.get_running_loop().run_in_executor(None, http.slow_done.wait, 30)
            cluster.kill("replica-a")  # mid-run: the Invoke is in flight
            run_id = seen[0].run_id
            rest = [e async for e in stub_b.StreamRunEvents(
                orchestrator_pb2.StreamRunEventsRequest(run_id=run_id, after_seq=seen[-1].seq), metadata=AUTH, timeout=120)]
    events = seen + rest
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    kinds = [_kind(e) for e in events]
    assert kinds.count("workflow_started") == 1 and kinds.count("workflow_finished") == 1
    finished = [e.node_finished.component_id for e in events if _kind(e) == "node_finished"]
    assert finished.count("prep") == 1 and finished.count("begin") == 1
    final = events[-1].workflow_finished
    assert final.status == common_pb2.RUN_STATUS_SUCCEEDED
    message = next(e.message_end for e in events if _kind(e) == "message_end")
    assert message.content == "prepared q / 200"
    starts = [e.node_started.attempt for e in events if _kind(e) == "node_started" and e.node_started.component_id == "call"]
    assert starts == [1, 2]  # the survivor continues the attempt count (side effects are keyed by it)


async def test_cancel_from_the_other_replica(cluster):
    a = await cluster.spawn("replica-a")
    b = await cluster.spawn("replica-b")
    with EchoServer() as http:
        async with grpc.aio.insecure_channel(a) as channel_a, grpc.aio.insecure_channel(b) as channel_b:
            stub_a = orchestrator_pb2_grpc.OrchestratorStub(channel_a)
            stub_b = orchestrator_pb2_grpc.OrchestratorStub(channel_b)
            events = []
            async for event in stub_a.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(slow_canvas(http.url)), query="q"),
                                                metadata=AUTH, timeout=120):
                events.append(event)
                if _kind(event) == "node_started" and event.node_started.component_id == "call":
                    await stub_b.CancelRun(orchestrator_pb2.CancelRunRequest(run_id=event.run_id), metadata=AUTH)
    assert _kind(events[-1]) == "workflow_finished"
    assert events[-1].workflow_finished.status == common_pb2.RUN_STATUS_CANCELLED
    run = await _get_run(b, events[0].run_id)
    assert run.status == common_pb2.RUN_STATUS_CANCELLED


async def _get_run(address: str, run_id: str):
    async with grpc.aio.insecure_channel(address) as channel:
        return await orchestrator_pb2_grpc.OrchestratorStub(channel).GetRun(orchestrator_pb2.GetRunRequest(run_id=run_id), metadata=AUTH)


async def test_pause_on_one_replica_resume_on_the_other(cluster, tmp_path):
    from agentcanvas.v1 import canvas_store_pb2, canvas_store_pb2_grpc

    a = await cluster.spawn("replica-a")
    b = await cluster.spawn("replica-b")
    form = dsl({
        "begin": {"type": "Begin", "down": ["ask"]},
        "ask": {"type": "UserFillUp", "down": ["msg"], "params": {
            "tips": "Where to, {sys.query}?", "inputs": {"city": {"name": "City", "type": "line", "optional": False}}}},
        "msg": {"type": "Message", "params": {"content": ["Going to {ask@city}"]}},
    })
    async with grpc.aio.insecure_channel(cluster.store_address) as store_channel:
        store = canvas_store_pb2_grpc.CanvasStoreStub(store_channel)
        canvas = await store.CreateCanvas(canvas_store_pb2.CreateCanvasRequest(
            canvas=canvas_store_pb2.Canvas(title="trip", dsl=to_struct(form))), metadata=AUTH)
        session = await store.CreateSession(canvas_store_pb2.CreateSessionRequest(canvas_id=canvas.id), metadata=AUTH)
    async with grpc.aio.insecure_channel(a) as channel_a, grpc.aio.insecure_channel(b) as channel_b:
        stub_a = orchestrator_pb2_grpc.OrchestratorStub(channel_a)
        stub_b = orchestrator_pb2_grpc.OrchestratorStub(channel_b)
        first = [e async for e in stub_a.RunCanvas(orchestrator_pb2.RunCanvasRequest(
            canvas_id=canvas.id, session_id=session.id, query="Ann"), metadata=AUTH, timeout=60)]
        assert [_kind(e) for e in first][-2:] == ["user_inputs_required", "workflow_finished"]
        assert first[-2].user_inputs_required.tips == "Where to, Ann?"
        assert first[-1].workflow_finished.status == common_pb2.RUN_STATUS_PAUSED
        second = [e async for e in stub_b.RunCanvas(orchestrator_pb2.RunCanvasRequest(
            canvas_id=canvas.id, session_id=session.id, inputs=to_struct({"city": "Oslo"})), metadata=AUTH, timeout=60)]
    assert second[0].workflow_started.resumed
    assert [e.node_started.component_id for e in second if _kind(e) == "node_started"] == ["ask", "msg"]
    assert second[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED
    assert next(e.message_end.content for e in second if _kind(e) == "message_end") == "Going to Oslo"
