"""The orchestrator's store adapter on the real canvas_store (gRPC; SQLite / PostgreSQL / MariaDB):
a new run is created and leased in one StartRunRecord call; commits that queue while another is in
flight go out together as one CommitRunSteps, each item fenced on its own; an older store that lacks
either RPC (UNIMPLEMENTED) is served with the single-purpose RPCs.

Concurrency is set up by task order, not timing: the first commit of a gather() marks the lane busy
before its first await, and the others are queued before its reply can be processed.
"""

from __future__ import annotations

import asyncio
import dataclasses

import grpc
import pytest
from agentcanvas.v1 import canvas_store_pb2_grpc

from services.canvas_store.app import build_service
from services.canvas_store.server import CanvasStoreServicer
from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.context import token_var
from services.common.errors import AbortedError
from services.common.settings import Config
from services.orchestrator.adapters.store_grpc import GrpcRunStore
from services.orchestrator.core.events import Event
from services.orchestrator.core.run_request import RunRequest
from services.orchestrator.core.ports import RunRecord, RunStatus, Step
from tests.orchestrator.support.harness import dsl, finished, make_orchestrator
from tests.support.databases import temporary_database

TOKENS = [{"token": "t-alice", "tenant": "acme", "user": "alice"},
          {"token": "t-svc", "tenant": "ops", "user": "orchestrator", "role": "service"}]


class OlderStoreServicer(CanvasStoreServicer):
    """A store from before StartRunRecord and CommitRunSteps: it answers them UNIMPLEMENTED, as gRPC
    does for a method a server does not have."""

    async def StartRunRecord(self, request, context):
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not implemented!")

    async def CommitRunSteps(self, request, context):
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not implemented!")


@pytest.fixture(scope="module", params=("sqlite", "postgresql", "mariadb"))
async def stores(request, tmp_path_factory):
    """(address of a current store, address of an older one) over the same database."""
    tmp = str(tmp_path_factory.mktemp(f"batching-{request.param}"))
    with temporary_database(request.param, tmp, prefix="ac_batching_test") as url:
        config = Config.load(env={"AGENT_CANVAS_DATA_DIR": tmp}).with_overrides({
            "auth": {"embedded": False, "tokens": TOKENS},
            "store": {"database_url": url, "seed_templates": False}})
        auth = TokenAuthenticator.from_config(config, env={})
        definition, _ = build_service(config)
        current = await start_server(definition, config, authenticator=auth)
        older_definition, older_app = build_service(config)
        older_definition = dataclasses.replace(older_definition, register=lambda server: (
            canvas_store_pb2_grpc.add_CanvasStoreServicer_to_server(OlderStoreServicer(older_app), server)))
        older = await start_server(older_definition, config, authenticator=auth)
        yield f"127.0.0.1:{current.port}", f"127.0.0.1:{older.port}"
        await older.stop(0)
        await current.stop(0)


@pytest.fixture(autouse=True)
def as_alice():
    token = token_var.set("t-alice")
    yield
    token_var.reset(token)


def _record(query: str) -> RunRecord:
    return RunRecord(id="", spec={"dsl": {"components": {}}, "query": query})


async def _start(store: GrpcRunStore, query: str):
    created, lease = await store.start_run(_record(query), "", "replica-a", 60_000)
    assert lease is not None and lease.run_id == created.id and lease.holder == "replica-a"
    return created, lease


async def test_start_run_is_one_call_and_keeps_the_sent_spec(stores):
    store = GrpcRunStore(stores[0], own_token="t-svc")
    try:
        created, lease = await _start(store, "one")
        assert created.status == RunStatus.PENDING and created.spec == _record("one").spec
        assert store.calls == {"StartRunRecord": 1}
        again, replay_lease = await store.start_run(_record("one"), f"key-{created.id}", "replica-a", 60_000)
        replayed, same = await store.start_run(_record("one"), f"key-{created.id}", "replica-a", 60_000)
        assert replayed.id == again.id and same.token == replay_lease.token  # the same holder's lease back
        _, none = await store.start_run(_record("one"), f"key-{created.id}", "replica-b", 60_000)
        assert none is None  # live and another holder's
    finally:
        await store.close()


async def test_runs_sharing_one_dsl_store_it_whole_with_their_own_spec(stores):
    """The DSL's encoding is reused for the runs of one loaded canvas; the rest of each spec is its own."""
    store = GrpcRunStore(stores[0], own_token="t-svc")
    shared = {"components": {"begin": {"obj": {"component_name": "Begin", "params": {"prologue": "hi"}}}}, "globals": {}}
    other = {"components": {"begin": {"obj": {"component_name": "Begin", "params": {"prologue": "other"}}}}}
    try:
        ids = []
        for query, document in (("one", shared), ("two", shared), ("three", other)):
            created, _ = await store.start_run(RunRecord(id="", spec={"dsl": document, "query": query}), "",
                                               "replica-a", 60_000)
            ids.append(created.id)
        specs = [(await store.get_run(run_id)).spec for run_id in ids]
        assert specs == [{"dsl": shared, "query": "one"}, {"dsl": shared, "query": "two"},
                         {"dsl": other, "query": "three"}]
    finally:
        await store.close()


async def test_commits_queued_behind_one_in_flight_go_out_as_one_batch(stores):
    store = GrpcRunStore(stores[0], own_token="t-svc")
    try:
        runs = [await _start(store, f"q{i}") for i in range(3)]
        store.calls.clear()
        events = [[Event("workflow_started", {"n": i})] for i in range(3)]
        outcomes = await asyncio.gather(
            store.commit(runs[0][0].id, runs[0][1].token, [Step("a", {"x": 1})], events[0], status=RunStatus.RUNNING),
            store.commit(runs[1][0].id, runs[1][1].token + 5, [], events[1]),  # stale: fenced alone
            store.commit(runs[2][0].id, runs[2][1].token, [], events[2]),
            return_exceptions=True)
        assert store.calls == {"CommitRunStep": 1, "CommitRunSteps": 1}
        assert (outcomes[0].first_seq, outcomes[0].last_seq) == (1, 1) and events[0][0].seq == 1
        assert isinstance(outcomes[1], AbortedError) and outcomes[1].reason == "LEASE_LOST"
        assert (outcomes[2].first_seq, outcomes[2].last_seq) == (1, 1) and events[2][0].seq == 1
        assert [e.kind for e in await store.list_events(runs[1][0].id)] == []
        assert [s.node_id for s in await store.list_steps(runs[0][0].id)] == ["a"]
        assert (await store.get_run(runs[0][0].id)).status == RunStatus.RUNNING
        # Alone (nothing in flight) a commit is sent at once, as a single CommitRunStep.
        store.calls.clear()
        alone = await store.commit(runs[2][0].id, runs[2][1].token, [], [Event("workflow_started", {})])
        assert store.calls == {"CommitRunStep": 1} and alone.first_seq == 2
    finally:
        await store.close()


async def test_an_older_store_is_served_with_the_single_purpose_rpcs(stores):
    store = GrpcRunStore(stores[1], own_token="t-svc")
    try:
        runs = [await _start(store, f"old{i}") for i in range(3)]
        assert store.calls == {"StartRunRecord": 1, "CreateRunRecord": 3, "AcquireRunLease": 3}  # asked once
        store.calls.clear()
        outcomes = await asyncio.gather(*(
            store.commit(created.id, lease.token + (1 if i == 1 else 0), [], [Event("workflow_started", {})])
            for i, (created, lease) in enumerate(runs)), return_exceptions=True)
        assert store.calls == {"CommitRunStep": 3, "CommitRunSteps": 1}
        assert outcomes[0].last_seq == 1 and outcomes[2].last_seq == 1
        assert isinstance(outcomes[1], AbortedError)
    finally:
        await store.close()


async def test_concurrent_runs_of_an_orchestrator_start_in_one_call_each_and_share_commits(stores):
    store = GrpcRunStore(stores[0], own_token="t-svc")
    orch = make_orchestrator(store, holder="replica-a")
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["shout"]},
        "shout": {"type": "StringTransform", "params": {"method": "merge", "script": "hey {sys.query}"},
                  "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{shout@result}"]}},
    })
    try:
        runs = await asyncio.gather(*(orch.start_run(RunRequest(dsl=canvas, query=f"q{i}")) for i in range(8)))
        async with asyncio.timeout(60):  # a safety net against a hang, not a timing assertion
            outputs = [finished([e async for e in orch.stream_events(run.id)])["outputs"]["content"] for run in runs]
            await orch.wait_idle()
        assert outputs == [f"hey q{i}" for i in range(8)]
        assert store.calls["StartRunRecord"] == 8
        assert "CreateRunRecord" not in store.calls and "AcquireRunLease" not in store.calls
        for run in runs:  # everything each run wrote is durable, whatever call carried it
            record = await store.get_run(run.id)
            assert record.status == RunStatus.SUCCEEDED and record.last_seq == len(await store.list_events(run.id))
    finally:
        await orch.stop()
        await store.close()
