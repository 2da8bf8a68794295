"""Lease fencing of durable runs beyond test_runs.py: an expired lease fences its holder like a stale token."""

from __future__ import annotations

import grpc
from agentcanvas.v1 import canvas_store_pb2 as pb
from agentcanvas.v1 import common_pb2

from services.common import status
from tests.canvas_store.conftest import expect_code
from tests.canvas_store.test_runs import _events, _item_error, _new_run, _until_wall_clock_passes

RUNNING = common_pb2.RUN_STATUS_RUNNING
SUCCEEDED = common_pb2.RUN_STATUS_SUCCEEDED


async def _expired_lease(store, run_id: str) -> pb.RunLease:
    """A lease on `run_id` that has expired, with nobody having taken the run over."""
    lease = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run_id, holder="slow", ttl_ms=100))
    await _until_wall_clock_passes(lease.expire_time.ToMilliseconds())
    return lease


async def test_commit_after_the_lease_expired_is_lease_lost_and_writes_nothing(store):
    run = await _new_run(store)
    lease = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="slow", ttl_ms=100))
    await store.service.CommitRunStep(pb.CommitRunStepRequest(run_id=run.id, lease_token=lease.token,
                                                              events=_events("started"), status=RUNNING))
    await _until_wall_clock_passes(lease.expire_time.ToMilliseconds())
    error = await expect_code(store.service.CommitRunStep(pb.CommitRunStepRequest(
        run_id=run.id, lease_token=lease.token, events=_events("late", terminal_last=True),
        steps=[pb.RunStep(node_id="late")], status=SUCCEEDED)), grpc.StatusCode.ABORTED)
    assert status.from_rpc_error(error).reason == "LEASE_LOST"
    got = await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=run.id))
    assert got.status == RUNNING and got.last_seq == 1
    assert list((await store.alice.ListRunSteps(pb.ListRunStepsRequest(run_id=run.id))).steps) == []
    # The run is a takeover candidate, and the next holder numbers on without a gap.
    new = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="next"))
    done = await store.service.CommitRunStep(pb.CommitRunStepRequest(run_id=run.id, lease_token=new.token,
                                                                     events=_events("resumed")))
    assert (done.first_seq, done.last_seq) == (2, 2)


async def test_renew_after_the_lease_expired_is_lease_lost(store):
    run = await _new_run(store)
    lease = await _expired_lease(store, run.id)
    error = await expect_code(store.service.RenewRunLease(pb.RenewRunLeaseRequest(
        run_id=run.id, holder="slow", token=lease.token, ttl_ms=60_000)), grpc.StatusCode.ABORTED)
    assert status.from_rpc_error(error).reason == "LEASE_LOST"
    got = await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=run.id))
    assert got.lease.expire_time.ToMilliseconds() == lease.expire_time.ToMilliseconds()  # not extended
    # Re-acquiring is the way back, and it fences the expired token.
    again = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="slow"))
    assert again.token == lease.token + 1


async def test_commit_run_steps_refuses_an_item_whose_lease_expired(store):
    stale, live = await _new_run(store), await _new_run(store)
    expired = await _expired_lease(store, stale.id)
    held = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=live.id, holder="a", ttl_ms=60_000))
    reply = await store.service.CommitRunSteps(pb.CommitRunStepsRequest(commits=[
        pb.CommitRunStepRequest(run_id=stale.id, lease_token=expired.token, events=_events("late")),
        pb.CommitRunStepRequest(run_id=live.id, lease_token=held.token, events=_events("fine")),
    ]))
    assert _item_error(reply.results[0])[:2] == (grpc.StatusCode.ABORTED.value[0], "LEASE_LOST")
    assert (reply.results[1].code, reply.results[1].response.last_seq) == (0, 1)
    assert (await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=stale.id))).last_seq == 0
    assert list((await store.alice.ListRunEvents(pb.ListRunEventsRequest(run_id=stale.id))).events) == []
