"""The Orchestrator gRPC surface over a real server on port 0 (in-memory store, scripted model)."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from agentcanvas.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc

from services.common import status
from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from services.common.settings import Config
from services.common.structs import from_struct, to_struct
from services.orchestrator.adapters.memory import InMemoryRunStore
from services.orchestrator.app import build_definition
from tests.orchestrator.support.harness import dsl
from tests.orchestrator.support.scripted_llm import ScriptedLlm

AUTH = [("authorization", "Bearer t1")]


@pytest.fixture
async def server(tmp_path):
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({
        "auth": {"embedded": False, "tokens": [{"token": "t1", "tenant": "acme", "user": "alice"}]},
        "orchestrator": {"flush_interval_ms": 5, "heartbeat_interval_s": 0.05},
    })
    store = InMemoryRunStore()
    gate = asyncio.Event()
    llm = ScriptedLlm({"m": [[("think", "hmm"), ("text", "Paris")]], "slow": [[("gate", gate)]]})
    definition = build_definition(config, store=store, llm=llm)
    running = await start_server(definition, config, authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    yield orchestrator_pb2_grpc.OrchestratorStub(channel), store, gate
    gate.set()
    await channel.close()
    await running.stop(0)


def chat_dsl(model: str = "m"):
    return dsl({"begin": {"type": "Begin", "down": ["llm"]},
                "llm": {"type": "LLM", "params": {"llm_id": model}, "down": ["msg"]},
                "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}}})


async def test_run_canvas_streams_typed_events_with_increasing_seq(server):
    stub, _, _ = server
    call = stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(chat_dsl()), query="Capital of France?"), metadata=AUTH)
    events = [e async for e in call if not e.HasField("heartbeat")]
    names = [e.WhichOneof("event") for e in events]
    assert names[0] == "workflow_started" and names[-1] == "workflow_finished"
    assert ["think_start", "think_delta", "think_end", "message_delta", "message_end"] == [
        n for n in names if n in ("think_start", "think_delta", "think_end", "message_delta", "message_end")]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert len({e.run_id for e in events}) == 1 and all(e.created_at_ms > 0 for e in events)
    final = events[-1].workflow_finished
    assert final.status == common_pb2.RUN_STATUS_SUCCEEDED
    assert from_struct(final.outputs)["content"] == "Paris" and final.usage.total_tokens == 15
    run = await stub.GetRun(orchestrator_pb2.GetRunRequest(run_id=events[0].run_id), metadata=AUTH)
    assert run.status == common_pb2.RUN_STATUS_SUCCEEDED and run.last_seq == events[-1].seq
    replay = [e async for e in stub.StreamRunEvents(orchestrator_pb2.StreamRunEventsRequest(run_id=run.id, after_seq=2), metadata=AUTH)
              if not e.HasField("heartbeat")]
    assert [e.seq for e in replay] == [e.seq for e in events[2:]]
    assert replay[-1] == events[-1]


async def test_repeated_and_changed_inline_dsls_each_run_as_sent(server):
    """Inline DSLs are decoded and loaded once per distinct DSL: a repeat runs the same canvas, a
    changed one (same shape, other content) runs its own."""
    stub, _, _ = server

    def echo(text: str):
        return dsl({"begin": {"type": "Begin", "down": ["msg"]},
                    "msg": {"type": "Message", "params": {"content": [text + " {sys.query}"]}}})

    async def answer(document, query: str) -> str:
        events = [e async for e in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(document), query=query),
                                                  metadata=AUTH) if not e.HasField("heartbeat")]
        assert events[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED
        return from_struct(events[-1].workflow_finished.outputs)["content"]

    assert await answer(echo("first"), "a") == "first a"
    assert await answer(echo("first"), "b") == "first b"
    assert await answer(echo("second"), "c") == "second c"
    assert await answer(echo("first"), "d") == "first d"
    # A DSL above the cacheable size is decoded and loaded per run, with the same results.
    big = "x" * 300_000
    assert await answer(echo(big), "e") == f"{big} e"
    assert await answer(echo(big), "f") == f"{big} f"


async def test_bad_dsl_is_invalid_argument_with_one_violation_per_node(server):
    stub, _, _ = server
    bad = dsl({"begin": {"type": "Begin", "down": ["m", "ghost"]}, "m": {"type": "Message"}, "z": {"type": "Nope"}})
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(bad)), metadata=AUTH):
            pass
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    error = status.from_rpc_error(caught.value)
    assert isinstance(error, InvalidArgumentError)
    fields = {v.field for v in error.violations}
    assert {"components.begin.downstream[1]", "components.m.params.content", "components.z.obj.component_name"} <= fields


async def test_validate_reports_everything_and_returns_normalised_dsl(server):
    stub, _, _ = server
    bad = dsl({"begin": {"type": "Begin", "down": ["m"]}, "m": {"type": "Message", "params": {"content": ["{x:1@y}"]}},
               "r": {"type": "Browser"}})
    reply = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl=to_struct(bad)), metadata=AUTH)
    assert not reply.valid
    assert {(p.component_id, p.code) for p in reply.problems} == {("m", "DANGLING_REFERENCE"), ("r", "UNSUPPORTED"), ("r", "UNREACHABLE")}
    assert from_struct(reply.normalized_dsl)["globals"]["sys.query"] == ""
    ok = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl=to_struct(chat_dsl())), metadata=AUTH)
    assert ok.valid and not ok.problems


async def test_pipeline_is_failed_precondition_and_unknown_run_not_found(server):
    stub, _, _ = server
    pipeline = {"canvas_type": "Ingestion Pipeline", "dsl": dsl({"File": {"type": "File"}})}
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(pipeline)), metadata=AUTH):
            pass
    assert isinstance(status.from_rpc_error(caught.value), FailedPreconditionError)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetRun(orchestrator_pb2.GetRunRequest(run_id="0" * 32), metadata=AUTH)
    assert isinstance(status.from_rpc_error(caught.value), NotFoundError)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetRun(orchestrator_pb2.GetRunRequest(run_id="x"))
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_stored_canvas_by_id_and_cancel_over_grpc(server):
    stub, store, _ = server
    store.put_canvas("c1", chat_dsl("slow"))
    call = stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(canvas_id="c1", query="q"), metadata=AUTH)
    run_id = ""
    last_seq = 0
    names = []
    async for event in call:
        names.append(event.WhichOneof("event"))
        if event.HasField("heartbeat"):
            assert event.seq == last_seq  # a heartbeat repeats the last seq and is never persisted
        last_seq = event.seq
        run_id = event.run_id
        if event.HasField("heartbeat") and names.count("heartbeat") == 1:  # idle while the model hangs
            cancelled = await stub.CancelRun(orchestrator_pb2.CancelRunRequest(run_id=run_id), metadata=AUTH)
            assert cancelled.id == run_id
        if event.HasField("workflow_finished"):
            assert event.workflow_finished.status == common_pb2.RUN_STATUS_CANCELLED
    assert names[-1] == "workflow_finished" and "heartbeat" in names
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(canvas_id="nope"), metadata=AUTH):
            pass
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_runs_of_another_tenant_are_not_found(server, tmp_path):
    stub, store, _ = server
    events = [e async for e in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(chat_dsl()), query="q"), metadata=AUTH)]
    run_id = events[0].run_id
    from services.common.context import Identity, identity_var
    token = identity_var.set(Identity("evil", "mallory"))
    try:
        with pytest.raises(NotFoundError):
            await store.get_run(run_id)
    finally:
        identity_var.reset(token)
    assert (await store.get_run(run_id)).id == run_id


@pytest.fixture
async def batching_server(tmp_path):
    # Live events wait for the next commit (the flush timer never fires in a test), so every batch
    # is exactly one store commit.
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({
        "auth": {"embedded": False, "tokens": [{"token": "t1", "tenant": "acme", "user": "alice"}]},
        "orchestrator": {"flush_interval_ms": 600_000, "heartbeat_interval_s": 600},
    })
    llm = ScriptedLlm({"m": [[("think", "hmm"), ("text", "Paris")]]})
    definition = build_definition(config, store=InMemoryRunStore(), llm=llm)
    running = await start_server(definition, config, authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    yield orchestrator_pb2_grpc.OrchestratorStub(channel)
    await channel.close()
    await running.stop(0)


async def test_run_canvas_batched_groups_the_same_events_by_commit(batching_server):
    stub = batching_server
    request = orchestrator_pb2.RunCanvasRequest(dsl=to_struct(chat_dsl()), query="Capital of France?")
    batches = [b async for b in stub.RunCanvasBatched(request, metadata=AUTH)]
    assert all(b.events for b in batches)
    events = [e for b in batches for e in b.events]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    names = [[e.WhichOneof("event") for e in b.events] for b in batches]
    # the started marker rides with Begin's commit; the last step with the terminal commit
    assert names[0] == ["workflow_started", "node_started", "node_finished"]
    assert names[-1][-2:] == ["node_finished", "workflow_finished"]
    assert len(batches) < len(events)
    assert events[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED
    # the per-event stream of the same run is the same events, one per message
    replay = [e async for e in stub.StreamRunEvents(orchestrator_pb2.StreamRunEventsRequest(run_id=events[0].run_id),
                                                     metadata=AUTH)]
    assert replay == events
    tail = [b async for b in stub.StreamRunEventsBatched(
        orchestrator_pb2.StreamRunEventsRequest(run_id=events[0].run_id, after_seq=3), metadata=AUTH)]
    assert [e for b in tail for e in b.events] == events[3:]


async def test_stream_run_events_batched_checks_its_request(batching_server):
    stub = batching_server
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in stub.StreamRunEventsBatched(orchestrator_pb2.StreamRunEventsRequest(run_id="r", after_seq=-1),
                                                    metadata=AUTH):
            pass
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert status.from_rpc_error(caught.value).violations[0].field == "after_seq"
