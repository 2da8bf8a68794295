"""What a run record and its events must hold: a run the orchestrator cannot load, or an event payload it
cannot decode, used to be accepted and then broke every replica or reader of the run."""

from __future__ import annotations

import grpc
from agentcanvas.v1 import canvas_store_pb2 as pb

from services.common.status import from_rpc_error
from services.common.structs import to_struct
from tests.canvas_store.conftest import MINIMAL_DSL, create_canvas, event_payload, expect_code, run_record

BAD = grpc.StatusCode.INVALID_ARGUMENT


def _fields(error: grpc.aio.AioRpcError) -> list[str]:
    return [v.field for v in from_rpc_error(error).violations]


def _raw(spec: dict | None, **fields) -> pb.RunRecord:
    run = pb.RunRecord(**fields)
    if spec is not None:
        run.spec.CopyFrom(to_struct(spec))
    return run


async def test_a_run_record_without_a_loadable_spec_is_refused_naming_the_field(store):
    canvas = await create_canvas(store.alice)
    before = await store.service.ListRunRecords(pb.ListRunRecordsRequest(page_size=100, statuses=[1]))
    cases = [
        (None, "run.spec"),  # the empty request that used to be OK and PENDING
        ({}, "run.spec"),
        ({"query": "hi"}, "run.spec.dsl"),
        ({"dsl": "zz"}, "run.spec.dsl"),
        ({"dsl": {"components": "zz"}}, "run.spec.dsl.components"),
        ({"dsl": MINIMAL_DSL, "globals": "x"}, "run.spec.globals"),
        ({"dsl": MINIMAL_DSL, "inputs": [1]}, "run.spec.inputs"),
        ({"dsl": MINIMAL_DSL, "resume_from": 3}, "run.spec.resume_from"),
    ]
    for spec, field in cases:
        for run in (_raw(spec), _raw(spec, canvas_id=canvas.id)):
            error = await expect_code(store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=run)), BAD)
            assert _fields(error) == [field], (spec, error.details())
            error = await expect_code(store.service.StartRunRecord(pb.StartRunRecordRequest(run=run, holder="h")), BAD)
            assert _fields(error) == [field], (spec, error.details())
    after = await store.service.ListRunRecords(pb.ListRunRecordsRequest(page_size=100, statuses=[1]))
    assert [r.id for r in after.runs] == [r.id for r in before.runs]  # nothing was created
    ok = await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=run_record(canvas_id=canvas.id)))
    assert ok.status


async def test_event_payloads_must_be_run_events(store):
    canvas = await create_canvas(store.alice)
    started = await store.alice.StartRunRecord(pb.StartRunRecordRequest(run=run_record(canvas_id=canvas.id),
                                                                        holder="h"))
    run_id, token = started.run.id, started.lease.token

    def commit(*payloads: bytes) -> pb.CommitRunStepRequest:
        return pb.CommitRunStepRequest(run_id=run_id, lease_token=token,
                                       events=[pb.StoredRunEvent(event_type="e", payload=p) for p in payloads])

    for bad in (b"\xff\xff\xff", b"garbage that is no protobuf", b""):
        error = await expect_code(store.alice.CommitRunStep(commit(event_payload("ok"), bad)), BAD)
        assert _fields(error) == ["events[1].payload"], error.details()
    assert (await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=run_id))).last_seq == 0
    # In a batch only the bad item fails.
    batch = await store.alice.CommitRunSteps(pb.CommitRunStepsRequest(commits=[commit(b"\xff"), commit(event_payload())]))
    assert [r.code for r in batch.results] == [BAD.value[0], 0]
    assert batch.results[1].response.last_seq == 1
