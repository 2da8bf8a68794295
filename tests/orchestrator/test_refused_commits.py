"""Requests that the orchestrator cannot serve as asked, over gRPC, on the real canvas_store (SQLite).

* A commit the store refuses as invalid (an event over its 4 MiB payload limit: a large query echoed
  by a Message, large Begin inputs) used to leave the run RUNNING with its lease held: every replica
  that took it over replayed it up to the same commit and was refused again, for ever, and the
  client's stream never ended. The run now ends FAILED (`COMMIT_REFUSED`) with one WorkflowFinished.
* StreamRunEvents from a seq past the run's last event used to end without any event (or wait for
  events that never come): it is INVALID_ARGUMENT naming `after_seq`.
* A malformed run or session id names the request's field (`run_id`, `session_id`), not the store's.

Everything waits on the event streams; the timeouts are safety nets against a hang, not assertions.
"""

from __future__ import annotations

import asyncio
import contextlib

import grpc
import pytest
from agentcanvas.v1 import canvas_store_pb2 as spb
from agentcanvas.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc

from services.common import status
from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.settings import Config
from services.common.structs import from_struct, to_struct
from services.orchestrator.adapters.store_grpc import GrpcRunStore
from services.orchestrator.app import build_definition
from tests.orchestrator.support.harness import dsl
from tests.orchestrator.support.scripted_llm import ScriptedLlm
from tests.orchestrator.support.store_server import running_store

TOKENS = [{"token": "t-alice", "tenant": "acme", "user": "alice"},
          {"token": "t-svc", "tenant": "ops", "user": "orchestrator", "role": "service"}]
AUTH = (("authorization", "Bearer t-alice"),)
OVER_PAYLOAD_LIMIT = 2_500_000  # echoed by a Message, the text is in its NodeFinished twice: over 4 MiB


@pytest.fixture(scope="module")
async def sql_store(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("refused-sqlite"))
    # A turn as large as the refused question (2.5 MB) fits this store (store.session_turn_max_bytes is 1 MiB by
    # default), so that the session keeps the question of the run whose answer could not be stored.
    async with running_store(tmp, f"sqlite:///{tmp}/store.db", TOKENS, session_turn_max_bytes=4 << 20) as found:
        yield found


@contextlib.asynccontextmanager
async def orchestrator_over(found, tmp_path):
    """(orchestrator stub, store stub, gate of the "slow" model): one replica over the real store `found`, with
    a short lease so that a run it gives up is taken over (by itself) at once."""
    address, store_stub = found
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({
        "auth": {"embedded": False, "tokens": TOKENS},
        "orchestrator": {"flush_interval_ms": 5, "heartbeat_interval_s": 0.5, "lease_ttl_ms": 600,
                         "takeover_interval_s": 0.1, "service_token": "t-svc"}})
    gate = asyncio.Event()
    store = GrpcRunStore(address, own_token="t-svc")
    definition = build_definition(config, store=store, llm=ScriptedLlm({"slow": [[("gate", gate), ("text", "done")]]}))
    running = await start_server(definition, config, authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        yield orchestrator_pb2_grpc.OrchestratorStub(channel), store_stub, gate
    finally:
        gate.set()
        await channel.close()
        await running.stop(0)
        await store.close()


@pytest.fixture
async def server(sql_store, tmp_path):
    async with orchestrator_over(sql_store, tmp_path) as found:
        yield found


def echo_canvas():
    return dsl({"begin": {"type": "Begin", "down": ["msg"], "params": {
                    "inputs": {"blob": {"name": "blob", "type": "paragraph", "optional": True}}}},
                "msg": {"type": "Message", "params": {"content": ["{sys.query}"]}}})


def slow_canvas():
    return dsl({"begin": {"type": "Begin", "down": ["llm"]},
                "llm": {"type": "LLM", "params": {"llm_id": "slow"}, "down": ["msg"]},
                "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}}})


async def events_of(call) -> list[orchestrator_pb2.RunEvent]:
    async with asyncio.timeout(60):  # a safety net: the refused run used to stream for ever
        return [e async for e in call if not e.HasField("heartbeat")]


def kinds(events) -> list[str]:
    return [e.WhichOneof("event") for e in events]


def refused(events) -> None:
    """One WorkflowFinished, last, FAILED with COMMIT_REFUSED; seqs 1, 2, 3, ..."""
    assert kinds(events)[0] == "workflow_started" and kinds(events).count("workflow_finished") == 1
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    final = events[-1].workflow_finished
    assert final.status == common_pb2.RUN_STATUS_FAILED
    assert final.error.reason == "COMMIT_REFUSED" and "payload" in final.error.message


async def test_a_run_whose_event_the_store_refuses_ends_failed_once(server):
    stub, _, _ = server
    request = orchestrator_pb2.RunCanvasRequest(dsl=to_struct(echo_canvas()), query="x" * OVER_PAYLOAD_LIMIT)
    events = await events_of(stub.RunCanvas(request, metadata=AUTH))
    refused(events)
    run_id = events[0].run_id
    run = await stub.GetRun(orchestrator_pb2.GetRunRequest(run_id=run_id), metadata=AUTH)
    assert run.status == common_pb2.RUN_STATUS_FAILED and run.error.reason == "COMMIT_REFUSED"
    assert run.last_seq == events[-1].seq
    # The persisted log is what the client was sent.
    replay = await events_of(stub.StreamRunEvents(orchestrator_pb2.StreamRunEventsRequest(run_id=run_id), metadata=AUTH))
    assert replay == events


async def test_begin_inputs_too_large_for_workflow_started_still_start_and_finish_the_log(server):
    stub, _, _ = server
    request = orchestrator_pb2.RunCanvasRequest(dsl=to_struct(echo_canvas()), query="q",
                                                inputs=to_struct({"blob": "y" * (4 << 20)}))
    events = await events_of(stub.RunCanvas(request, metadata=AUTH))
    assert kinds(events) == ["workflow_started", "workflow_finished"]
    refused(events)


async def test_a_refused_session_run_records_its_turn_once_and_the_session_goes_on(server):
    stub, store_stub, _ = server
    canvas = await store_stub.CreateCanvas(spb.CreateCanvasRequest(canvas=spb.Canvas(title="echo", dsl=to_struct(echo_canvas()))),
                                           metadata=AUTH)
    session_id = (await store_stub.CreateSession(spb.CreateSessionRequest(canvas_id=canvas.id), metadata=AUTH)).id
    big = "z" * OVER_PAYLOAD_LIMIT
    first = await events_of(stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(session_id=session_id, query=big), metadata=AUTH))
    refused(first)
    second = await events_of(stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(session_id=session_id, query="small"),
                                            metadata=AUTH))
    assert second[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED
    session = await store_stub.GetSession(spb.GetSessionRequest(id=session_id), metadata=AUTH)
    history = [from_struct(h) for h in session.history]
    assert [(h["role"], len(h["content"])) for h in history] == [("user", len(big)), ("user", 5), ("assistant", 5)]
    assert from_struct(session.state)["recent_runs"] == [first[0].run_id, second[0].run_id]


async def test_stream_run_events_past_the_last_event_is_invalid_argument(server):
    stub, _, gate = server
    call = stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(slow_canvas()), query="q"), metadata=AUTH)
    seen = []
    async for event in call:  # until the model call waits on the gate
        seen.append(event)
        if event.HasField("node_started") and event.node_started.component_id == "llm":
            break
    run_id = seen[0].run_id
    for after_seq in (seen[-1].seq + 50, 2 ** 62):  # a running run: this used to wait for its end, then end empty
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await events_of(stub.StreamRunEvents(orchestrator_pb2.StreamRunEventsRequest(run_id=run_id, after_seq=after_seq),
                                                 metadata=AUTH))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert status.from_rpc_error(caught.value).violations[0].field == "after_seq"
    gate.set()
    rest = await events_of(call)
    assert rest[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED
    last = rest[-1].seq
    # A finished run: from its last seq there is nothing more (not an error); past it is refused.
    assert await events_of(stub.StreamRunEvents(orchestrator_pb2.StreamRunEventsRequest(run_id=run_id, after_seq=last),
                                                metadata=AUTH)) == []
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await events_of(stub.StreamRunEventsBatched(orchestrator_pb2.StreamRunEventsRequest(run_id=run_id, after_seq=last + 1),
                                                    metadata=AUTH))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_malformed_ids_name_the_request_field(server):
    stub, _, _ = server
    calls = {
        "run_id": [lambda: stub.GetRun(orchestrator_pb2.GetRunRequest(run_id="nope"), metadata=AUTH),
                   lambda: stub.CancelRun(orchestrator_pb2.CancelRunRequest(run_id="nope"), metadata=AUTH),
                   lambda: events_of(stub.StreamRunEvents(orchestrator_pb2.StreamRunEventsRequest(run_id="nope"), metadata=AUTH))],
        "session_id": [lambda: events_of(stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(session_id="nope", query="q"),
                                                        metadata=AUTH))],
    }
    for field, makers in calls.items():
        for make in makers:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await make()
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert [v.field for v in status.from_rpc_error(caught.value).violations] == [field]


async def test_a_turn_the_store_refuses_is_recorded_without_its_answer_and_the_run_ends(tmp_path):
    """The run's own events fit, but its turn (question and answer) is over the store's turn limit: the turn is
    recorded without the answer. It used to escape the run's end, leaving it leased and unfinished, for ever."""
    async with running_store(str(tmp_path), f"sqlite:///{tmp_path}/store.db", TOKENS, max_dsl_bytes=1 << 20) as found, \
            orchestrator_over(found, tmp_path / "orchestrator") as (stub, store_stub, _):
        canvas = await store_stub.CreateCanvas(spb.CreateCanvasRequest(canvas=spb.Canvas(
            title="echo", dsl=to_struct(echo_canvas()))), metadata=AUTH)
        session_id = (await store_stub.CreateSession(spb.CreateSessionRequest(canvas_id=canvas.id), metadata=AUTH)).id
        # The turn carries each message twice (appended, and in the state's history): with its echo 1.2 MB, over
        # the 1 MiB turn limit, while every event is far under its 4 MiB; without the answer 0.6 MB.
        question = "q" * 300_000
        events = await events_of(stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(session_id=session_id, query=question),
                                                metadata=AUTH))
        assert events[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED
        assert from_struct(events[-1].workflow_finished.outputs)["content"] == question  # the run keeps its answer
        session = await store_stub.GetSession(spb.GetSessionRequest(id=session_id), metadata=AUTH)
        assert [(m["role"], len(m["content"])) for m in map(from_struct, session.history)] == [("user", len(question))]
        assert session.conversation_turns == 1


def test_the_state_history_keeps_the_window_within_its_byte_bound():
    from services.orchestrator.core.sessions import HISTORY_MAX_BYTES, next_state

    big = HISTORY_MAX_BYTES // 3
    previous = {"history": [{"role": "user", "content": "a" * big}, {"role": "assistant", "content": "b" * big},
                            {"role": "user", "content": "small"}, {"role": "assistant", "content": "reply"}]}
    state, messages = next_state(previous, query="c" * big, answer="d" * big, paused_run_id="", pending=[], env={},
                                 window=50)
    assert [m["content"][0] for m in messages] == ["c", "d"]
    # The two big old messages went first; this turn's messages stay even when they alone are near the bound.
    assert [m["content"][:5] for m in state["history"]] == ["small", "reply", "c" * 5, "d" * 5]
    alone, _ = next_state({}, query="e" * (2 * HISTORY_MAX_BYTES), answer="", paused_run_id="", pending=[], env={},
                          window=50)
    assert len(alone["history"]) == 1
