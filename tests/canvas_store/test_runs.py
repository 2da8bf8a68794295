"""Durable run state: idempotent records, leases with fencing, atomic commits, seq, watch, cancel."""

from __future__ import annotations

import asyncio
import time

import grpc
from agentcanvas.v1 import canvas_store_pb2 as pb
from agentcanvas.v1 import canvas_store_pb2_grpc
from agentcanvas.v1 import common_pb2
from google.rpc import error_details_pb2, status_pb2

from services.canvas_store.app import build_service
from services.common import status
from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.clients import create_channel
from services.common.structs import from_struct, to_struct
from tests.canvas_store.conftest import Client, create_canvas, event_payload, expect_code, run_record, spec_of, store_config

RUNNING = common_pb2.RUN_STATUS_RUNNING
SUCCEEDED = common_pb2.RUN_STATUS_SUCCEEDED


def _events(*kinds: str, terminal_last: bool = False) -> list[pb.StoredRunEvent]:
    return [pb.StoredRunEvent(event_type=kind, payload=event_payload(f"{kind}-payload"),
                              terminal=terminal_last and i == len(kinds) - 1) for i, kind in enumerate(kinds)]


async def _new_run(store, request_id: str = "") -> pb.RunRecord:
    canvas = await create_canvas(store.alice)
    run = run_record(canvas_id=canvas.id, revision_id=canvas.head_revision_id,
                     spec={"query": "hello", "inputs": {"n": 1}})
    return await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=run, request_id=request_id))


async def test_create_run_is_idempotent(store):
    first = await _new_run(store, request_id=f"run-req-{time.time_ns()}")
    assert first.status == common_pb2.RUN_STATUS_PENDING and first.last_seq == 0
    assert spec_of(first) == {"query": "hello", "inputs": {"n": 1}}
    again = await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(
        run=run_record(canvas_id=first.canvas_id), request_id=f"run-req-{first.id}"))
    assert again.id != first.id  # another key, another run
    replay = await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(
        run=run_record(canvas_id=first.canvas_id), request_id=f"run-req-{first.id}"))
    assert replay.id == again.id


async def test_lease_is_exclusive_and_fenced(store):
    run = await _new_run(store)
    lease = await store.alice.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="a", ttl_ms=60_000))
    assert lease.token == 1 and lease.holder == "a"
    await expect_code(store.alice.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="b")),
                      grpc.StatusCode.ABORTED)
    renewed = await store.alice.RenewRunLease(pb.RenewRunLeaseRequest(run_id=run.id, holder="a", token=1, ttl_ms=60_000))
    assert renewed.expire_time.ToMilliseconds() >= lease.expire_time.ToMilliseconds()
    await expect_code(store.alice.RenewRunLease(pb.RenewRunLeaseRequest(run_id=run.id, holder="b", token=1)),
                      grpc.StatusCode.ABORTED)
    await store.alice.ReleaseRunLease(pb.ReleaseRunLeaseRequest(run_id=run.id, token=1))
    second = await store.alice.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="b"))
    assert second.token == 2
    # The old holder is fenced off everywhere.
    await expect_code(store.alice.CommitRunStep(pb.CommitRunStepRequest(run_id=run.id, lease_token=1,
                                                                        events=_events("x"))), grpc.StatusCode.ABORTED)
    await expect_code(store.alice.RenewRunLease(pb.RenewRunLeaseRequest(run_id=run.id, holder="a", token=1)),
                      grpc.StatusCode.ABORTED)
    await expect_code(store.alice.ReleaseRunLease(pb.ReleaseRunLeaseRequest(run_id=run.id, token=1)),
                      grpc.StatusCode.ABORTED)
    got = await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=run.id))
    assert got.last_seq == 0 and got.lease.holder == "b" and got.lease.token == 2


async def _until_wall_clock_passes(instant_ms: int) -> None:
    """Returns once this host's wall clock is past `instant_ms`: the store runs on the same host and
    compares lease expiry times with that clock, so afterwards the lease is expired for it too,
    however slowly the machine ran (no guessed duration)."""
    while (now := time.time_ns() // 1_000_000) <= instant_ms:
        await asyncio.sleep((instant_ms - now + 1) / 1000)


async def test_expired_lease_can_be_taken_over(store):
    run = await _new_run(store)
    old = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="dying", ttl_ms=150))
    await store.service.CommitRunStep(pb.CommitRunStepRequest(run_id=run.id, lease_token=old.token,
                                                              events=_events("workflow_started"), status=RUNNING))
    await _until_wall_clock_passes(old.expire_time.ToMilliseconds())
    expired = await store.service.ListRunRecords(pb.ListRunRecordsRequest(
        statuses=[RUNNING], lease_expired_only=True, page_size=100))
    assert run.id in [r.id for r in expired.runs]
    new = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="survivor"))
    assert new.token == old.token + 1
    await expect_code(store.service.CommitRunStep(pb.CommitRunStepRequest(
        run_id=run.id, lease_token=old.token, events=_events("late"))), grpc.StatusCode.ABORTED)
    result = await store.service.CommitRunStep(pb.CommitRunStepRequest(
        run_id=run.id, lease_token=new.token, events=_events("node_started")))
    assert (result.first_seq, result.last_seq) == (2, 2)
    live = await store.service.ListRunRecords(pb.ListRunRecordsRequest(statuses=[RUNNING], lease_expired_only=True,
                                                                       page_size=100))
    assert run.id not in [r.id for r in live.runs]


async def test_commit_is_atomic_and_seq_consecutive(store):
    run = await _new_run(store)
    lease = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="a"))

    async def commit(n: int) -> pb.CommitRunStepResponse:
        return await store.service.CommitRunStep(pb.CommitRunStepRequest(
            run_id=run.id, lease_token=lease.token, events=_events(f"e{n}a", f"e{n}b", f"e{n}c"),
            steps=[pb.RunStep(node_id=f"node{n}", attempt=1, state=to_struct({"out": n}))]))

    results = await asyncio.gather(*(commit(n) for n in range(10)))
    ranges = sorted((r.first_seq, r.last_seq) for r in results)
    assert ranges == [(1 + 3 * i, 3 + 3 * i) for i in range(10)]
    events = (await store.alice.ListRunEvents(pb.ListRunEventsRequest(run_id=run.id))).events
    assert [e.seq for e in events] == list(range(1, 31))
    for first, last in ranges:  # each commit's events are contiguous and in order
        kinds = [e.event_type for e in events[first - 1:last]]
        assert kinds[0][:-1] == kinds[1][:-1] == kinds[2][:-1] and [k[-1] for k in kinds] == ["a", "b", "c"]
    steps = (await store.alice.ListRunSteps(pb.ListRunStepsRequest(run_id=run.id))).steps
    assert [s.step_index for s in steps] == list(range(1, 11))
    assert sorted(from_struct(s.state)["out"] for s in steps) == list(range(10))
    after = (await store.alice.ListRunSteps(pb.ListRunStepsRequest(run_id=run.id, after_step=8))).steps
    assert [s.step_index for s in after] == [9, 10]
    page = (await store.alice.ListRunEvents(pb.ListRunEventsRequest(run_id=run.id, after_seq=25, page_size=3))).events
    assert [e.seq for e in page] == [26, 27, 28] and page[0].payload == event_payload(f"{page[0].event_type}-payload")
    # A fenced-off commit writes nothing at all: no steps, no events, no status.
    await expect_code(store.service.CommitRunStep(pb.CommitRunStepRequest(
        run_id=run.id, lease_token=lease.token + 5, events=_events("bad"), steps=[pb.RunStep(node_id="bad")],
        status=SUCCEEDED)), grpc.StatusCode.ABORTED)
    got = await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=run.id))
    assert got.last_seq == 30 and got.status == common_pb2.RUN_STATUS_PENDING
    assert len((await store.alice.ListRunSteps(pb.ListRunStepsRequest(run_id=run.id))).steps) == 10


async def test_terminal_commit_records_outputs_and_closes_the_run(store):
    run = await _new_run(store)
    lease = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="a"))
    done = await store.service.CommitRunStep(pb.CommitRunStepRequest(
        run_id=run.id, lease_token=lease.token, events=_events("workflow_finished", terminal_last=True),
        status=SUCCEEDED, outputs=to_struct({"content": "Paris"}),
        usage=common_pb2.TokenUsage(prompt_tokens=3, completion_tokens=4, total_tokens=7, calls=1)))
    assert done.last_seq == 1
    got = await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=run.id))
    assert got.status == SUCCEEDED and from_struct(got.outputs) == {"content": "Paris"}
    assert got.usage.total_tokens == 7 and got.usage.calls == 1
    await expect_code(store.service.CommitRunStep(pb.CommitRunStepRequest(run_id=run.id, lease_token=lease.token,
                                                                          events=_events("more"))),
                      grpc.StatusCode.FAILED_PRECONDITION)
    await store.service.ReleaseRunLease(pb.ReleaseRunLeaseRequest(run_id=run.id, token=lease.token))
    await expect_code(store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="b")),
                      grpc.StatusCode.FAILED_PRECONDITION)
    failed = await _new_run(store)
    lease = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=failed.id, holder="a"))
    await store.service.CommitRunStep(pb.CommitRunStepRequest(
        run_id=failed.id, lease_token=lease.token, status=common_pb2.RUN_STATUS_FAILED,
        error=common_pb2.ErrorDetail(reason="NODE_FAILED", message="boom", component_id="llm:0")))
    got = await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=failed.id))
    assert got.error.reason == "NODE_FAILED" and got.error.component_id == "llm:0"


async def test_cancel_flag_reaches_the_lease_holder(store):
    run = await _new_run(store)
    lease = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="a"))
    first = await store.service.CommitRunStep(pb.CommitRunStepRequest(run_id=run.id, lease_token=lease.token,
                                                                      events=_events("started")))
    assert not first.cancel_requested
    cancelled = await store.alice.RequestRunCancel(pb.RequestRunCancelRequest(id=run.id))
    assert cancelled.cancel_requested
    renewed = await store.service.RenewRunLease(pb.RenewRunLeaseRequest(run_id=run.id, holder="a", token=lease.token))
    assert renewed.cancel_requested
    second = await store.service.CommitRunStep(pb.CommitRunStepRequest(run_id=run.id, lease_token=lease.token))
    assert second.cancel_requested and second.first_seq == 0 and second.last_seq == 1


async def _collect(call, into: list) -> None:
    # read(), not `async for`: grpc refuses to mix the two on one call, and some tests read() first.
    while (event := await call.read()) != grpc.aio.EOF:
        into.append(event)


async def test_watch_replays_then_follows_until_terminal(store):
    run = await _new_run(store)
    lease = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="a"))
    await store.service.CommitRunStep(pb.CommitRunStepRequest(run_id=run.id, lease_token=lease.token,
                                                              events=_events("one", "two")))
    call = store.alice.WatchRunEvents(pb.WatchRunEventsRequest(run_id=run.id, after_seq=1))
    # The replayed event arrives first; reading it proves the watch is attached before the next commits.
    received: list[pb.StoredRunEvent] = [await asyncio.wait_for(call.read(), 10)]
    assert [e.seq for e in received] == [2]
    watcher = asyncio.create_task(_collect(call, received))
    await store.service.CommitRunStep(pb.CommitRunStepRequest(run_id=run.id, lease_token=lease.token,
                                                              events=_events("three")))
    await store.service.CommitRunStep(pb.CommitRunStepRequest(
        run_id=run.id, lease_token=lease.token, events=_events("four", "finished", terminal_last=True), status=SUCCEEDED))
    await asyncio.wait_for(watcher, 10)  # the stream ends by itself after the terminal event
    assert [e.seq for e in received] == [2, 3, 4, 5]
    assert [e.event_type for e in received] == ["two", "three", "four", "finished"] and received[-1].terminal
    # Reattaching to a finished run replays and ends.
    replay: list[pb.StoredRunEvent] = []
    await asyncio.wait_for(_collect(store.alice.WatchRunEvents(pb.WatchRunEventsRequest(run_id=run.id)), replay), 10)
    assert [e.seq for e in replay] == [1, 2, 3, 4, 5]


async def test_watch_sees_commits_made_through_another_store_process(store, tmp_path):
    """A second store instance on the same database (as another replica would be) serves the watch;
    the commits go through the first, so only the DB poll can deliver them."""
    config = store_config(str(tmp_path), store.url)
    definition, _app = build_service(config)
    other = await start_server(definition, config, authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = create_channel(f"127.0.0.1:{other.port}")
    try:
        reader = Client(canvas_store_pb2_grpc.CanvasStoreStub(channel), "t-alice")
        run = await _new_run(store)
        lease = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="writer"))
        await store.service.CommitRunStep(pb.CommitRunStepRequest(run_id=run.id, lease_token=lease.token,
                                                                  events=_events("e0")))
        call = reader.WatchRunEvents(pb.WatchRunEventsRequest(run_id=run.id))
        # Once the first event is read the watch is attached, so the later commits cannot arrive as replay.
        received: list[pb.StoredRunEvent] = [await asyncio.wait_for(call.read(), 10)]
        watcher = asyncio.create_task(_collect(call, received))
        for n in range(1, 3):
            await store.service.CommitRunStep(pb.CommitRunStepRequest(run_id=run.id, lease_token=lease.token,
                                                                      events=_events(f"e{n}")))
        await store.service.CommitRunStep(pb.CommitRunStepRequest(
            run_id=run.id, lease_token=lease.token, events=_events("end", terminal_last=True), status=SUCCEEDED))
        await asyncio.wait_for(watcher, 10)
        assert [e.seq for e in received] == [1, 2, 3, 4]
    finally:
        await channel.close()
        await other.stop(0)


async def test_concurrent_retries_of_one_create_return_one_run(store):
    canvas = await create_canvas(store.alice)
    request = pb.CreateRunRecordRequest(run=run_record(canvas_id=canvas.id), request_id=f"race-{canvas.id}")
    results = await asyncio.gather(*(store.alice.CreateRunRecord(request) for _ in range(6)))
    assert len({r.id for r in results}) == 1


async def test_watch_of_a_paused_run_ends_when_caught_up(store):
    run = await _new_run(store)
    lease = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="a"))
    await store.service.CommitRunStep(pb.CommitRunStepRequest(
        run_id=run.id, lease_token=lease.token, events=_events("user_inputs", "paused", terminal_last=True),
        status=common_pb2.RUN_STATUS_PAUSED))
    replay: list[pb.StoredRunEvent] = []
    await asyncio.wait_for(_collect(store.alice.WatchRunEvents(pb.WatchRunEventsRequest(run_id=run.id)), replay), 10)
    assert [e.seq for e in replay] == [1, 2]
    after: list[pb.StoredRunEvent] = []
    await asyncio.wait_for(_collect(store.alice.WatchRunEvents(pb.WatchRunEventsRequest(run_id=run.id, after_seq=2)),
                                    after), 10)
    assert after == []
    # A paused run can be resumed: commits are still accepted and numbered on.
    resumed = await store.service.CommitRunStep(pb.CommitRunStepRequest(
        run_id=run.id, lease_token=lease.token, events=_events("resumed"), status=RUNNING))
    assert resumed.first_seq == 3


async def test_open_watch_ends_with_unavailable_when_the_store_drains(store, tmp_path):
    config = store_config(str(tmp_path), store.url)
    definition, _app = build_service(config)
    other = await start_server(definition, config, authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = create_channel(f"127.0.0.1:{other.port}")
    try:
        reader = Client(canvas_store_pb2_grpc.CanvasStoreStub(channel), "t-alice")
        run = await _new_run(store)
        lease = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="w"))
        await store.service.CommitRunStep(pb.CommitRunStepRequest(run_id=run.id, lease_token=lease.token,
                                                                  events=_events("started")))
        stream = reader.WatchRunEvents(pb.WatchRunEventsRequest(run_id=run.id))
        first = await asyncio.wait_for(stream.read(), 10)
        assert first.seq == 1
        await other.stop(5)
        error = await expect_code(asyncio.wait_for(stream.read(), 10), grpc.StatusCode.UNAVAILABLE)
        assert "after_seq" in error.details()
    finally:
        await channel.close()
        await other.stop(0)


# ---- StartRunRecord and CommitRunSteps (fewer RPCs and transactions per run) ------------------------

def _start_request(canvas, request_id: str, holder: str, **extra) -> pb.StartRunRecordRequest:
    run = run_record(canvas_id=canvas.id, revision_id=canvas.head_revision_id,
                     spec={"query": "start", "inputs": {"n": 2}})
    return pb.StartRunRecordRequest(run=run, request_id=request_id, holder=holder, ttl_ms=60_000, **extra)


async def test_start_run_creates_and_leases_in_one_call(store):
    canvas = await create_canvas(store.alice)
    key = f"start-{time.time_ns()}"
    started = await store.alice.StartRunRecord(_start_request(canvas, key, "a", omit_spec=True))
    assert started.run.status == common_pb2.RUN_STATUS_PENDING and not started.run.HasField("spec")
    assert started.lease.holder == "a" and started.lease.token == 1 and started.lease.run_id == started.run.id
    got = await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=started.run.id))
    assert got.lease.holder == "a" and got.lease.token == 1
    assert spec_of(got) == {"query": "start", "inputs": {"n": 2}}
    # The same holder replaying gets the same run and its own lease back; another holder gets no lease.
    replay = await store.alice.StartRunRecord(_start_request(canvas, key, "a"))
    assert replay.run.id == started.run.id and replay.lease.token == 1
    assert spec_of(replay.run) == {"query": "start", "inputs": {"n": 2}}  # omit_spec not asked
    other = await store.alice.StartRunRecord(_start_request(canvas, key, "b"))
    assert other.run.id == started.run.id and not other.HasField("lease")
    await expect_code(store.alice.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=started.run.id, holder="b")),
                      grpc.StatusCode.ABORTED)
    await store.alice.CommitRunStep(pb.CommitRunStepRequest(run_id=started.run.id, lease_token=1,
                                                            events=_events("workflow_started"), status=RUNNING))
    # Once the run has started, a replay never leases it (takeover goes through AcquireRunLease).
    late = await store.alice.StartRunRecord(_start_request(canvas, key, "a"))
    assert late.run.id == started.run.id and late.run.status == RUNNING and not late.HasField("lease")


async def test_start_run_replay_leases_a_run_created_unleased(store):
    canvas = await create_canvas(store.alice)
    key = f"start-unleased-{time.time_ns()}"
    run = run_record(canvas_id=canvas.id, spec={"query": "other"})
    created = await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=run, request_id=key))
    started = await store.alice.StartRunRecord(_start_request(canvas, key, "b", omit_spec=True))
    assert started.run.id == created.id and started.lease.holder == "b" and started.lease.token == 1
    # The stored spec differs from the one sent, so it is returned despite omit_spec.
    assert spec_of(started.run) == {"query": "other"}
    await store.alice.ReleaseRunLease(pb.ReleaseRunLeaseRequest(run_id=created.id, token=1))
    again = await store.alice.StartRunRecord(_start_request(canvas, key, "c"))
    assert again.lease.holder == "c" and again.lease.token == 2  # a new token fences the released one


async def test_start_run_validates_like_create_plus_lease(store):
    canvas = await create_canvas(store.alice)
    error = await expect_code(store.alice.StartRunRecord(_start_request(canvas, "", "")),
                              grpc.StatusCode.INVALID_ARGUMENT)
    assert [v.field for v in status.field_violations(error)] == ["holder"]
    error = await expect_code(store.alice.StartRunRecord(pb.StartRunRecordRequest(
        run=run_record(canvas_id="0" * 32), holder="a")), grpc.StatusCode.NOT_FOUND)
    await expect_code(store.carol.StartRunRecord(_start_request(canvas, "", "a")), grpc.StatusCode.NOT_FOUND)


def _item_error(result: pb.CommitRunStepResult) -> tuple[int, str, list[str]]:
    parsed = status_pb2.Status()
    parsed.ParseFromString(result.status)
    reason, fields = "", []
    for detail in parsed.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason = info.reason
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            fields = [v.field for v in bad.field_violations]
    assert parsed.code == result.code
    return result.code, reason, fields


async def test_commit_run_steps_fences_each_item_on_its_own(store):
    one, two, done = await _new_run(store), await _new_run(store), await _new_run(store)
    for run in (one, two, done):
        await store.alice.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="a", ttl_ms=60_000))
    await store.alice.CommitRunStep(pb.CommitRunStepRequest(run_id=done.id, lease_token=1, status=SUCCEEDED,
                                                            events=_events("end", terminal_last=True)))
    commits = [
        pb.CommitRunStepRequest(run_id=two.id, lease_token=1, events=_events("a", "b"), status=RUNNING,
                                steps=[pb.RunStep(node_id="n1", attempt=1)]),
        pb.CommitRunStepRequest(run_id=one.id, lease_token=7, events=_events("stale")),
        pb.CommitRunStepRequest(run_id=one.id, lease_token=1, events=_events("x")),
        pb.CommitRunStepRequest(run_id=two.id, lease_token=1, events=_events("c")),
        pb.CommitRunStepRequest(run_id=done.id, lease_token=1, events=_events("late")),
        pb.CommitRunStepRequest(run_id=one.id, lease_token=1, events=[pb.StoredRunEvent(event_type="t" * 65, payload=event_payload())]),
        pb.CommitRunStepRequest(run_id="0" * 32, lease_token=1, events=_events("ghost")),
    ]
    reply = await store.alice.CommitRunSteps(pb.CommitRunStepsRequest(commits=commits))
    results = list(reply.results)
    assert len(results) == len(commits)
    assert (results[0].code, results[0].response.first_seq, results[0].response.last_seq) == (0, 1, 2)
    assert _item_error(results[1])[:2] == (grpc.StatusCode.ABORTED.value[0], "LEASE_LOST")
    assert (results[2].code, results[2].response.first_seq, results[2].response.last_seq) == (0, 1, 1)
    assert (results[3].code, results[3].response.first_seq) == (0, 3)  # after item 0 of the same run
    assert _item_error(results[4])[:2] == (grpc.StatusCode.FAILED_PRECONDITION.value[0], "RUN_FINISHED")
    code, _, fields = _item_error(results[5])
    assert code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and fields == ["events[0].event_type"]
    assert _item_error(results[6])[0] == grpc.StatusCode.NOT_FOUND.value[0]
    events = await store.alice.ListRunEvents(pb.ListRunEventsRequest(run_id=two.id))
    assert [(e.seq, e.event_type) for e in events.events] == [(1, "a"), (2, "b"), (3, "c")]
    events = await store.alice.ListRunEvents(pb.ListRunEventsRequest(run_id=one.id))
    assert [(e.seq, e.event_type) for e in events.events] == [(1, "x")]
    steps = await store.alice.ListRunSteps(pb.ListRunStepsRequest(run_id=two.id))
    assert [(s.step_index, s.node_id) for s in steps.steps] == [(1, "n1")]
    got = await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=two.id))
    assert got.status == RUNNING and got.last_seq == 3


async def test_commit_run_steps_rejects_an_empty_or_foreign_batch(store):
    error = await expect_code(store.alice.CommitRunSteps(pb.CommitRunStepsRequest()), grpc.StatusCode.INVALID_ARGUMENT)
    assert [v.field for v in status.field_violations(error)] == ["commits"]
    run = await _new_run(store)
    await store.alice.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="a", ttl_ms=60_000))
    reply = await store.carol.CommitRunSteps(pb.CommitRunStepsRequest(commits=[
        pb.CommitRunStepRequest(run_id=run.id, lease_token=1, events=_events("intruder"))]))
    assert reply.results[0].code == grpc.StatusCode.NOT_FOUND.value[0]  # AIP-211: no existence leak
    events = await store.alice.ListRunEvents(pb.ListRunEventsRequest(run_id=run.id))
    assert list(events.events) == []
