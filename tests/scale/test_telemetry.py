"""Spans and metrics are really emitted (in-process, through the in-memory span exporter of
tests/conftest.py): RPC → run → node → gateway RPC → llm.call in the run's one trace; a takeover's run
span joins the run's trace; one sandbox.job span per job with its exit reason; the metrics they feed."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import grpc
import pytest
from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.common.structs import to_struct
from services.common.telemetry import metrics_text
from services.orchestrator.core import telemetry as orchestrator_telemetry
from services.orchestrator.core.ports import RunRecord
from tests.orchestrator.support.harness import dsl
from tests.scale.gate import Gate
from tests.support import openai_server
from tests.support.llm_stack import llm_stack

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
AUTH = [("authorization", "Bearer t1")]
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
async def stack(tmp_path):
    async with llm_stack(tmp_path, llm_id="scripted", orchestrator={"max_runs_per_tenant": 1}) as pair:
        yield pair


def llm_canvas() -> dict:
    return dsl({
        "begin": {"type": "Begin", "down": ["llm"]},
        "llm": {"type": "LLM", "params": {"llm_id": "scripted", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}},
    })


async def test_rpc_run_node_and_llm_spans_form_the_runs_trace(stack, finished_spans):
    stub, provider = stack
    provider.queue(openai_server.Reply(content="Paris", usage={"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}))
    metadata = [*AUTH, ("traceparent", f"00-{TRACE_ID}-b7ad6b7169203331-01")]
    events = [e async for e in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(llm_canvas()), query="capital?"),
                                              metadata=metadata, timeout=60)]
    assert events[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED
    assert {e.trace_id for e in events} == {TRACE_ID}
    spans = list(finished_spans.get_finished_spans())
    by_name: dict[str, list] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    assert all(format(s.context.trace_id, "032x") == TRACE_ID for s in spans)
    run = by_name["run"][0]
    assert run.attributes["run.id"] == events[0].run_id and run.attributes["run.status"] == "SUCCEEDED"
    assert run.attributes["run.tenant"] == "acme"
    nodes = {s.attributes["node.id"]: s for s in by_name["node"]}
    assert set(nodes) == {"begin", "llm", "msg"}
    assert all(n.parent.span_id == run.context.span_id for n in nodes.values())
    assert nodes["llm"].attributes["node.type"] == "LLM" and nodes["llm"].attributes["node.attempt"] == 1
    call = by_name["llm.call"][0]
    assert call.attributes["gen_ai.request.model"] == "scripted"
    assert call.attributes["gen_ai.system"] and call.attributes["llm.provider_model"] == "openai/test-model"
    assert call.attributes["gen_ai.usage.prompt_tokens"] == 12 and call.attributes["gen_ai.usage.completion_tokens"] == 3
    assert call.attributes["llm.outcome"] == "ok"
    gateway_rpc = next(s for s in spans if s.name == "/agentcanvas.v1.LlmGateway/ChatStreamBatched")
    assert call.parent.span_id == gateway_rpc.context.span_id
    assert gateway_rpc.parent.span_id == nodes["llm"].context.span_id  # the node's call crossed the process boundary
    text = metrics_text()
    assert 'agentcanvas_gateway_calls_total{model="scripted",outcome="ok"}' in text
    assert 'agentcanvas_orchestrator_node_seconds_count{component_type="LLM",outcome="ok"}' in text
    assert 'agentcanvas_orchestrator_tokens_total{kind="completion"}' in text


async def test_in_memory_admission_without_redis(stack):
    """No redis_url: the cap is per replica (here 1)."""
    stub, _provider = stack
    with Gate() as gate:
        held = dsl({"begin": {"type": "Begin", "down": ["hold"]},
                    "hold": {"type": "Invoke", "params": {"url": gate.url, "timeout": 60}}})
        first = stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(held), query="a"), metadata=AUTH, timeout=60)
        async for event in first:
            if event.WhichOneof("event") == "node_started" and event.node_started.component_id == "hold":
                break
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            [e async for e in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(llm_canvas()), query="b"),
                                             metadata=AUTH, timeout=60)]
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        gate.release.set()
        rest = [e async for e in first]
    assert rest[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED
    again = [e async for e in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(llm_canvas()), query="c"),
                                             metadata=AUTH, timeout=60)]
    assert again[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED


def test_a_takeovers_run_span_joins_the_runs_trace(finished_spans):
    record = RunRecord(id="r1", spec={"trace_id": TRACE_ID}, tenant_id="acme")
    with orchestrator_telemetry.run_span(record):
        with orchestrator_telemetry.node_span("n1", "Message", 2, ""):
            pass
    spans = {s.name: s for s in finished_spans.get_finished_spans()}
    assert format(spans["run"].context.trace_id, "032x") == TRACE_ID
    assert spans["node"].parent.span_id == spans["run"].context.span_id
    assert spans["node"].attributes["node.attempt"] == 2


async def test_sandbox_job_span_and_metrics(tmp_path, finished_spans):
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is required by the sandbox's local backend")
    from tests.sandbox.conftest import sandbox_section
    from tests.sandbox.harness import base_config, start_sandbox, stop_sandbox

    work_root = Path(tempfile.mkdtemp(prefix="agentcanvas-scale-sandbox-"))
    try:
        config = base_config(tmp_path, sandbox_section("local", work_root, None, pool={"python": 1, "nodejs": 0}))
        sandbox = await start_sandbox("local", config)
        try:
            ok = await sandbox.run("print('hi')")
            failed = await sandbox.run("raise SystemExit(3)")
        finally:
            await stop_sandbox(sandbox)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    assert ok.reason == "EXIT_REASON_OK" and failed.reason == "EXIT_REASON_ERROR"
    jobs = [s for s in finished_spans.get_finished_spans() if s.name == "sandbox.job"]
    assert [(s.attributes["sandbox.language"], s.attributes["sandbox.backend"], s.attributes["sandbox.exit_reason"])
            for s in jobs] == [("python", "local", "ok"), ("python", "local", "error")]
    assert jobs[1].attributes["sandbox.exit_code"] == 3
    assert all(s.parent is not None for s in jobs)  # beneath the Execute RPC's span
    text = metrics_text()
    assert 'agentcanvas_sandbox_jobs_total{language="python",reason="ok"}' in text
    assert 'agentcanvas_sandbox_jobs_total{language="python",reason="error"}' in text
    assert 'agentcanvas_sandbox_pool_ready{pool="' in text
    assert 'agentcanvas_sandbox_job_seconds_count{language="python"}' in text


async def test_a_paused_run_frees_its_slot(stack):
    stub, _provider = stack
    form = dsl({
        "begin": {"type": "Begin", "down": ["ask"]},
        "ask": {"type": "UserFillUp", "down": ["msg"], "params": {
            "tips": "Where to?", "inputs": {"city": {"name": "City", "type": "line", "optional": False}}}},
        "msg": {"type": "Message", "params": {"content": ["Going to {ask@city}"]}},
    })
    paused = [e async for e in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(form), query="a"),
                                              metadata=AUTH, timeout=60)]
    assert paused[-1].workflow_finished.status == common_pb2.RUN_STATUS_PAUSED
    after = [e async for e in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(llm_canvas()), query="b"),
                                             metadata=AUTH, timeout=60)]
    assert after[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED  # the cap is 1
