"""RunStore over the canvas_store service's run-state and session RPCs. One channel per process.

Inside an RPC the caller's token is forwarded; a background takeover authenticates with the
orchestrator's own service token plus the on-behalf-of header (core.ports.acting_as).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from agentcanvas.v1 import canvas_store_pb2, canvas_store_pb2_grpc, common_pb2, orchestrator_pb2

from services.common import status
from services.common.errors import AbortedError, FailedPreconditionError
from services.common.clients import POLL_HEADER, call_timeout
from services.common.lru import LRU
from services.common.json_text import parse_object, sorted_keys
from services.common.structs import from_struct, to_struct
from services.orchestrator.adapters.key_order import key_order, with_key_order
from services.orchestrator.adapters.event_proto import from_proto, to_proto
from services.orchestrator.adapters.peer import PeerClient, TokenSource
from services.orchestrator.core.events import EVENT_UNREADABLE, Event
from services.orchestrator.core.ports import (
    CommitResult, Lease, RunError, RunRecord, RunStatus, Session, Step, Usage,
)


DSL_STRUCTS = 128  # as many as the orchestrator keeps loaded canvases
DSL_KEYS = "dsl_keys"
"""Spec key (this adapter's own, never seen by the core): the DSL's keys in document order, because the
Struct that carries the spec does not keep them (adapters/key_order.py)."""


def _spec_from_proto(proto: Any) -> dict[str, Any]:
    spec = from_struct(proto)
    keys = spec.pop(DSL_KEYS, None)
    if keys is not None and isinstance(spec.get("dsl"), dict):
        spec["dsl"] = with_key_order(spec["dsl"], keys)
    return spec


def _usage_to_proto(usage: Usage) -> common_pb2.TokenUsage:
    return common_pb2.TokenUsage(**usage.to_dict())


def _record_from_proto(proto: canvas_store_pb2.RunRecord) -> RunRecord:
    u = proto.usage
    error = RunError(proto.error.reason, proto.error.message, proto.error.component_id) if proto.HasField("error") and proto.error.reason else None
    return RunRecord(
        id=proto.id, spec=_spec_from_proto(proto.spec), canvas_id=proto.canvas_id, revision_id=proto.revision_id,
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
    try:
        proto.ParseFromString(stored.payload)
    except DecodeError:
        proto.Clear()
    if proto.WhichOneof("event") is None:
        # Corrupt in storage (the store refuses such payloads on commit): this seq is lost, the rest of the
        # run's log is not. Readers get a typed placeholder in its place instead of a broken stream.
        return Event(EVENT_UNREADABLE, {"error": {"reason": "DATA_LOSS", "message": (
            f"event {stored.seq} of run {stored.run_id} cannot be decoded: its stored payload is corrupt")}},
            seq=stored.seq)
    event = from_proto(proto)
    event.seq = stored.seq  # the store's seq is authoritative
    return event


def _item_error(result: canvas_store_pb2.CommitRunStepResult) -> Exception:
    """The domain error of one failed CommitRunSteps item (its status carries the same details as a
    failed call's trailers, so the one translation in services.common.status applies)."""
    code = next((c for c in grpc.StatusCode if c.value[0] == result.code), grpc.StatusCode.UNKNOWN)
    trailers = grpc.aio.Metadata(("grpc-status-details-bin", result.status)) if result.status else grpc.aio.Metadata()
    return status.from_rpc_error(grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailers, details=result.message))


_IDENTITY_KEYS = ("authorization", "x-agentcanvas-on-behalf-of")


@dataclass
class _CommitLane:
    """Commits sent under one identity: at most one commit call in flight; what queues meanwhile
    goes out together as one CommitRunSteps when it returns."""

    key: tuple[tuple[str, str], ...]
    busy: bool = False
    queue: list[tuple[canvas_store_pb2.CommitRunStepRequest, asyncio.Future]] = field(default_factory=list)
    task: asyncio.Task | None = None


class GrpcRunStore(PeerClient):
    stub_class = canvas_store_pb2_grpc.CanvasStoreStub

    def __init__(self, target: str, *, own_token: TokenSource = None, timeout_s: float = 10.0):
        super().__init__(target, own_token=own_token, timeout_s=timeout_s)
        # False once the store answered UNIMPLEMENTED (an older store): the single-purpose RPCs are used.
        self._has_start = True
        self._has_batch = True
        self._lanes: dict[tuple[tuple[str, str], ...], _CommitLane] = {}
        self.calls: dict[str, int] = {}  # RPCs sent by method (for benchmarks and tests)
        # The DSL's Struct by the identity of the DSL dict: runs of one inline canvas share its
        # loaded DSL (core/orchestrator.py, read-only once loaded), so it is encoded once, not per run.
        # Each entry holds its dict, which keeps the id from being reused while it is cached.
        self._dsl_structs: LRU[int, tuple[dict, Any]] = LRU(DSL_STRUCTS)

    def _spec_struct(self, spec: dict[str, Any]) -> Any:
        dsl = spec.get("dsl")
        if not isinstance(dsl, dict):
            return to_struct(spec)
        entry = self._dsl_structs.hit(id(dsl))
        if entry is None or entry[0] is not dsl:
            entry = self._dsl_structs.keep(id(dsl), (dsl, to_struct(dsl), to_struct({DSL_KEYS: key_order(dsl)})))
        struct = to_struct({k: v for k, v in spec.items() if k != "dsl"})
        struct.fields["dsl"].struct_value.CopyFrom(entry[1])
        struct.fields[DSL_KEYS].CopyFrom(entry[2].fields[DSL_KEYS])
        return struct

    async def _call(self, method: str, request: Any, metadata: Any = None, *, newer: bool = False) -> Any:
        """One store RPC, its failure as a domain error. `newer`: an RPC an older store may lack, None
        when it answers UNIMPLEMENTED."""
        self.calls[method] = self.calls.get(method, 0) + 1
        try:
            return await getattr(self._stub, method)(request, metadata=metadata or self._metadata(),
                                                     timeout=call_timeout(self._timeout))
        except grpc.aio.AioRpcError as exc:
            if newer and exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                return None
            raise status.from_rpc_error(exc) from None

    async def start_run(self, record: RunRecord, request_id: str, holder: str, ttl_ms: int) -> tuple[RunRecord, Lease | None]:
        if self._has_start:
            proto = canvas_store_pb2.RunRecord(canvas_id=record.canvas_id, revision_id=record.revision_id,
                                               session_id=record.session_id, spec=self._spec_struct(record.spec))
            reply = await self._call("StartRunRecord", canvas_store_pb2.StartRunRecordRequest(
                run=proto, request_id=request_id, holder=holder, ttl_ms=ttl_ms, omit_spec=True), newer=True)
            if reply is not None:
                result = _record_from_proto(reply.run)
                if not reply.run.HasField("spec"):
                    result.spec = record.spec  # omitted because it is the one we sent
                return result, _lease_from_proto(reply.lease) if reply.HasField("lease") else None
            self._has_start = False
        created = await self.create_run(record, request_id)
        if created.status != RunStatus.PENDING:
            return created, None  # a replay of a run already under way: it is taken over, not started
        try:
            return created, await self.acquire_lease(created.id, holder, ttl_ms)
        except (AbortedError, FailedPreconditionError):
            return created, None

    async def create_run(self, record: RunRecord, request_id: str = "") -> RunRecord:
        proto = canvas_store_pb2.RunRecord(id=record.id, canvas_id=record.canvas_id, revision_id=record.revision_id,
                                           session_id=record.session_id, spec=self._spec_struct(record.spec))
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
        # The takeover scan runs every few seconds on every replica: marked as a poll, the store gives it
        # no span and no INFO line (services.common.clients.POLL_HEADER).
        reply = await self._call("ListRunRecords", request, [*self._metadata(), (POLL_HEADER, "1")])
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
        reply = await self._commit_coalesced(request)
        for offset, event in enumerate(events):
            event.seq = reply.first_seq + offset
        return CommitResult(reply.first_seq, reply.last_seq, reply.cancel_requested)

    async def _commit_coalesced(self, request: canvas_store_pb2.CommitRunStepRequest) -> canvas_store_pb2.CommitRunStepResponse:
        """Send at once when no commit of this identity is in flight; else wait for it and go out with
        everything else that queued meanwhile, as one CommitRunSteps (one store transaction)."""
        metadata = self._metadata()
        # Lanes are per identity only: the store authorises a batch as one caller. Per-run metadata
        # (traceparent, x-request-id) goes with a commit sent alone, not with a batch of many runs.
        identity = [(k, v) for k, v in metadata if k in _IDENTITY_KEYS]
        key = tuple(identity)
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _CommitLane(key)
        if not lane.busy:
            lane.busy = True
            try:
                return await self._call("CommitRunStep", request, metadata)
            finally:
                self._next_batch(lane, identity)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        lane.queue.append((request, future))
        return await future

    def _next_batch(self, lane: _CommitLane, metadata: list[tuple[str, str]]) -> None:
        if not lane.queue:
            lane.busy = False
            self._lanes.pop(lane.key, None)  # idle: a later commit starts a fresh lane
            return
        batch, lane.queue = lane.queue, []
        lane.task = asyncio.get_running_loop().create_task(self._send_batch(lane, batch, metadata))

    async def _send_batch(self, lane: _CommitLane, batch: list[tuple[Any, asyncio.Future]],
                          metadata: list[tuple[str, str]]) -> None:
        try:
            replies: list[Any] = []
            if len(batch) > 1 and self._has_batch:
                reply = await self._call("CommitRunSteps", canvas_store_pb2.CommitRunStepsRequest(
                    commits=[request for request, _ in batch]), metadata, newer=True)
                if reply is None:
                    self._has_batch = False
                else:
                    replies = [r.response if r.code == 0 else _item_error(r) for r in reply.results]
            if not replies:  # one commit, or an older store: each on its own, concurrently
                replies = await asyncio.gather(*(self._call("CommitRunStep", request, metadata) for request, _ in batch),
                                               return_exceptions=True)
            for (_, future), outcome in zip(batch, replies):
                if future.done():
                    continue  # its waiter was cancelled
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)
        except BaseException as exc:  # the whole call failed (UNAVAILABLE, deadline, ...): every item did
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc if isinstance(exc, Exception) else AbortedError("commit interrupted"))
            if not isinstance(exc, Exception):
                raise
        finally:
            self._next_batch(lane, metadata)

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
            return _dsl(canvas), canvas.head_revision_id
        if revision_id == "published":
            revision_id = canvas.published_revision_id
        revision = await self._call("GetRevision", canvas_store_pb2.GetRevisionRequest(canvas_id=canvas_id, revision_id=revision_id))
        return _dsl(revision), revision.id


def _dsl(message: Any) -> dict[str, Any]:
    """A stored DSL in its key order (its text), or from the Struct of a store that sends none."""
    return parse_object(message.dsl_json, "dsl_json") if message.dsl_json else sorted_keys(from_struct(message.dsl))
