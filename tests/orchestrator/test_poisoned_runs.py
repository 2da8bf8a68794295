"""Run records and events that are wrong in the database, over gRPC on the real canvas_store (SQLite).

* A run record whose spec cannot be loaded (`{"dsl": {"components": "zz"}}`, no DSL at all), written before
  the store validated run records or straight into the database, used to crash every replica that took it
  over (KeyError in the loop), every few seconds, for ever. The first replica that takes it now ends it FAILED
  (RUN_SPEC_INVALID) in one commit, and nobody takes it again.
* CancelRun of a PENDING run that nobody holds answered PENDING and changed nothing: it now ends CANCELLED.
* An event payload that is corrupt in storage made StreamRunEvents fail INTERNAL (DecodeError): the stream now
  carries an EventUnreadable{DATA_LOSS} naming that seq in its place, and every other event still arrives.

The broken rows are written with SQL (the store's API refuses them). Timeouts are safety nets, not assertions.
"""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest
import sqlalchemy as sa
from agentcanvas.v1 import canvas_store_pb2 as spb
from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.common.structs import to_struct
from tests.orchestrator.support.harness import dsl
from tests.orchestrator.support.store_server import running_store
from tests.orchestrator.test_refused_commits import AUTH, TOKENS, events_of, kinds, orchestrator_over

SVC = (("authorization", "Bearer t-svc"),)


@pytest.fixture(scope="module")
async def sql_store(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("poisoned-sqlite"))
    url = f"sqlite:///{tmp}/store.db"
    async with running_store(tmp, url, TOKENS) as found:
        engine = sa.create_engine(url)
        try:
            yield found, engine
        finally:
            engine.dispose()


@pytest.fixture
async def server(sql_store, tmp_path):
    found, engine = sql_store
    async with orchestrator_over(found, tmp_path) as (stub, store_stub, _gate):
        yield stub, store_stub, engine


def canvas():
    return dsl({"begin": {"type": "Begin", "down": ["msg"]},
                "msg": {"type": "Message", "params": {"content": ["echo {sys.query}"]}}})


async def _record(store_stub, spec: dict | None = None):
    """A valid PENDING run of alice's, created without a lease (as a direct CreateRunRecord leaves it)."""
    run = spb.RunRecord()
    run.spec.CopyFrom(to_struct(spec or {"dsl": canvas(), "query": "q"}))
    return await store_stub.CreateRunRecord(spb.CreateRunRecordRequest(run=run), metadata=AUTH)


def _poison(engine, run_id: str, spec: dict) -> None:
    with engine.begin() as conn:  # as old as a lapsed lease, so the reaper takes it at once
        conn.execute(sa.text("UPDATE runs SET spec = :spec, create_time = create_time - 60000 WHERE id = :id"),
                     {"spec": json.dumps(spec), "id": run_id})


async def _ended(stub, run_id: str) -> orchestrator_pb2.Run:
    async with asyncio.timeout(30):
        while True:
            run = await stub.GetRun(orchestrator_pb2.GetRunRequest(run_id=run_id), metadata=AUTH)
            if run.status not in (common_pb2.RUN_STATUS_PENDING, common_pb2.RUN_STATUS_RUNNING):
                return run
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("spec", [{"dsl": {"components": "zz"}}, {}, {"query": "no dsl"},
                                  {"dsl": {"components": {"x": {"obj": {"component_name": "Nope"}}}}},
                                  {"dsl": {"components": {"begin": {"obj": {"component_name": "Begin"}}}},
                                   "globals": "not an object"}])
async def test_a_run_that_cannot_be_loaded_ends_failed_once(server, spec):
    stub, store_stub, engine = server
    record = await _record(store_stub)
    _poison(engine, record.id, spec)
    run = await _ended(stub, record.id)
    assert run.status == common_pb2.RUN_STATUS_FAILED and run.error.reason == "RUN_SPEC_INVALID", run
    events = await events_of(stub.StreamRunEvents(orchestrator_pb2.StreamRunEventsRequest(run_id=record.id),
                                                  metadata=AUTH))
    assert kinds(events) == ["workflow_started", "workflow_finished"]
    assert events[-1].workflow_finished.error.reason == "RUN_SPEC_INVALID"
    # Ended for good: no replica leases it again.
    lease = await store_stub.ListRunRecords(spb.ListRunRecordsRequest(
        statuses=[common_pb2.RUN_STATUS_PENDING, common_pb2.RUN_STATUS_RUNNING], lease_expired_only=True), metadata=SVC)
    assert record.id not in [r.id for r in lease.runs]
    again = await stub.GetRun(orchestrator_pb2.GetRunRequest(run_id=record.id), metadata=AUTH)
    assert again.last_seq == 2


async def test_cancel_ends_a_pending_run_that_nobody_holds(server):
    stub, store_stub, _ = server
    record = await _record(store_stub)  # young: the reaper leaves it to its creator for one lease TTL
    cancelled = await stub.CancelRun(orchestrator_pb2.CancelRunRequest(run_id=record.id), metadata=AUTH)
    assert cancelled.status == common_pb2.RUN_STATUS_CANCELLED, cancelled
    assert cancelled.error.reason == "CANCELLED"
    events = await events_of(stub.StreamRunEvents(orchestrator_pb2.StreamRunEventsRequest(run_id=record.id),
                                                  metadata=AUTH))
    assert kinds(events) == ["workflow_started", "workflow_finished"]
    assert events[-1].workflow_finished.status == common_pb2.RUN_STATUS_CANCELLED


async def test_a_corrupt_stored_event_is_data_loss_in_its_place_and_the_rest_arrives(server):
    stub, _, engine = server
    request = orchestrator_pb2.RunCanvasRequest(dsl=to_struct(canvas()), query="hello")
    events = await events_of(stub.RunCanvas(request, metadata=AUTH))
    assert events[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED
    run_id = events[0].run_id
    broken = next(e.seq for e in events if e.HasField("message_delta"))
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE run_events SET payload = :bad WHERE run_id = :id AND seq = :seq"),
                     {"bad": b"\xff\xfe not a RunEvent", "id": run_id, "seq": broken})
    for call in (stub.StreamRunEvents, ):
        replay = await events_of(call(orchestrator_pb2.StreamRunEventsRequest(run_id=run_id), metadata=AUTH))
        assert [e.seq for e in replay] == [e.seq for e in events]  # every seq, the corrupt one included
        lost = [e for e in replay if e.HasField("event_unreadable")]
        assert [e.seq for e in lost] == [broken]
        assert lost[0].event_unreadable.error.reason == "DATA_LOSS"
        assert f"event {broken} " in lost[0].event_unreadable.error.message
        assert [e for e in replay if e.seq != broken] == [e for e in events if e.seq != broken]
    batched = [e async for b in stub.StreamRunEventsBatched(orchestrator_pb2.StreamRunEventsRequest(run_id=run_id),
                                                            metadata=AUTH) for e in b.events]
    assert [e.WhichOneof("event") for e in batched if e.seq == broken] == ["event_unreadable"]
    assert batched[-1].HasField("workflow_finished")


async def test_text_delivery_is_chosen_per_stream_and_checked(server):
    stub, _, _ = server
    request = orchestrator_pb2.RunCanvasRequest(dsl=to_struct(canvas()), query="hello",
                                                text_delivery=orchestrator_pb2.TEXT_DELIVERY_CONFIRMED)
    events = await events_of(stub.RunCanvas(request, metadata=AUTH))
    assert "".join(e.message_delta.content for e in events) == "echo hello"
    assert events[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED
    replay = await events_of(stub.StreamRunEvents(orchestrator_pb2.StreamRunEventsRequest(
        run_id=events[0].run_id, text_delivery=orchestrator_pb2.TEXT_DELIVERY_CONFIRMED), metadata=AUTH))
    assert replay == events
    for call, message in ((stub.RunCanvas, orchestrator_pb2.RunCanvasRequest(dsl=to_struct(canvas()), text_delivery=7)),
                          (stub.StreamRunEvents, orchestrator_pb2.StreamRunEventsRequest(run_id=events[0].run_id,
                                                                                         text_delivery=7))):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await events_of(call(message, metadata=AUTH))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "text_delivery" in caught.value.details()
