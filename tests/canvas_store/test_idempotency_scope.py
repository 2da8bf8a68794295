"""Idempotency keys belong to (tenant, user), replays pass the policy a Get would, and identities compare
exactly on every backend (MariaDB: binary, NO PAD collation).

Before: a request_id was unique per tenant, so bob sending alice's request_id got alice's private canvas or
her run (spec included) back, and StartRunRecord could lease her run; and on MariaDB "ACME" = "acme",
"alice " = "alice", "Bob" = "bob".
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import grpc
import pytest
import sqlalchemy as sa
from agentcanvas.v1 import canvas_store_pb2 as pb
from agentcanvas.v1 import canvas_store_pb2_grpc

from services.canvas_store.adapters.sql.models import canvases, runs
from services.canvas_store.app import build_service
from services.common.auth import ON_BEHALF_OF, TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.clients import create_channel
from services.common.settings import Config
from services.common.status import from_rpc_error
from services.common.structs import to_struct
from tests.canvas_store.conftest import (
    MINIMAL_DSL, STORE_LIMITS, TOKENS, Client, create_canvas, expect_code, run_record, spec_of, unique_title,
)

ABORTED = grpc.StatusCode.ABORTED
NOT_FOUND = grpc.StatusCode.NOT_FOUND


def _rid(prefix: str = "rq") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def _canvas_request(request_id: str, title: str = "", **fields) -> pb.CreateCanvasRequest:
    canvas = pb.Canvas(title=title or unique_title(), **fields)
    canvas.dsl.CopyFrom(to_struct(MINIMAL_DSL))
    return pb.CreateCanvasRequest(canvas=canvas, request_id=request_id)


def _run(canvas_id: str = "", spec: dict | None = None) -> pb.RunRecord:
    return run_record(canvas_id=canvas_id, spec=spec or {"query": "hi"})


def _start(request_id: str, holder: str, canvas_id: str = "", spec: dict | None = None) -> pb.StartRunRecordRequest:
    return pb.StartRunRecordRequest(run=_run(canvas_id, spec), request_id=request_id, holder=holder, ttl_ms=60_000)


async def _expect_gone(call) -> None:
    error = await expect_code(call, ABORTED)
    assert from_rpc_error(error).reason == "IDEMPOTENT_RESOURCE_GONE"


# ---- canvases ------------------------------------------------------------------------------------


async def test_another_user_reusing_a_request_id_gets_a_canvas_of_their_own(store):
    request_id = _rid()
    private = await store.alice.CreateCanvas(_canvas_request(request_id, "alice private" + request_id))
    assert private.permission == pb.CANVAS_PERMISSION_ME
    # The same payload and request_id from bob (a member) and carol (not a member): new canvases, theirs.
    for client, user in ((store.bob, "bob"), (store.carol, "carol")):
        theirs = await client.CreateCanvas(_canvas_request(request_id, "alice private" + request_id))
        assert theirs.id != private.id
        got = await client.GetCanvas(pb.GetCanvasRequest(id=theirs.id))
        assert got.id == theirs.id
        await expect_code(client.GetCanvas(pb.GetCanvasRequest(id=private.id)), NOT_FOUND)
        # ... and their own replay returns their canvas, not alice's.
        again = await client.CreateCanvas(_canvas_request(request_id, "alice private" + request_id))
        assert again.id == theirs.id, user
    # A payload that differs from alice's is not REQUEST_ID_REUSED for someone else either.
    other = await store.bob.CreateCanvas(_canvas_request(request_id + "-x", "something else " + request_id))
    assert other.id != private.id
    # alice's replay still returns her canvas, unchanged.
    replay = await store.alice.CreateCanvas(_canvas_request(request_id, "alice private" + request_id))
    assert (replay.id, replay.etag) == (private.id, private.etag)


async def test_a_replay_returns_a_soft_deleted_canvas_as_get_does_and_nothing_once_it_is_gone(store):
    request_id = _rid()
    request = _canvas_request(request_id)
    created = await store.alice.CreateCanvas(request)
    await store.alice.DeleteCanvas(pb.DeleteCanvasRequest(id=created.id))
    # Still readable by its owner (AIP-164), so her replay still returns it.
    replay = await store.alice.CreateCanvas(request)
    assert replay.id == created.id and replay.HasField("delete_time")
    await expect_code(store.bob.GetCanvas(pb.GetCanvasRequest(id=created.id)), NOT_FOUND)
    # Purged: the replay names no canvas.
    with store.app.db.write() as conn:
        conn.execute(sa.update(canvases).where(canvases.c.id == created.id).values(expire_time=1))
    store.app.canvases.purge_expired(1)
    await expect_code(store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id)), NOT_FOUND)
    await _expect_gone(store.alice.CreateCanvas(request))
    # bob's identical request is his own request, unaffected by alice's dead key.
    theirs = await store.bob.CreateCanvas(_canvas_request(request_id))
    assert theirs.id != created.id


async def test_a_replay_of_a_canvas_the_caller_can_no_longer_see_does_not_leak_it(store):
    request = _canvas_request(_rid())
    created = await store.alice.CreateCanvas(request)
    # Ownership moved to someone else (no RPC does this today; the replay must still follow the policy).
    with store.app.db.write() as conn:
        conn.execute(sa.update(canvases).where(canvases.c.id == created.id).values(owner_id="zed", etag="moved"))
    await expect_code(store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id)), NOT_FOUND)
    error = await expect_code(store.alice.CreateCanvas(request), ABORTED)
    assert from_rpc_error(error).reason == "IDEMPOTENT_RESOURCE_GONE"
    assert created.id not in error.details() and "zed" not in error.details()


# ---- runs ----------------------------------------------------------------------------------------


async def test_another_user_reusing_a_run_request_id_gets_a_run_of_their_own(store):
    team = await create_canvas(store.alice, permission=pb.CANVAS_PERMISSION_TEAM)
    create_id, start_id = _rid("run"), _rid("start")
    secret = {"query": "alice's secret", "token": "s3cr3t"}
    created = await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(team.id, secret),
                                                                          request_id=create_id))
    started = await store.alice.StartRunRecord(_start(start_id, "alice-replica", team.id, secret))
    assert started.lease.holder == "alice-replica" and started.lease.token == 1

    # bob (a member who may run the canvas) sends the same request ids: his own runs, with his spec.
    mine = {"query": "bob's"}
    bobs = await store.bob.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(team.id, mine), request_id=create_id))
    assert bobs.id != created.id and spec_of(bobs) == mine
    # A StartRunRecord replay of alice's unleased CreateRunRecord key would have leased her run for bob.
    bobs_start = await store.bob.StartRunRecord(_start(create_id, "bob-replica", team.id, mine))
    assert bobs_start.run.id == bobs.id and bobs_start.lease.holder == "bob-replica"  # his own key's run
    bobs_started = await store.bob.StartRunRecord(_start(start_id, "bob-replica", team.id, mine))
    assert bobs_started.run.id != started.run.id and spec_of(bobs_started.run) == mine
    assert bobs_started.lease.holder == "bob-replica" and bobs_started.lease.token == 1
    # carol (no access to the canvas) is refused as for any new run, not handed alice's.
    await expect_code(store.carol.StartRunRecord(_start(start_id, "carol", team.id)), NOT_FOUND)
    # A spec-only run of carol's under alice's key is hers too.
    carols = await store.carol.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(), request_id=start_id))
    assert carols.id not in (started.run.id, created.id)

    # alice's runs and leases are untouched.
    got = await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=started.run.id))
    assert (got.lease.holder, got.lease.token) == ("alice-replica", 1)
    assert got.lease.expire_time == started.lease.expire_time
    assert not (await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=created.id))).HasField("lease")
    for client, run_id in ((store.bob, created.id), (store.bob, started.run.id)):
        await expect_code(client.GetRunRecord(pb.GetRunRecordRequest(id=run_id)), NOT_FOUND)

    # The same user's replays still return the originals (and the same holder's lease).
    again = await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(team.id, secret),
                                                                        request_id=create_id))
    assert again.id == created.id
    restarted = await store.alice.StartRunRecord(_start(start_id, "alice-replica", team.id, secret))
    assert restarted.run.id == started.run.id and restarted.lease.token == 1
    bobs_again = await store.bob.StartRunRecord(_start(start_id, "bob-replica", team.id, mine))
    assert bobs_again.run.id == bobs_started.run.id


async def test_service_principals_replay_their_own_runs(store):
    """Orchestrator replicas share one service identity: a replay from any of them finds the run; one acting on
    behalf of a user replays that user's keys (and only theirs)."""
    request_id = _rid("svc")
    first = await store.service.StartRunRecord(_start(request_id, "replica-1"))
    replay = await store.service.StartRunRecord(_start(request_id, "replica-1"))
    assert replay.run.id == first.run.id and replay.lease.token == first.lease.token == 1
    other = await store.service.StartRunRecord(_start(request_id, "replica-2"))
    assert other.run.id == first.run.id and not other.HasField("lease")  # replica-1's lease is live

    stub = canvas_store_pb2_grpc.CanvasStoreStub(store.channel)

    def on_behalf_of(who: str):
        return (("authorization", "Bearer t-svc"), (ON_BEHALF_OF, who))

    key = _rid("obo")
    alices = await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(), request_id=key))
    for_alice = await stub.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(), request_id=key),
                                           metadata=on_behalf_of("acme/alice"), timeout=30)
    assert for_alice.id == alices.id
    for_bob = await stub.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(), request_id=key),
                                         metadata=on_behalf_of("acme/bob"), timeout=30)
    assert for_bob.id != alices.id and for_bob.creator_id == "bob"
    own = await store.service.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(), request_id=key))
    assert own.id not in (alices.id, for_bob.id)


async def test_a_run_replay_the_caller_can_no_longer_see_is_gone_and_leases_nothing(store):
    key = _rid("gone")
    created = await store.carol.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(), request_id=key))
    with store.app.db.write() as conn:  # the run now belongs to someone else
        conn.execute(sa.update(runs).where(runs.c.id == created.id).values(creator_id="zed"))
    await expect_code(store.carol.GetRunRecord(pb.GetRunRecordRequest(id=created.id)), NOT_FOUND)
    await _expect_gone(store.carol.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(), request_id=key)))
    await _expect_gone(store.carol.StartRunRecord(_start(key, "carol-replica")))
    with store.app.db.read() as conn:
        row = conn.execute(sa.select(runs.c.lease_holder, runs.c.lease_token).where(runs.c.id == created.id)).one()
    assert tuple(row) == ("", 0)


# ---- exact identities on every backend -------------------------------------------------------------

EXTRA_TOKENS = [
    {"token": "t-ACME-alice", "tenant": "ACME", "user": "alice"},  # another tenant than acme
    {"token": "t-acme_-alice", "tenant": "acme ", "user": "alice"},  # trailing space: another tenant too
    {"token": "t-acme-Bob", "tenant": "acme", "user": "Bob"},  # not bob, so not a member
    {"token": "t-acme-alice_", "tenant": "acme", "user": "alice "},  # not alice, so not the owner
]


@dataclass
class Lookalikes:
    ACME_alice: Client
    acme_space_alice: Client
    acme_Bob: Client
    acme_alice_space: Client


@pytest.fixture(scope="module")
async def lookalikes(store, tmp_path_factory):
    """A second store process on the same database that also knows identities differing from acme's users only
    in case or a trailing space."""
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path_factory.mktemp("lookalikes"))}).with_overrides(
        {"auth": {"embedded": False, "tokens": TOKENS + EXTRA_TOKENS},
         "store": {"database_url": store.url, **STORE_LIMITS}})
    definition, _app = build_service(config)
    running = await start_server(definition, config, authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = create_channel(f"127.0.0.1:{running.port}")
    stub = canvas_store_pb2_grpc.CanvasStoreStub(channel)
    yield Lookalikes(*(Client(stub, entry["token"]) for entry in EXTRA_TOKENS))
    await channel.close()
    await running.stop(0)


async def test_tenants_and_users_that_differ_in_case_or_a_trailing_space_are_distinct(store, lookalikes):
    private = await create_canvas(store.alice)
    team = await create_canvas(store.alice, permission=pb.CANVAS_PERMISSION_TEAM)
    everyone = (lookalikes.ACME_alice, lookalikes.acme_space_alice, lookalikes.acme_Bob, lookalikes.acme_alice_space)
    for client in everyone:
        for canvas in (private, team):
            await expect_code(client.GetCanvas(pb.GetCanvasRequest(id=canvas.id)), NOT_FOUND)
        listed = await client.ListCanvases(pb.ListCanvasesRequest(page_size=100))
        assert not {private.id, team.id} & {c.id for c in listed.canvases}
    # bob himself is a member and sees the TEAM canvas.
    assert (await store.bob.GetCanvas(pb.GetCanvasRequest(id=team.id))).id == team.id
    # ACME's first user owns ACME; "acme" keeps its own owner and members.
    members = await lookalikes.ACME_alice.ListTenantMembers(pb.ListTenantMembersRequest())
    assert {(m.tenant_id, m.user_id) for m in members.members} == {("ACME", "alice")}
    await expect_code(lookalikes.acme_Bob.ListTenantMembers(pb.ListTenantMembersRequest()),
                      grpc.StatusCode.PERMISSION_DENIED)
    await expect_code(lookalikes.acme_alice_space.AddTenantMember(pb.AddTenantMemberRequest(user_id="mallory")),
                      grpc.StatusCode.PERMISSION_DENIED)
    # Runs: alice's run is not readable by the lookalikes.
    run = await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=_run()))
    for client in (lookalikes.ACME_alice, lookalikes.acme_alice_space, lookalikes.acme_Bob):
        await expect_code(client.GetRunRecord(pb.GetRunRecordRequest(id=run.id)), NOT_FOUND)


async def test_accents_count_in_titles_and_tags_and_request_ids_compare_exactly(store, lookalikes):
    suffix = uuid.uuid4().hex[:8]
    # Same owner name, same title up to case, in tenants "acme" and "ACME": two canvases, no ALREADY_EXISTS.
    lower = await create_canvas(store.alice, title=f"doc {suffix}")
    upper = await create_canvas(lookalikes.ACME_alice, title=f"Doc {suffix}")
    assert lower.id != upper.id
    # For one owner titles stay unique case-insensitively (by design), but accents count.
    await expect_code(create_canvas(store.alice, title=f"DOC {suffix}"), grpc.StatusCode.ALREADY_EXISTS)
    accented = await create_canvas(store.alice, title=f"dóc {suffix}")
    assert accented.id != lower.id
    found = await store.alice.ListCanvases(pb.ListCanvasesRequest(filter=f'title:"dóc {suffix}"'))
    assert [c.id for c in found.canvases] == [accented.id]
    # Tags match regardless of case, like titles (they are de-duplicated that way), but accents count.
    tagged = await create_canvas(store.alice, tags=[f"Tag{suffix}", f"café{suffix}"])
    for flt, expected in ((f'tags:"Tag{suffix}"', [tagged.id]), (f'tags:"tag{suffix}"', [tagged.id]),
                          (f'tags:"cafe{suffix}"', []), (f'tags:"café{suffix}"', [tagged.id])):
        listed = await store.alice.ListCanvases(pb.ListCanvasesRequest(filter=flt))
        assert [c.id for c in listed.canvases] == expected, flt
    # Request ids: "r1", "R1" and "r1 " are three keys (different payloads, so no REQUEST_ID_REUSED either).
    base = f"r{suffix}"
    created = [await store.alice.CreateCanvas(_canvas_request(key, f"key {n} {suffix}"))
               for n, key in enumerate((base, base.upper(), base + " "))]
    assert len({c.id for c in created}) == 3
    replay = await store.alice.CreateCanvas(_canvas_request(base.upper(), f"key 1 {suffix}"))
    assert replay.id == created[1].id
    # The same for runs, and for the same request id in tenants "acme" and "ACME".
    run_key = f"run{suffix}"
    first = await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(), request_id=run_key))
    second = await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(), request_id=run_key.upper()))
    third = await lookalikes.ACME_alice.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(), request_id=run_key))
    assert len({first.id, second.id, third.id}) == 3
    assert (await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(), request_id=run_key))).id == first.id


async def test_start_run_replay_is_unchanged_for_its_own_user(store):
    """Regression guard for the pre-existing replay rules: only keys of the caller take part."""
    canvas = await create_canvas(store.alice)
    key = f"own-{time.time_ns()}"
    started = await store.alice.StartRunRecord(_start(key, "a", canvas.id))
    await store.alice.ReleaseRunLease(pb.ReleaseRunLeaseRequest(run_id=started.run.id, token=1))
    again = await store.alice.StartRunRecord(_start(key, "b", canvas.id))
    assert again.run.id == started.run.id and again.lease.holder == "b" and again.lease.token == 2


# ---- continuation claims ---------------------------------------------------------------------------


async def test_a_continuation_claim_is_tenant_wide_so_only_one_user_continues_a_paused_run(store):
    """`resume:<P>` keys are the orchestrator's one-continuation rule: with per-user keys, alice and bob (both
    allowed to run the TEAM canvas's session) could each have created a continuation of P."""
    team = await create_canvas(store.alice, permission=pb.CANVAS_PERMISSION_TEAM)
    paused = await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(team.id), request_id=_rid()))
    claim = f"resume:{paused.id}"
    first = await store.bob.StartRunRecord(_start(claim, "replica-1", team.id, {"nonce": "bob's"}))
    assert first.lease.holder == "replica-1"
    # alice (the tenant owner, who may read bob's run) gets bob's continuation back, not a second one.
    second = await store.alice.StartRunRecord(_start(claim, "replica-2", team.id, {"nonce": "alice's"}))
    assert second.run.id == first.run.id and not second.HasField("lease")
    assert spec_of(second.run) == {"nonce": "bob's"}
    # carol may not read bob's run: refused without seeing it, and no run of hers is created.
    await _expect_gone(store.carol.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(), request_id=claim)))


async def test_a_continuation_claim_must_name_a_run_of_the_callers_tenant(store):
    for claim in ("resume:", f"resume:{uuid.uuid4().hex}"):
        await expect_code(store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(), request_id=claim)), NOT_FOUND)
    # A run of tenant ops (the service's own) cannot be claimed from acme.
    ops_run = await store.service.CreateRunRecord(pb.CreateRunRecordRequest(run=_run(), request_id=_rid()))
    await expect_code(store.alice.CreateRunRecord(pb.CreateRunRecordRequest(
        run=_run(), request_id=f"resume:{ops_run.id}")), NOT_FOUND)
