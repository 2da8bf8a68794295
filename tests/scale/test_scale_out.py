"""Scale-out on loopback: processes sharing PostgreSQL (through canvas_store) and Redis.

Already covered by tests/orchestrator/test_replicas.py (same store, two orchestrator processes) and
not repeated here: kill -9 takeover with exactly-once replay, cancel sent to the other replica while
the client streams from the first, pause on one replica and resume on the other. New here: the two
gateway replicas behind client-side round robin, per-tenant admission across replicas (Redis),
streaming *and* cancelling from B a run executing on A, the run's trace id on every RunEvent across a
takeover (and the Redis slot adopted by the new owner), and the side-port metrics of real processes.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request

import grpc
import pytest
import redis
from agentcanvas.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc

from services.common import status
from services.common.errors import ResourceExhaustedError
from services.common.structs import from_struct, to_struct
from tests.orchestrator.support.harness import dsl
from tests.scale.conftest import ALICE, BOB, CAROL, MAX_RUNS_PER_TENANT, SECRET_KEY, TENANT_A, TENANT_C
from tests.scale.gate import Gate
from tests.support.cluster import REDIS_URL

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def llm_canvas() -> dict:
    return dsl({
        "begin": {"type": "Begin", "down": ["llm"]},
        "llm": {"type": "LLM", "params": {"llm_id": "scripted", "sys_prompt": "Repeat.",
                                          "prompts": [{"role": "user", "content": "{sys.query}"}]}, "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}},
    })


def held_canvas(url: str) -> dict:
    return dsl({
        "begin": {"type": "Begin", "down": ["hold"]},
        "hold": {"type": "Invoke", "params": {"url": url, "timeout": 120}, "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["held {hold@status_code}"]}},
    })


def _kind(event) -> str:
    return event.WhichOneof("event")


def scrape(url: str) -> dict[str, float]:
    """Prometheus exposition → {'name{labels}': value} (samples only)."""
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback side port
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            samples[key] = float(value)
    return samples


def total(samples: dict[str, float], name: str, **labels: str) -> float:
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(v for k, v in samples.items()
               if re.fullmatch(rf"{name}(\{{.*\}})?", k) and all(w in k for w in wanted))


async def run_to_end(address: str, canvas: dict, metadata, query: str = "q") -> list:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = orchestrator_pb2_grpc.OrchestratorStub(channel)
        return [e async for e in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(canvas), query=query),
                                                 metadata=metadata, timeout=120)]


async def start_held(address: str, canvas: dict, metadata) -> str:
    """Start a run and return its id once it is executing the held Invoke (the call is then closed)."""
    async with grpc.aio.insecure_channel(address) as channel:
        call = orchestrator_pb2_grpc.OrchestratorStub(channel).RunCanvas(
            orchestrator_pb2.RunCanvasRequest(dsl=to_struct(canvas), query="q"), metadata=metadata, timeout=120)
        async for event in call:
            if _kind(event) == "node_started" and event.node_started.component_id == "hold":
                call.cancel()
                return event.run_id
    raise AssertionError("the run ended before reaching the held node")


async def wait_finished(address: str, run_id: str, metadata) -> list:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = orchestrator_pb2_grpc.OrchestratorStub(channel)
        return [e async for e in stub.StreamRunEvents(orchestrator_pb2.StreamRunEventsRequest(run_id=run_id),
                                                      metadata=metadata, timeout=120)]


async def test_two_gateway_replicas_share_model_calls_by_round_robin(stack):
    before = [total(scrape(g.metrics_url), "agentcanvas_gateway_calls_total", model="scripted") for g in stack.gateways]
    runs = []
    for first in range(0, 8, 2):  # two at a time: below the tenant's cap
        runs += await asyncio.gather(run_to_end(stack.a.address, llm_canvas(), BOB, query=f"hello {first}"),
                                     run_to_end(stack.b.address, llm_canvas(), BOB, query=f"hello {first + 1}"))
    for i, events in enumerate(runs):
        final = events[-1].workflow_finished
        assert final.status == common_pb2.RUN_STATUS_SUCCEEDED
        assert from_struct(final.outputs)["content"] == f"hello {i}"
    after = [total(scrape(g.metrics_url), "agentcanvas_gateway_calls_total", model="scripted", outcome="ok")
             for g in stack.gateways]
    served = [a - b for a, b in zip(after, before)]
    assert sum(served) == 8
    assert all(n >= 1 for n in served), f"round robin should use both gateway replicas, got {served}"


async def test_per_tenant_cap_holds_across_replicas_and_frees_slots(stack):
    with Gate() as gate:
        canvas = held_canvas(gate.url)
        held = [await start_held(address, canvas, ALICE) for address in (stack.a.address, stack.b.address, stack.a.address)]
        assert len(held) == MAX_RUNS_PER_TENANT
        assert redis.Redis.from_url(REDIS_URL).zcard(f"agentcanvas:admission:{TENANT_A}") == MAX_RUNS_PER_TENANT
        for replica in (stack.a, stack.b):  # the next one is refused on either replica, before any run exists
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await run_to_end(replica.address, canvas, ALICE)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            error = status.from_rpc_error(refused.value)
            assert isinstance(error, ResourceExhaustedError) and error.retry_after_s == 1.0
        other = await run_to_end(stack.b.address, llm_canvas(), BOB, query="unaffected")  # another tenant
        assert other[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED
        gate.release.set()
        for run_id in held:
            events = await wait_finished(stack.b.address, run_id, ALICE)
            assert events[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED
    # Slots are released when a run ends: the tenant can start runs again.
    again = await run_to_end(stack.a.address, llm_canvas(), ALICE, query="again")
    assert again[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED
    assert redis.Redis.from_url(REDIS_URL).zcard(f"agentcanvas:admission:{TENANT_A}") == 0
    rejected = sum(total(scrape(r.metrics_url), "agentcanvas_orchestrator_admission_rejected_total") for r in (stack.a, stack.b))
    assert rejected >= 2


async def test_stream_and_cancel_from_the_other_replica(stack):
    with Gate() as gate:
        run_id = await start_held(stack.a.address, held_canvas(gate.url), CAROL)
        async with grpc.aio.insecure_channel(stack.b.address) as channel:
            stub = orchestrator_pb2_grpc.OrchestratorStub(channel)
            events = []
            async for event in stub.StreamRunEvents(orchestrator_pb2.StreamRunEventsRequest(run_id=run_id),
                                                    metadata=CAROL, timeout=60):
                events.append(event)
                if _kind(event) == "node_started" and event.node_started.component_id == "hold":
                    cancelled = await stub.CancelRun(orchestrator_pb2.CancelRunRequest(run_id=run_id), metadata=CAROL)
                    assert cancelled.id == run_id
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[-1].workflow_finished.status == common_pb2.RUN_STATUS_CANCELLED
    unfinished = [e.node_finished for e in events if _kind(e) == "node_finished" and e.node_finished.component_id == "hold"]
    assert unfinished and unfinished[0].error.reason == "CANCELLED"
    assert redis.Redis.from_url(REDIS_URL).zscore(f"agentcanvas:admission:{TENANT_C}", run_id) is None


async def test_takeover_keeps_the_trace_id_and_the_admission_slot(stack):
    c = await stack.orchestrator("replica-c")
    traced = [*CAROL, ("traceparent", f"00-{TRACE_ID}-00f067aa0ba902b7-01")]
    with Gate() as gate:
        run_id = await start_held(c.address, held_canvas(gate.url), traced)
        slots = redis.Redis.from_url(REDIS_URL)
        key = f"agentcanvas:admission:{TENANT_C}"
        assert slots.zscore(key, run_id) is not None
        stack.cluster.kill("replica-c")  # mid-run: its Invoke is held at the gate
        await asyncio.get_running_loop().run_in_executor(None, gate.wait_arrived, 2)  # a survivor re-ran it
        assert slots.zscore(key, run_id) is not None  # adopted (renewed) by the new owner
        gate.release.set()
        events = await wait_finished(stack.a.address, run_id, CAROL)
    assert events[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED
    assert {e.trace_id for e in events} == {TRACE_ID}
    starts = [e.node_started.attempt for e in events if _kind(e) == "node_started" and e.node_started.component_id == "hold"]
    assert starts == [1, 2]  # the dead replica's attempt, then the survivor's
    assert slots.zscore(key, run_id) is None
    taken_over = sum(total(scrape(r.metrics_url), "agentcanvas_orchestrator_runs_taken_over_total") for r in (stack.a, stack.b))
    assert taken_over >= 1


async def test_every_service_exposes_its_metrics_on_the_side_port(stack):
    await run_to_end(stack.a.address, llm_canvas(), BOB, query="metrics")
    orchestrator = scrape(stack.a.metrics_url)
    assert total(orchestrator, "agentcanvas_orchestrator_runs_started_total", kind="new") >= 1
    assert total(orchestrator, "agentcanvas_orchestrator_runs_finished_total", status="SUCCEEDED") >= 1
    assert total(orchestrator, "agentcanvas_orchestrator_node_seconds_count", component_type="LLM", outcome="ok") >= 1
    assert total(orchestrator, "agentcanvas_orchestrator_tokens_total", kind="prompt") > 0
    assert total(orchestrator, "agentcanvas_rpc_requests_total", method="/agentcanvas.v1.Orchestrator/RunCanvas", code="OK") >= 1
    gateways = [scrape(g.metrics_url) for g in stack.gateways]
    assert sum(total(g, "agentcanvas_gateway_tokens_total", model="scripted", kind="completion") for g in gateways) > 0
    assert sum(total(g, "agentcanvas_gateway_call_seconds_count", model="scripted") for g in gateways) >= 1
    store = scrape(stack.store.metrics_url)
    assert total(store, "agentcanvas_store_db_transaction_seconds_count", kind="write", outcome="ok") >= 1
    assert total(store, "agentcanvas_rpc_latency_seconds_count", method="/agentcanvas.v1.CanvasStore/CommitRunStep") >= 1


async def test_logs_are_json_with_trace_ids_and_never_a_secret(stack):
    traced = [*BOB, ("traceparent", f"00-{TRACE_ID[::-1]}-00f067aa0ba902b7-01")]
    canvas = llm_canvas()
    canvas["components"]["llm"]["obj"]["params"]["api_key"] = SECRET_KEY  # a key pasted into a DSL, too
    events = await run_to_end(stack.b.address, canvas, traced, query=f"my key is {SECRET_KEY}")
    assert events[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED
    logs = stack.cluster.logs()
    assert SECRET_KEY not in logs
    lines = [line for line in logs.splitlines() if TRACE_ID[::-1] in line]
    assert lines, "the run's trace id should appear in the logs"
    records = [json.loads(line) for line in lines]
    assert all(r["trace_id"] == TRACE_ID[::-1] for r in records)
    assert {r["logger"] for r in records} >= {"services.common.interceptors"}
    services = {line.split('"rpc_method": "')[1].split("/")[1] for line in lines if '"rpc_method"' in line}
    assert {"agentcanvas.v1.Orchestrator", "agentcanvas.v1.LlmGateway", "agentcanvas.v1.CanvasStore"} <= services
