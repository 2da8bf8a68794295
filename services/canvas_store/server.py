"""Thin gRPC adapter: proto -> core types, call the core on the DB pool, core -> proto. No SQL, no rules.

Every RPC first passes `request_guards.check_request` (NUL characters in text). NaN and infinities in
Structs are refused by the conversions (`from_struct(struct, field)`), naming the path.
"""

from __future__ import annotations

import logging

from agentcanvas.v1 import canvas_store_pb2 as pb
from agentcanvas.v1 import canvas_store_pb2_grpc, orchestrator_pb2
from google.protobuf.message import DecodeError

from services.canvas_store import converters as cv
from services.canvas_store.app import StoreApp
from services.canvas_store.core.canvases import is_quick_mask
from services.canvas_store.core.runs import MAX_EVENT_PAYLOAD, watch_events
from services.canvas_store.core.types import CommitResult, RunCommit
from services.canvas_store.request_guards import check_request, guard_every_rpc
from services.common import status
from services.common.errors import AgentCanvasError, InvalidArgumentError
from services.common.structs import from_struct

logger = logging.getLogger(__name__)


@guard_every_rpc
class CanvasStoreServicer(canvas_store_pb2_grpc.CanvasStoreServicer):
    def __init__(self, app: StoreApp):
        self._app = app

    # ---- canvases --------------------------------------------------------------------------------

    async def CreateCanvas(self, request: pb.CreateCanvasRequest, context) -> pb.Canvas:
        data = cv.canvas_input(request.canvas)
        canvas = await self._app.call(lambda caller: self._app.canvases.create(
            caller, data, template_id=request.template_id, request_id=request.request_id,
            validate_only=request.validate_only))
        return cv.canvas_out(canvas)

    async def GetCanvas(self, request: pb.GetCanvasRequest, context) -> pb.Canvas:
        return cv.canvas_out(await self._app.call(self._app.canvases.get, request.id, loop_first=True))

    async def UpdateCanvas(self, request: pb.UpdateCanvasRequest, context) -> pb.Canvas:
        data = cv.canvas_input(request.canvas)
        paths = list(request.update_mask.paths)
        # Loop first only for masks the single-statement path serves; any other change would start over.
        canvas = await self._app.call(self._app.canvases.update, request.canvas.id, data, paths,
                                      validate_only=request.validate_only,
                                      loop_first=is_quick_mask(paths))
        return cv.canvas_out(canvas)

    async def DeleteCanvas(self, request: pb.DeleteCanvasRequest, context) -> pb.DeleteCanvasResponse:
        canvas = await self._app.call(self._app.canvases.delete, request.id, request.etag)
        return pb.DeleteCanvasResponse(canvas=cv.canvas_out(canvas))

    async def UndeleteCanvas(self, request: pb.UndeleteCanvasRequest, context) -> pb.Canvas:
        return cv.canvas_out(await self._app.call(self._app.canvases.undelete, request.id, request.etag))

    async def ListCanvases(self, request: pb.ListCanvasesRequest, context) -> pb.ListCanvasesResponse:
        page = await self._app.call(lambda caller: self._app.canvases.list(
            caller, page_size=request.page_size, page_token=request.page_token, filter_text=request.filter,
            order_by=request.order_by, show_deleted=request.show_deleted))
        return pb.ListCanvasesResponse(canvases=[cv.canvas_out(c) for c in page.items],
                                       next_page_token=page.next_page_token)

    # ---- revisions -------------------------------------------------------------------------------

    async def ListRevisions(self, request: pb.ListRevisionsRequest, context) -> pb.ListRevisionsResponse:
        page = await self._app.call(lambda caller: self._app.canvases.list_revisions(
            caller, request.canvas_id, page_size=request.page_size, page_token=request.page_token))
        return pb.ListRevisionsResponse(revisions=[cv.revision_out(r) for r in page.items],
                                        next_page_token=page.next_page_token)

    async def GetRevision(self, request: pb.GetRevisionRequest, context) -> pb.CanvasRevision:
        return cv.revision_out(await self._app.call(self._app.canvases.get_revision, request.canvas_id,
                                                    request.revision_id))

    async def PublishCanvas(self, request: pb.PublishCanvasRequest, context) -> pb.CanvasRevision:
        return cv.revision_out(await self._app.call(self._app.canvases.publish, request.canvas_id,
                                                    request.revision_id, request.etag))

    async def RollbackCanvas(self, request: pb.RollbackCanvasRequest, context) -> pb.CanvasRevision:
        return cv.revision_out(await self._app.call(self._app.canvases.rollback, request.canvas_id,
                                                    request.revision_id, request.etag))

    # ---- templates -------------------------------------------------------------------------------

    async def ListTemplates(self, request: pb.ListTemplatesRequest, context) -> pb.ListTemplatesResponse:
        page = await self._app.call(lambda _caller: self._app.canvases.list_templates(
            page_size=request.page_size, page_token=request.page_token))
        return pb.ListTemplatesResponse(templates=[cv.template_out(t) for t in page.items],
                                        next_page_token=page.next_page_token)

    async def GetTemplate(self, request: pb.GetTemplateRequest, context) -> pb.CanvasTemplate:
        return cv.template_out(await self._app.call(lambda _caller: self._app.canvases.get_template(request.id)))

    # ---- sessions and tenancy --------------------------------------------------------------------

    async def CreateSession(self, request: pb.CreateSessionRequest, context) -> pb.Session:
        return cv.session_out(await self._app.call(self._app.sessions.create, request.canvas_id, request.revision_id,
                                                   request.user_id))

    async def GetSession(self, request: pb.GetSessionRequest, context) -> pb.Session:
        return cv.session_out(await self._app.call(self._app.sessions.get, request.id))

    async def ListSessions(self, request: pb.ListSessionsRequest, context) -> pb.ListSessionsResponse:
        page = await self._app.call(lambda caller: self._app.sessions.list(
            caller, canvas_id=request.canvas_id, user_id=request.user_id, page_size=request.page_size,
            page_token=request.page_token))
        return pb.ListSessionsResponse(sessions=[cv.session_out(s) for s in page.items],
                                       next_page_token=page.next_page_token)

    async def DeleteSession(self, request: pb.DeleteSessionRequest, context) -> pb.DeleteSessionResponse:
        await self._app.call(self._app.sessions.delete, request.id)
        return pb.DeleteSessionResponse()

    async def AppendSessionTurn(self, request: pb.AppendSessionTurnRequest, context) -> pb.Session:
        messages = [from_struct(m, f"messages[{i}]") for i, m in enumerate(request.messages)]
        state = from_struct(request.state, "state") if request.HasField("state") else None
        return cv.session_out(await self._app.call(self._app.sessions.append_turn, request.id, messages, state,
                                                   request.etag))

    async def AddTenantMember(self, request: pb.AddTenantMemberRequest, context) -> pb.TenantMember:
        return cv.member_out(await self._app.call(self._app.sessions.add_member, request.user_id))

    async def ListTenantMembers(self, request: pb.ListTenantMembersRequest, context) -> pb.ListTenantMembersResponse:
        members = await self._app.call(self._app.sessions.list_members)
        return pb.ListTenantMembersResponse(members=[cv.member_out(m) for m in members])

    # ---- durable run state -----------------------------------------------------------------------

    async def CreateRunRecord(self, request: pb.CreateRunRecordRequest, context) -> pb.RunRecord:
        run = cv.run_in(request.run)
        return cv.run_out(await self._app.call(self._app.runs.create, run, request.request_id))

    async def StartRunRecord(self, request: pb.StartRunRecordRequest, context) -> pb.StartRunRecordResponse:
        run = cv.run_in(request.run)
        sent_spec = run.spec
        record, lease = await self._app.call(self._app.runs.start, run, request.request_id, request.holder,
                                             request.ttl_ms)
        if request.omit_spec and (record.spec is sent_spec or record.spec == sent_spec):
            record.spec = None  # the caller has it; a replay of a different spec still carries it
        reply = pb.StartRunRecordResponse(run=cv.run_out(record))
        if lease is not None:
            reply.lease.CopyFrom(cv.lease_out(lease))
        return reply

    async def GetRunRecord(self, request: pb.GetRunRecordRequest, context) -> pb.RunRecord:
        return cv.run_out(await self._app.call(self._app.runs.get, request.id))

    async def ListRunRecords(self, request: pb.ListRunRecordsRequest, context) -> pb.ListRunRecordsResponse:
        statuses = [cv.status_in(value, f"statuses[{i}]") for i, value in enumerate(request.statuses)]
        page = await self._app.call(lambda caller: self._app.runs.list(
            caller, statuses=[s for s in statuses if s is not None], lease_expired_only=request.lease_expired_only,
            session_id=request.session_id, page_size=request.page_size, page_token=request.page_token))
        return pb.ListRunRecordsResponse(runs=[cv.run_out(r) for r in page.items], next_page_token=page.next_page_token)

    async def AcquireRunLease(self, request: pb.AcquireRunLeaseRequest, context) -> pb.RunLease:
        return cv.lease_out(await self._app.call(self._app.runs.acquire, request.run_id, request.holder,
                                                 request.ttl_ms))

    async def RenewRunLease(self, request: pb.RenewRunLeaseRequest, context) -> pb.RunLease:
        return cv.lease_out(await self._app.call(self._app.runs.renew, request.run_id, request.holder, request.token,
                                                 request.ttl_ms))

    async def ReleaseRunLease(self, request: pb.ReleaseRunLeaseRequest, context) -> pb.ReleaseRunLeaseResponse:
        await self._app.call(self._app.runs.release, request.run_id, request.token)
        return pb.ReleaseRunLeaseResponse()

    async def CommitRunStep(self, request: pb.CommitRunStepRequest, context) -> pb.CommitRunStepResponse:
        commit = _commit_in(request)
        result = await self._app.call(self._app.runs.commit, commit)
        self._notify(commit)
        return _commit_out(result)

    async def CommitRunSteps(self, request: pb.CommitRunStepsRequest, context) -> pb.CommitRunStepsResponse:
        commits, results, pending = [], [None] * len(request.commits), []
        for index, item in enumerate(request.commits):
            try:
                check_request(item)
                commits.append(_commit_in(item))
                pending.append(index)
            except AgentCanvasError as exc:  # e.g. an unknown status value: this item only
                results[index] = exc
        if not request.commits:
            await self._app.call(self._app.runs.commit_many, [])  # INVALID_ARGUMENT naming `commits`
        if commits:
            written = await self._app.call(self._app.runs.commit_many, commits)
            for index, commit, result in zip(pending, commits, written):
                results[index] = result
                if not isinstance(result, AgentCanvasError):
                    self._notify(commit)
        reply = pb.CommitRunStepsResponse()
        for result in results:
            item = reply.results.add()
            if isinstance(result, AgentCanvasError):
                rich = status.to_rpc_status(result)
                item.code, item.message = rich.code.value[0], result.message
                item.status = dict(rich.trailing_metadata).get("grpc-status-details-bin", b"")
            else:
                item.response.CopyFrom(_commit_out(result))
        return reply

    def _notify(self, commit: RunCommit) -> None:
        if commit.events or commit.status is not None:
            self._app.notifier.notify(commit.run_id)

    async def ListRunSteps(self, request: pb.ListRunStepsRequest, context) -> pb.ListRunStepsResponse:
        steps = await self._app.call(self._app.runs.list_steps, request.run_id, request.after_step)
        return pb.ListRunStepsResponse(steps=[cv.step_out(s) for s in steps])

    async def ListRunEvents(self, request: pb.ListRunEventsRequest, context) -> pb.ListRunEventsResponse:
        events = await self._app.call(self._app.runs.list_events, request.run_id, request.after_seq, request.page_size)
        return pb.ListRunEventsResponse(events=[cv.event_out(e) for e in events])

    async def WatchRunEvents(self, request: pb.WatchRunEventsRequest, context):
        await self._app.call(self._app.runs.get_summary, request.run_id)

        async def fetch(after_seq: int):
            return await self._app.blocking(self._app.runs.events_since, request.run_id, after_seq)

        async for event in watch_events(fetch, self._app.notifier, request.run_id, request.after_seq,
                                        self._app.settings.watch_poll_interval_ms / 1000, self._app.closing):
            yield cv.event_out(event)

    async def RequestRunCancel(self, request: pb.RequestRunCancelRequest, context) -> pb.RunRecord:
        run = await self._app.call(self._app.runs.request_cancel, request.id)
        self._app.notifier.notify(request.id)
        return cv.run_out(run)


def _check_payloads(request: pb.CommitRunStepRequest) -> None:
    """Every event payload must be a serialized agentcanvas.v1.RunEvent carrying one event: the orchestrator
    decodes each one when it streams the run, and one it cannot decode would break every reader of the run.
    (A payload is at most 4 MiB; decoding one costs what the commit's own decoding cost.)"""
    for index, event in enumerate(request.events):
        if len(event.payload) > MAX_EVENT_PAYLOAD:
            continue  # refused by its size (RunService)
        try:
            decoded = orchestrator_pb2.RunEvent.FromString(event.payload)
        except DecodeError:
            raise InvalidArgumentError.for_field(
                f"events[{index}].payload", "is not a serialized agentcanvas.v1.RunEvent") from None
        if decoded.WhichOneof("event") is None:
            raise InvalidArgumentError.for_field(f"events[{index}].payload", "is a RunEvent without an event")


def _commit_in(request: pb.CommitRunStepRequest) -> RunCommit:
    _check_payloads(request)
    return RunCommit(
        run_id=request.run_id, lease_token=request.lease_token,
        steps=[cv.step_in(s, f"steps[{i}]") for i, s in enumerate(request.steps)],
        events=[cv.event_in(e) for e in request.events], status=cv.status_in(request.status, "status"),
        outputs=from_struct(request.outputs, "outputs") if request.HasField("outputs") else None,
        error=cv.error_in(request.error) if request.HasField("error") else None,
        usage=cv.usage_in(request.usage) if request.HasField("usage") else None,
    )


def _commit_out(result: CommitResult) -> pb.CommitRunStepResponse:
    return pb.CommitRunStepResponse(first_seq=result.first_seq, last_seq=result.last_seq,
                                    cancel_requested=result.cancel_requested)
