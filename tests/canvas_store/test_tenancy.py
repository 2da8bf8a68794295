"""Tenancy: every RPC denies another tenant (AIP-211), and the in-tenant rules for TEAM canvases."""

from __future__ import annotations

import grpc
from agentcanvas.v1 import canvas_store_pb2 as pb
from agentcanvas.v1 import common_pb2
from google.protobuf import field_mask_pb2

from services.common.structs import to_struct
from tests.canvas_store.conftest import MINIMAL_DSL, create_canvas, expect_code, run_record

NOT_FOUND = grpc.StatusCode.NOT_FOUND


async def _alice_world(store):
    canvas = await create_canvas(store.alice, permission=pb.CANVAS_PERMISSION_TEAM)
    session = await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))
    run = await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=run_record(canvas_id=canvas.id)))
    lease = await store.service.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="replica-a"))
    return canvas, session, run, lease


async def test_another_tenant_is_denied_on_every_rpc(store):
    canvas, session, run, lease = await _alice_world(store)
    m = store.mallory
    update = pb.Canvas(id=canvas.id, title="pwned", etag=canvas.etag)
    denied = {
        "GetCanvas": m.GetCanvas(pb.GetCanvasRequest(id=canvas.id)),
        "UpdateCanvas": m.UpdateCanvas(pb.UpdateCanvasRequest(canvas=update, update_mask=field_mask_pb2.FieldMask(paths=["title"]))),
        "DeleteCanvas": m.DeleteCanvas(pb.DeleteCanvasRequest(id=canvas.id)),
        "ListRevisions": m.ListRevisions(pb.ListRevisionsRequest(canvas_id=canvas.id)),
        "GetRevision": m.GetRevision(pb.GetRevisionRequest(canvas_id=canvas.id, revision_id="latest")),
        "PublishCanvas": m.PublishCanvas(pb.PublishCanvasRequest(canvas_id=canvas.id)),
        "RollbackCanvas": m.RollbackCanvas(pb.RollbackCanvasRequest(canvas_id=canvas.id, revision_id=canvas.head_revision_id,
                                                                    etag=canvas.etag)),
        "CreateSession": m.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id)),
        "GetSession": m.GetSession(pb.GetSessionRequest(id=session.id)),
        "ListSessions": m.ListSessions(pb.ListSessionsRequest(canvas_id=canvas.id)),
        "DeleteSession": m.DeleteSession(pb.DeleteSessionRequest(id=session.id)),
        "AppendSessionTurn": m.AppendSessionTurn(pb.AppendSessionTurnRequest(
            id=session.id, messages=[to_struct({"role": "user", "content": "x"})])),
        "CreateRunRecord": m.CreateRunRecord(pb.CreateRunRecordRequest(run=run_record(canvas_id=canvas.id))),
        "GetRunRecord": m.GetRunRecord(pb.GetRunRecordRequest(id=run.id)),
        "AcquireRunLease": m.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="evil")),
        "RenewRunLease": m.RenewRunLease(pb.RenewRunLeaseRequest(run_id=run.id, holder="replica-a", token=lease.token)),
        "ReleaseRunLease": m.ReleaseRunLease(pb.ReleaseRunLeaseRequest(run_id=run.id, token=lease.token)),
        "CommitRunStep": m.CommitRunStep(pb.CommitRunStepRequest(run_id=run.id, lease_token=lease.token)),
        "ListRunSteps": m.ListRunSteps(pb.ListRunStepsRequest(run_id=run.id)),
        "ListRunEvents": m.ListRunEvents(pb.ListRunEventsRequest(run_id=run.id)),
        "RequestRunCancel": m.RequestRunCancel(pb.RequestRunCancelRequest(id=run.id)),
    }
    for name, call in denied.items():
        error = await expect_code(call, NOT_FOUND)
        assert "pwned" not in error.details(), name
    stream = m.WatchRunEvents(pb.WatchRunEventsRequest(run_id=run.id))
    await expect_code(stream.read(), NOT_FOUND)
    # Collection RPCs answer, but only with the caller's own tenant.
    assert [c.id for c in (await m.ListCanvases(pb.ListCanvasesRequest())).canvases] == []
    assert list((await m.ListSessions(pb.ListSessionsRequest())).sessions) == []
    assert list((await m.ListRunRecords(pb.ListRunRecordsRequest())).runs) == []
    members = await m.ListTenantMembers(pb.ListTenantMembersRequest())
    assert {(x.tenant_id, x.user_id) for x in members.members} == {("evil", "mallory")}
    added = await m.AddTenantMember(pb.AddTenantMemberRequest(user_id="alice"))
    assert added.tenant_id == "evil"  # adding "alice" to evil grants nothing in acme
    await expect_code(m.GetCanvas(pb.GetCanvasRequest(id=canvas.id)), NOT_FOUND)
    # Templates are global and readable by everyone.
    assert (await m.GetTemplate(pb.GetTemplateRequest(id="deep_research"))).id == "deep_research"
    # Nothing changed for alice.
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    assert got.etag == canvas.etag
    assert (await store.alice.GetSession(pb.GetSessionRequest(id=session.id))).conversation_turns == 0
    assert not (await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=run.id))).cancel_requested


async def test_team_rules_inside_a_tenant(store):
    team = await create_canvas(store.alice, permission=pb.CANVAS_PERMISSION_TEAM)
    private = await create_canvas(store.alice)
    # bob is a member: reads, runs and edits TEAM canvases...
    assert (await store.bob.GetCanvas(pb.GetCanvasRequest(id=team.id))).id == team.id
    edited = await store.bob.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=team.id, description="by bob"), update_mask=field_mask_pb2.FieldMask(paths=["description"])))
    await store.bob.CreateSession(pb.CreateSessionRequest(canvas_id=team.id))
    # ...but may not delete it or change its permission (PERMISSION_DENIED: he can see it).
    await expect_code(store.bob.DeleteCanvas(pb.DeleteCanvasRequest(id=team.id)), grpc.StatusCode.PERMISSION_DENIED)
    await expect_code(store.bob.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=team.id, permission=pb.CANVAS_PERMISSION_ME, etag=edited.etag),
        update_mask=field_mask_pb2.FieldMask(paths=["permission"]))), grpc.StatusCode.PERMISSION_DENIED)
    await expect_code(store.bob.PublishCanvas(pb.PublishCanvasRequest(canvas_id=team.id)),
                      grpc.StatusCode.PERMISSION_DENIED)
    await expect_code(store.bob.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=team.id, release=True), update_mask=field_mask_pb2.FieldMask(paths=["release"]))),
        grpc.StatusCode.PERMISSION_DENIED)
    # ME canvases stay invisible to him; carol (not a member) sees neither.
    await expect_code(store.bob.GetCanvas(pb.GetCanvasRequest(id=private.id)), NOT_FOUND)
    await expect_code(store.carol.GetCanvas(pb.GetCanvasRequest(id=team.id)), NOT_FOUND)
    # Membership management is owner-only; listing is members-only.
    await expect_code(store.bob.AddTenantMember(pb.AddTenantMemberRequest(user_id="carol")),
                      grpc.StatusCode.PERMISSION_DENIED)
    await expect_code(store.carol.ListTenantMembers(pb.ListTenantMembersRequest()), grpc.StatusCode.PERMISSION_DENIED)
    members = await store.bob.ListTenantMembers(pb.ListTenantMembersRequest())
    roles = {x.user_id: x.role for x in members.members}
    assert roles["alice"] == "owner" and roles["bob"] == "member" and "carol" not in roles
    # The owner may change the permission; then bob loses access.
    current = await store.alice.GetCanvas(pb.GetCanvasRequest(id=team.id))
    await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=team.id, permission=pb.CANVAS_PERMISSION_ME, etag=current.etag),
        update_mask=field_mask_pb2.FieldMask(paths=["permission"])))
    await expect_code(store.bob.GetCanvas(pb.GetCanvasRequest(id=team.id)), NOT_FOUND)


async def test_runs_belong_to_their_creator_and_tenant(store):
    canvas = await create_canvas(store.bob, dsl=MINIMAL_DSL)
    run = await store.bob.CreateRunRecord(pb.CreateRunRecordRequest(run=run_record(canvas_id=canvas.id)))
    assert run.tenant_id == "acme" and run.creator_id == "bob" and run.status == common_pb2.RUN_STATUS_PENDING
    await expect_code(store.carol.GetRunRecord(pb.GetRunRecordRequest(id=run.id)), NOT_FOUND)
    assert (await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=run.id))).id == run.id  # tenant owner
    assert (await store.service.GetRunRecord(pb.GetRunRecordRequest(id=run.id))).id == run.id  # orchestrator
    # The owner may stop bob's run but not execute it: no lease, commit or release in someone else's run.
    for call in (store.alice.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="alice")),
                 store.alice.CommitRunStep(pb.CommitRunStepRequest(run_id=run.id, lease_token=1)),
                 store.alice.CommitRunSteps(pb.CommitRunStepsRequest(commits=[pb.CommitRunStepRequest(
                     run_id=run.id, lease_token=1)])),
                 store.alice.ReleaseRunLease(pb.ReleaseRunLeaseRequest(run_id=run.id, token=1))):
        try:
            reply = await call
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.PERMISSION_DENIED, error.details()
        else:  # the batch reports per item
            assert reply.results[0].code == grpc.StatusCode.PERMISSION_DENIED.value[0], reply
    lease = await store.bob.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="bob"))
    assert lease.token == 1  # nothing of the owner's attempts took hold
    assert (await store.alice.RequestRunCancel(pb.RequestRunCancelRequest(id=run.id))).cancel_requested


def test_policy_decides_not_found_versus_permission_denied():
    import pytest as _pytest

    from services.canvas_store.core.policy import Action, Caller, Kind, Target, authorize
    from services.canvas_store.core.types import Permission, TenantRole
    from services.common.errors import NotFoundError, PermissionDeniedError

    team = Target(Kind.CANVAS, "acme", "c1", owner_id="alice", permission=Permission.TEAM)
    private = Target(Kind.CANVAS, "acme", "c2", owner_id="alice", permission=Permission.ME)
    member = Caller("acme", "bob", role_lookup=lambda: TenantRole.MEMBER)
    outsider = Caller("acme", "carol", role_lookup=lambda: None)
    stranger = Caller("evil", "mallory", role_lookup=lambda: TenantRole.OWNER)
    owner = Caller("acme", "alice", role_lookup=lambda: TenantRole.OWNER)
    for action in Action:
        if action in (Action.READ_TENANT, Action.MANAGE_TENANT, Action.READ_RUN, Action.WRITE_RUN):
            continue
        with _pytest.raises(NotFoundError):
            authorize(stranger, action, team)
        with _pytest.raises(NotFoundError):
            authorize(outsider, action, team)
        with _pytest.raises(NotFoundError):
            authorize(member, action, private)
        authorize(owner, action, team)
    for action in (Action.READ, Action.RUN, Action.EDIT):
        authorize(member, action, team)
    with _pytest.raises(PermissionDeniedError):
        authorize(member, Action.MANAGE, team)
    run = Target(Kind.RUN, "acme", "r1", creator_id="bob")
    authorize(Caller("ops", "orchestrator", is_service=True), Action.WRITE_RUN, run)
    with _pytest.raises(NotFoundError):
        authorize(stranger, Action.READ_RUN, run)
