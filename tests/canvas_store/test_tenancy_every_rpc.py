"""AIP-211 for EVERY RPC of the CanvasStore service descriptor, for every kind of intruder.

The table below must name every method of `agentcanvas.v1.CanvasStore`: a new RPC without an entry fails
`test_every_rpc_has_a_denial_case`, so it cannot be forgotten. Each intruder must get NOT_FOUND (never
PERMISSION_DENIED, which would tell that the resource exists) on every RPC that names one of alice's
resources, the error must not echo the resource's data, and nothing of alice's may change. RPCs that name no
resource (collections, templates, tenancy) are checked to answer from the caller's own tenant only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from agentcanvas.v1 import canvas_store_pb2 as pb
from google.protobuf import field_mask_pb2

from services.common.structs import to_struct
from tests.canvas_store.conftest import create_canvas, dsl_variant, event_payload, expect_code, run_record, unique_title

NOT_FOUND = grpc.StatusCode.NOT_FOUND
SERVICE = pb.DESCRIPTOR.services_by_name["CanvasStore"]
SECRET = "top-secret-title"


@dataclass
class World:
    """alice's resources: a live canvas with a session, a run (leased by the orchestrator) and a deleted canvas."""

    canvas: pb.Canvas
    deleted: pb.Canvas
    session: pb.Session
    run: pb.RunRecord
    lease: pb.RunLease


async def _alice_world(store, permission: int) -> World:
    canvas = await create_canvas(store.alice, title=f"{SECRET} {unique_title()}", permission=permission)
    canvas = await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=canvas.id, etag=canvas.etag, dsl=to_struct(dsl_variant(1))),
        update_mask=field_mask_pb2.FieldMask(paths=["dsl"])))
    deleted = await create_canvas(store.alice, permission=permission)
    deleted = (await store.alice.DeleteCanvas(pb.DeleteCanvasRequest(id=deleted.id))).canvas
    session = await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))
    run = await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=run_record(canvas_id=canvas.id)))
    lease = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="replica-a"))
    return World(canvas, deleted, session, run, lease)


def _mask(*paths: str) -> field_mask_pb2.FieldMask:
    return field_mask_pb2.FieldMask(paths=list(paths))


# RPC name -> calls (each a function of (client, world) returning the call) that must all be NOT_FOUND.
DENIED: dict[str, list[Callable[[Any, World], Any]]] = {
    "GetCanvas": [lambda c, w: c.GetCanvas(pb.GetCanvasRequest(id=w.canvas.id)),
                  lambda c, w: c.GetCanvas(pb.GetCanvasRequest(id=w.deleted.id))],
    "UpdateCanvas": [
        lambda c, w: c.UpdateCanvas(pb.UpdateCanvasRequest(canvas=pb.Canvas(id=w.canvas.id, title="pwned"),
                                                           update_mask=_mask("title"))),
        lambda c, w: c.UpdateCanvas(pb.UpdateCanvasRequest(  # the single-statement path, with the right etag
            canvas=pb.Canvas(id=w.canvas.id, description="pwned", etag=w.canvas.etag), update_mask=_mask("description"))),
        lambda c, w: c.UpdateCanvas(pb.UpdateCanvasRequest(
            canvas=pb.Canvas(id=w.canvas.id, permission=pb.CANVAS_PERMISSION_TEAM, etag=w.canvas.etag),
            update_mask=_mask("permission"))),
        lambda c, w: c.UpdateCanvas(pb.UpdateCanvasRequest(
            canvas=pb.Canvas(id=w.canvas.id, etag=w.canvas.etag, dsl=to_struct(dsl_variant(666))),
            update_mask=_mask("dsl"))),
        lambda c, w: c.UpdateCanvas(pb.UpdateCanvasRequest(canvas=pb.Canvas(id=w.canvas.id, title="pwned"),
                                                           update_mask=_mask("title"), validate_only=True)),
    ],
    "DeleteCanvas": [lambda c, w: c.DeleteCanvas(pb.DeleteCanvasRequest(id=w.canvas.id)),
                     lambda c, w: c.DeleteCanvas(pb.DeleteCanvasRequest(id=w.canvas.id, etag=w.canvas.etag))],
    "UndeleteCanvas": [lambda c, w: c.UndeleteCanvas(pb.UndeleteCanvasRequest(id=w.deleted.id)),
                       lambda c, w: c.UndeleteCanvas(pb.UndeleteCanvasRequest(id=w.canvas.id))],
    "ListRevisions": [lambda c, w: c.ListRevisions(pb.ListRevisionsRequest(canvas_id=w.canvas.id))],
    "GetRevision": [
        lambda c, w: c.GetRevision(pb.GetRevisionRequest(canvas_id=w.canvas.id, revision_id="latest")),
        lambda c, w: c.GetRevision(pb.GetRevisionRequest(canvas_id=w.canvas.id, revision_id=w.canvas.head_revision_id)),
        lambda c, w: c.GetRevision(pb.GetRevisionRequest(canvas_id=w.canvas.id, revision_id="published")),
    ],
    "PublishCanvas": [lambda c, w: c.PublishCanvas(pb.PublishCanvasRequest(canvas_id=w.canvas.id)),
                      lambda c, w: c.PublishCanvas(pb.PublishCanvasRequest(canvas_id=w.canvas.id, etag=w.canvas.etag))],
    "RollbackCanvas": [lambda c, w: c.RollbackCanvas(pb.RollbackCanvasRequest(
        canvas_id=w.canvas.id, revision_id=w.canvas.head_revision_id, etag=w.canvas.etag))],
    "CreateSession": [lambda c, w: c.CreateSession(pb.CreateSessionRequest(canvas_id=w.canvas.id)),
                      lambda c, w: c.CreateSession(pb.CreateSessionRequest(canvas_id=w.canvas.id, revision_id="latest"))],
    "GetSession": [lambda c, w: c.GetSession(pb.GetSessionRequest(id=w.session.id))],
    "ListSessions": [lambda c, w: c.ListSessions(pb.ListSessionsRequest(canvas_id=w.canvas.id))],
    "DeleteSession": [lambda c, w: c.DeleteSession(pb.DeleteSessionRequest(id=w.session.id))],
    "AppendSessionTurn": [lambda c, w: c.AppendSessionTurn(pb.AppendSessionTurnRequest(
        id=w.session.id, messages=[to_struct({"role": "user", "content": "pwned"})], etag=w.session.etag))],
    "CreateRunRecord": [
        lambda c, w: c.CreateRunRecord(pb.CreateRunRecordRequest(run=run_record(canvas_id=w.canvas.id))),
        lambda c, w: c.CreateRunRecord(pb.CreateRunRecordRequest(run=run_record(session_id=w.session.id))),
        lambda c, w: c.CreateRunRecord(pb.CreateRunRecordRequest(request_id=f"resume:{w.run.id}",
                                                                 run=run_record(session_id=w.session.id))),
    ],
    "StartRunRecord": [
        lambda c, w: c.StartRunRecord(pb.StartRunRecordRequest(run=run_record(canvas_id=w.canvas.id), holder="evil")),
        lambda c, w: c.StartRunRecord(pb.StartRunRecordRequest(run=run_record(session_id=w.session.id),
                                                               holder="evil")),
    ],
    "GetRunRecord": [lambda c, w: c.GetRunRecord(pb.GetRunRecordRequest(id=w.run.id))],
    "AcquireRunLease": [lambda c, w: c.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=w.run.id, holder="evil"))],
    "RenewRunLease": [lambda c, w: c.RenewRunLease(pb.RenewRunLeaseRequest(run_id=w.run.id, holder="replica-a",
                                                                           token=w.lease.token))],
    "ReleaseRunLease": [lambda c, w: c.ReleaseRunLease(pb.ReleaseRunLeaseRequest(run_id=w.run.id, token=w.lease.token))],
    "CommitRunStep": [lambda c, w: c.CommitRunStep(pb.CommitRunStepRequest(run_id=w.run.id, lease_token=w.lease.token,
                                                                           events=[pb.StoredRunEvent(event_type="x", payload=event_payload())]))],
    "ListRunSteps": [lambda c, w: c.ListRunSteps(pb.ListRunStepsRequest(run_id=w.run.id))],
    "ListRunEvents": [lambda c, w: c.ListRunEvents(pb.ListRunEventsRequest(run_id=w.run.id))],
    "RequestRunCancel": [lambda c, w: c.RequestRunCancel(pb.RequestRunCancelRequest(id=w.run.id))],
}


async def _commit_batch_item_denied(client, world: World) -> None:
    reply = await client.CommitRunSteps(pb.CommitRunStepsRequest(commits=[pb.CommitRunStepRequest(
        run_id=world.run.id, lease_token=world.lease.token, events=[pb.StoredRunEvent(event_type="x", payload=event_payload())])]))
    assert [item.code for item in reply.results] == [grpc.StatusCode.NOT_FOUND.value[0]]
    assert SECRET not in reply.results[0].message


async def _watch_denied(client, world: World) -> None:
    await expect_code(client.WatchRunEvents(pb.WatchRunEventsRequest(run_id=world.run.id)).read(), NOT_FOUND)


async def _own_canvases_only(client, world: World) -> None:
    for show_deleted in (False, True):
        listed = await client.ListCanvases(pb.ListCanvasesRequest(page_size=100, show_deleted=show_deleted,
                                                                  filter=f'title:"{SECRET}"'))
        assert {c.id for c in listed.canvases}.isdisjoint({world.canvas.id, world.deleted.id})
    listed = await client.ListCanvases(pb.ListCanvasesRequest(page_size=100, filter='owner="alice"'))
    assert {c.id for c in listed.canvases}.isdisjoint({world.canvas.id, world.deleted.id})


async def _own_sessions_only(client, world: World) -> None:
    listed = await client.ListSessions(pb.ListSessionsRequest(page_size=100))
    assert world.session.id not in {s.id for s in listed.sessions}


async def _own_runs_only(client, world: World) -> None:
    for request in (pb.ListRunRecordsRequest(page_size=100), pb.ListRunRecordsRequest(session_id=world.session.id)):
        listed = await client.ListRunRecords(request)
        assert world.run.id not in {r.id for r in listed.runs}


async def _create_canvas_is_own(client, world: World) -> None:
    # A template is global; the canvas made from it is the caller's (another tenant's or user's request_id too).
    made = await client.CreateCanvas(pb.CreateCanvasRequest(template_id="deep_research", request_id=world.canvas.id,
                                                            canvas=pb.Canvas(title=unique_title())))
    assert made.id != world.canvas.id and made.owner_id != "alice"


async def _templates_are_global(client, world: World) -> None:
    assert (await client.GetTemplate(pb.GetTemplateRequest(id="deep_research"))).id == "deep_research"
    assert (await client.ListTemplates(pb.ListTemplatesRequest())).templates


async def _members_of_own_tenant(client, world: World) -> None:
    try:
        members = await client.ListTenantMembers(pb.ListTenantMembersRequest())
    except grpc.aio.AioRpcError as error:  # a non-member of acme may not list it (it knows its own tenant)
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        return
    assert all(m.tenant_id != "acme" for m in members.members) or "alice" in {m.user_id for m in members.members}


async def _add_member_grants_nothing_elsewhere(client, world: World) -> None:
    try:
        added = await client.AddTenantMember(pb.AddTenantMemberRequest(user_id="mallory"))
    except grpc.aio.AioRpcError as error:  # only a tenant's owner may add members
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        return
    assert added.tenant_id != "acme"


# RPC name -> check, for RPCs that name none of alice's resources (or name them per batch item / on a stream).
CHECKED: dict[str, Callable[[Any, World], Any]] = {
    "CommitRunSteps": _commit_batch_item_denied,
    "WatchRunEvents": _watch_denied,
    "ListCanvases": _own_canvases_only,
    "ListSessions": _own_sessions_only,
    "ListRunRecords": _own_runs_only,
    "CreateCanvas": _create_canvas_is_own,
    "ListTemplates": _templates_are_global,
    "GetTemplate": _templates_are_global,
    "ListTenantMembers": _members_of_own_tenant,
    "AddTenantMember": _add_member_grants_nothing_elsewhere,
}


def test_every_rpc_has_a_denial_case():
    methods = {method.name for method in SERVICE.methods}
    covered = set(DENIED) | {name for name in CHECKED if name not in DENIED}
    assert methods - covered == set(), f"RPCs without a tenancy case: {sorted(methods - covered)}"
    assert covered - methods == set(), f"cases for RPCs that do not exist: {sorted(covered - methods)}"


INTRUDERS = [
    ("mallory", pb.CANVAS_PERMISSION_TEAM),  # another tenant, even for a TEAM canvas
    ("carol", pb.CANVAS_PERMISSION_TEAM),  # same tenant, not a member
    ("bob", pb.CANVAS_PERMISSION_ME),  # a member, but the canvas is alice's own
]


@pytest.mark.parametrize("intruder,permission", INTRUDERS, ids=[i[0] for i in INTRUDERS])
async def test_every_rpc_denies_without_leaking(store, intruder, permission):
    world = await _alice_world(store, permission)
    client = getattr(store, intruder)
    for name, calls in DENIED.items():
        for index, build in enumerate(calls):
            error = await expect_code(build(client, world), NOT_FOUND)
            assert SECRET not in error.details() and "pwned" not in error.details(), (name, index)
    for name, check in CHECKED.items():
        await check(client, world)
    # Nothing of alice's changed.
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=world.canvas.id))
    assert (got.etag, got.title, got.description, got.permission) == (
        world.canvas.etag, world.canvas.title, world.canvas.description, world.canvas.permission)
    assert got.published_revision_id == "" and got.head_revision_id == world.canvas.head_revision_id
    still_deleted = await store.alice.GetCanvas(pb.GetCanvasRequest(id=world.deleted.id))
    assert still_deleted.HasField("delete_time") and still_deleted.etag == world.deleted.etag
    revisions = await store.alice.ListRevisions(pb.ListRevisionsRequest(canvas_id=world.canvas.id))
    assert len(revisions.revisions) == 2
    session = await store.alice.GetSession(pb.GetSessionRequest(id=world.session.id))
    assert session.etag == world.session.etag and session.conversation_turns == 0
    sessions = await store.alice.ListSessions(pb.ListSessionsRequest(canvas_id=world.canvas.id))
    assert [s.id for s in sessions.sessions] == [world.session.id]
    run = await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=world.run.id))
    assert not run.cancel_requested and run.last_seq == 0
    assert (run.lease.holder, run.lease.token) == ("replica-a", world.lease.token)
    assert list((await store.alice.ListRunSteps(pb.ListRunStepsRequest(run_id=world.run.id))).steps) == []
