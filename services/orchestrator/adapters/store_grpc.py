"""RunStore over the canvas_store service's run-state and session RPCs. One channel per process.

Inside an RPC the caller's token is forwarded; a background takeover authenticates with the
orchestrator's own service token plus the on-behalf-of header (core.ports.acting_as).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
from agentcanvas.v1 import canvas_store_pb2, canvas_store_pb2_grpc, common_pb2, orchestrator_pb2

from services.common import status
from services.common.clients import call_timeout
from services.common.structs import from_struct, to_struct
from services.orchestrator.adapters.event_proto import from_proto, to_proto
from services.orchestrator.adapters.peer import PeerClient, TokenSource
from services.orchestrator.core.events import Event
from services.orchestrator.core.ports import (
    CommitResult, Lease, RunError, RunRecord, RunStatus, Session, Step, Usage,
)


def _usage_to_proto(usage: Usage) -> common_pb2.TokenUsage:
    return common_pb2.TokenUsage(**usage.to_dict())


def _record_from_proto(proto: canvas_store_pb2.RunRecord) -> RunRecord:
    u = proto.usage
    error = RunError(proto.error.reason, proto.error.message, proto.error.component_id) if proto.HasField("error") and proto.error.reason else None
    return RunRecord(
        id=proto.id, spec=from_struct(proto.spec), canvas_id=proto.canvas_id, revision_id=proto.revision_id,
        session_id=proto.session_id, status=RunStatus(proto.status), outputs=from_struct(proto.outputs), error=error,
        usage=Usage(u.prompt_tokens, u.completion_tokens, u.reasoning_tokens, u.cached_tokens, u.total_tokens, u.calls, u.cost_usd),
        last_seq=proto.last_seq, cancel_requested=proto.cancel_requested, tenant_id=proto.tenant_id,
        creator_id=proto.creator_id, create_time_ms=proto.create_time.ToMilliseconds() if proto.HasField("create_time") else 0,
        update_time_ms=proto.update_time.ToMilliseconds() if proto.HasField("update_time") else 0,
    )


def _lease_from_proto(proto: canvas_store_pb2.RunLease) -> Lease:
    return Lease(proto.run_id, proto.holder, proto.token, proto.expire_time.ToMilliseconds(), proto.cancel_requested)


def _session_from_proto(proto: canvas_store_pb2.Session) -> Session:
    return Session(id=proto.id, canvas_id=proto.canvas_id, revision_id=proto.revision_id, user_id=proto.user_id,
                   conversation_turns=proto.conversation_turns, history=[from_struct(h) for h in proto.history],
                   state=from_struct(proto.state), etag=proto.etag)


def _stored_to_event(stored: canvas_store_pb2.StoredRunEvent) -> Event:
    proto = orchestrator_pb2.RunEvent()
    proto.ParseFromString(stored.payload)
    event = from_proto(proto)
    event.seq = stored.seq  # the store's seq is authoritative
    return event


class GrpcRunStore(PeerClient):
    stub_class = canvas_store_pb2_grpc.CanvasStoreStub

    def __init__(self, target: str, *, own_token: TokenSource = None, timeout_s: float = 10.0):
        super().__init__(target, own_token=own_token, timeout_s=timeout_s)

    async def _call(self, method: str, request: Any) -> Any:
        try:
            return await getattr(self._stub, method)(request, metadata=self._metadata(), timeout=call_timeout(self._timeout))
        except grpc.aio.AioRpcError as exc:
            raise status.from_rpc_error(exc) from None

    async def create_run(self, record: RunRecord, request_id: str = "") -> RunRecord:
        proto = canvas_store_pb2.RunRecord(id=record.id, canvas_id=record.canvas_id, revision_id=record.revision_id,
                                           session_id=record.session_id, spec=to_struct(record.spec))
        created = await self._call("CreateRunRecord", canvas_store_pb2.CreateRunRecordRequest(run=proto, request_id=request_id))
        # The reply echoes the spec (the DSL and all): when it is the one sent, keep our dict rather
        # than decoding it again (the run of an earlier request with the same request_id differs).
        same_spec = created.spec == proto.spec
        if same_spec:
            created.ClearField("spec")
        result = _record_from_proto(created)
        if same_spec:
            result.spec = record.spec
        return result

    async def get_run(self, run_id: str) -> RunRecord:
        return _record_from_proto(await self._call("GetRunRecord", canvas_store_pb2.GetRunRecordRequest(id=run_id)))

    async def list_orphaned_runs(self, limit: int = 20) -> list[RunRecord]:
        request = canvas_store_pb2.ListRunRecordsRequest(
            statuses=[common_pb2.RUN_STATUS_PENDING, common_pb2.RUN_STATUS_RUNNING], lease_expired_only=True, page_size=limit)
        reply = await self._call("ListRunRecords", request)
        return [_record_from_proto(r) for r in reply.runs]

    async def acquire_lease(self, run_id: str, holder: str, ttl_ms: int) -> Lease:
        reply = await self._call("AcquireRunLease", canvas_store_pb2.AcquireRunLeaseRequest(run_id=run_id, holder=holder, ttl_ms=ttl_ms))
        return _lease_from_proto(reply)

    async def renew_lease(self, run_id: str, holder: str, token: int, ttl_ms: int) -> Lease:
        reply = await self._call("RenewRunLease", canvas_store_pb2.RenewRunLeaseRequest(run_id=run_id, holder=holder, token=token, ttl_ms=ttl_ms))
        return _lease_from_proto(reply)

    async def release_lease(self, run_id: str, token: int) -> None:
        await self._call("ReleaseRunLease", canvas_store_pb2.ReleaseRunLeaseRequest(run_id=run_id, token=token))

    async def commit(self, run_id: str, lease_token: int, steps: Sequence[Step], events: Sequence[Event], *,
                     status: RunStatus = RunStatus.UNSPECIFIED, outputs: dict[str, Any] | None = None,
                     error: RunError | None = None, usage: Usage | None = None) -> CommitResult:
        request = canvas_store_pb2.CommitRunStepRequest(run_id=run_id, lease_token=lease_token, status=int(status))
        for step in steps:
            request.steps.add(node_id=step.node_id, attempt=step.attempt, state=to_struct(step.state))
        for event in events:
            request.events.add(run_id=run_id, event_type=event.kind, terminal=event.terminal,
                               payload=to_proto(event, run_id).SerializeToString())
        if outputs is not None:
            request.outputs.CopyFrom(to_struct(outputs))
        if error is not None:
            request.error.CopyFrom(common_pb2.ErrorDetail(reason=error.reason, message=error.message, component_id=error.component_id))
        if usage is not None:
            request.usage.CopyFrom(_usage_to_proto(usage))
        reply = await self._call("CommitRunStep", request)
        for offset, event in enumerate(events):
            event.seq = reply.first_seq + offset
        return CommitResult(reply.first_seq, reply.last_seq, reply.cancel_requested)

    async def list_steps(self, run_id: str, after_step: int = 0) -> list[Step]:
        reply = await self._call("ListRunSteps", canvas_store_pb2.ListRunStepsRequest(run_id=run_id, after_step=after_step))
        return [Step(s.node_id, from_struct(s.state), s.attempt, s.step_index) for s in reply.steps]

    async def list_events(self, run_id: str, after_seq: int = 0, limit: int = 500) -> list[Event]:
        reply = await self._call("ListRunEvents", canvas_store_pb2.ListRunEventsRequest(run_id=run_id, after_seq=after_seq, page_size=limit))
        return [_stored_to_event(e) for e in reply.events]

    async def watch_events(self, run_id: str, after_seq: int = 0) -> AsyncIterator[Event]:
        call = self._stub.WatchRunEvents(canvas_store_pb2.WatchRunEventsRequest(run_id=run_id, after_seq=after_seq),
                                         metadata=self._metadata())
        try:
            async for stored in call:
                event = _stored_to_event(stored)
                yield event
                if stored.terminal or event.terminal:
                    return
        except grpc.aio.AioRpcError as exc:
            raise status.from_rpc_error(exc) from None
        finally:
            call.cancel()

    async def request_cancel(self, run_id: str) -> RunRecord:
        return _record_from_proto(await self._call("RequestRunCancel", canvas_store_pb2.RequestRunCancelRequest(id=run_id)))

    async def get_session(self, session_id: str) -> Session:
        return _session_from_proto(await self._call("GetSession", canvas_store_pb2.GetSessionRequest(id=session_id)))

    async def append_session_turn(self, session_id: str, messages: list[dict[str, Any]], state: dict[str, Any],
                                  etag: str = "") -> Session:
        request = canvas_store_pb2.AppendSessionTurnRequest(id=session_id, messages=[to_struct(m) for m in messages],
                                                            state=to_struct(state), etag=etag)
        return _session_from_proto(await self._call("AppendSessionTurn", request))

    async def get_canvas_dsl(self, canvas_id: str, revision_id: str = "") -> tuple[dict[str, Any], str]:
        canvas = await self._call("GetCanvas", canvas_store_pb2.GetCanvasRequest(id=canvas_id))
        if revision_id in ("", "latest", "head"):
            return from_struct(canvas.dsl), canvas.head_revision_id
        if revision_id == "published":
            revision_id = canvas.published_revision_id
        revision = await self._call("GetRevision", canvas_store_pb2.GetRevisionRequest(canvas_id=canvas_id, revision_id=revision_id))
        return from_struct(revision.dsl), revision.id
