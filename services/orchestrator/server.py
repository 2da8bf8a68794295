"""gRPC adapter: proto ↔ core types. No rules here; errors are domain exceptions mapped by common."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypeVar

from agentcanvas.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc
from google.protobuf.timestamp_pb2 import Timestamp

from services.common import context
from services.common.errors import InvalidArgumentError
from services.common.json_text import dump_object, parse_object, sorted_keys
from services.common.structs import from_struct, to_struct
from services.orchestrator.adapters.event_proto import to_proto
from services.orchestrator.core.orchestrator import Orchestrator
from services.orchestrator.core.run_request import InputFileData, RunRequest
from services.orchestrator.core.events import now_ms
from services.orchestrator.core.ports import RunRecord

T = TypeVar("T")


def _timestamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def run_to_proto(record: RunRecord) -> orchestrator_pb2.Run:
    run = orchestrator_pb2.Run(id=record.id, canvas_id=record.canvas_id, revision_id=record.revision_id,
                               session_id=record.session_id, status=int(record.status), outputs=to_struct(record.outputs),
                               usage=common_pb2.TokenUsage(**record.usage.to_dict()), last_seq=record.last_seq)
    if record.error is not None:
        run.error.CopyFrom(common_pb2.ErrorDetail(reason=record.error.reason, message=record.error.message,
                                                  component_id=record.error.component_id))
    if record.create_time_ms:
        run.create_time.CopyFrom(_timestamp(record.create_time_ms))
    if record.update_time_ms:
        run.update_time.CopyFrom(_timestamp(record.update_time_ms))
    return run


async def with_heartbeats(events: AsyncIterator[T], interval_s: float) -> AsyncIterator[T | None]:
    """The items, plus None whenever nothing happened for `interval_s` (a keep-alive slot)."""
    queue: asyncio.Queue = asyncio.Queue(maxsize=256)
    done = object()

    async def pump() -> None:
        try:
            async for event in events:
                await queue.put(event)
        finally:
            await queue.put(done)

    task = asyncio.create_task(pump())
    try:
        while True:
            if queue.empty():
                try:
                    async with asyncio.timeout(interval_s):  # a timer, not a task per item as wait_for makes
                        item = await queue.get()
                except TimeoutError:
                    yield None
                    continue
            else:
                item = queue.get_nowait()
            if item is done:
                break
            yield item
        await task  # re-raises a failure of the underlying stream
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def _run_id(value: str) -> str:
    if not value:
        raise InvalidArgumentError.for_field("run_id", "is required")
    return value


def _text_delivery(value: int) -> None:
    if value not in orchestrator_pb2.TextDelivery.values():
        raise InvalidArgumentError.for_field("text_delivery", f"unknown value {value}")


class OrchestratorServicer(orchestrator_pb2_grpc.OrchestratorServicer):
    def __init__(self, orchestrator: Orchestrator, heartbeat_interval_s: float = 15.0):
        self._orchestrator = orchestrator
        self._heartbeat_s = heartbeat_interval_s

    async def _batches(self, record: RunRecord, after_seq: int,
                       text_delivery: int = 0) -> AsyncIterator[list[orchestrator_pb2.RunEvent]]:
        """The run's events as protos, grouped as committed; a heartbeat alone when idle (carrying the last
        seq sent, which with TEXT_DELIVERY_CONFIRMED may be behind the run's)."""
        trace = str(record.spec.get("trace_id", ""))
        last_seq = after_seq
        confirmed = text_delivery == orchestrator_pb2.TEXT_DELIVERY_CONFIRMED
        stream = self._orchestrator.stream_batches(record.id, after_seq, confirmed_text=confirmed)
        async for batch in with_heartbeats(stream, self._heartbeat_s):
            if batch is None:
                yield [orchestrator_pb2.RunEvent(run_id=record.id, session_id=record.session_id, seq=last_seq,
                                                 created_at_ms=now_ms(), trace_id=trace, heartbeat=orchestrator_pb2.Heartbeat())]
                continue
            last_seq = batch[-1].seq
            yield [to_proto(event, record.id, record.session_id, trace) for event in batch]

    async def _start(self, request: orchestrator_pb2.RunCanvasRequest) -> RunRecord:
        _text_delivery(request.text_delivery)
        source = request.WhichOneof("source")
        if source is None and not request.session_id and not request.resume_run_id:
            # a session knows its canvas (and its paused run); a paused run knows its DSL
            raise InvalidArgumentError.for_field("source", "give a canvas_id, an inline dsl, a session_id or a resume_run_id")
        identity = context.current_identity()
        if source == "dsl_json":  # key order kept: the text itself is the cache key
            dsl_key, decode = b"j" + request.dsl_json.encode(), (lambda: parse_object(request.dsl_json, "dsl_json"))
        elif source == "dsl":
            # deterministic: map keys sorted, so one DSL always encodes to the same bytes. A Struct has
            # no key order of its own (each process's differs): sorted is the one every process agrees
            # on. Clients that mean an order send dsl_json.
            dsl_key = b"s" + request.dsl.SerializeToString(deterministic=True)
            decode = lambda: sorted_keys(from_struct(request.dsl))  # noqa: E731
        else:
            dsl_key, decode = b"", None
        run_request = RunRequest(
            canvas_id=request.canvas_id, revision_id=request.revision_id, query=request.query,
            # The core keeps loaded inline canvases by this key and decodes the DSL only when it loads one.
            dsl_key=dsl_key, decode_dsl=decode,
            inputs=from_struct(request.inputs), session_id=request.session_id, user_id=request.user_id,
            request_id=request.request_id, resume_run_id=request.resume_run_id,
            webhook_payload=from_struct(request.webhook_payload, "webhook_payload") if request.HasField("webhook_payload") else None,
            files=[InputFileData(f.name, f.mime_type, f.content, f.url) for f in request.files],
        )
        return await self._orchestrator.start_run(run_request, identity.tenant_id if identity else "",
                                                  identity.user_id if identity else "")

    async def _reattach(self, request: orchestrator_pb2.StreamRunEventsRequest) -> RunRecord:
        _text_delivery(request.text_delivery)
        return await self._orchestrator.reattach(_run_id(request.run_id), request.after_seq)

    async def RunCanvas(self, request: orchestrator_pb2.RunCanvasRequest, ctx):
        record = await self._start(request)
        async for batch in self._batches(record, 0, request.text_delivery):
            for event in batch:
                yield event

    async def RunCanvasBatched(self, request: orchestrator_pb2.RunCanvasRequest, ctx):
        record = await self._start(request)
        async for batch in self._batches(record, 0, request.text_delivery):
            yield orchestrator_pb2.RunEventBatch(events=batch)

    async def StreamRunEvents(self, request: orchestrator_pb2.StreamRunEventsRequest, ctx):
        record = await self._reattach(request)
        async for batch in self._batches(record, request.after_seq, request.text_delivery):
            for event in batch:
                yield event

    async def StreamRunEventsBatched(self, request: orchestrator_pb2.StreamRunEventsRequest, ctx):
        record = await self._reattach(request)
        async for batch in self._batches(record, request.after_seq, request.text_delivery):
            yield orchestrator_pb2.RunEventBatch(events=batch)

    async def CancelRun(self, request: orchestrator_pb2.CancelRunRequest, ctx) -> orchestrator_pb2.Run:
        return run_to_proto(await self._orchestrator.cancel(_run_id(request.run_id)))

    async def GetRun(self, request: orchestrator_pb2.GetRunRequest, ctx) -> orchestrator_pb2.Run:
        return run_to_proto(await self._orchestrator.get_run(_run_id(request.run_id)))

    async def ValidateCanvas(self, request: orchestrator_pb2.ValidateCanvasRequest, ctx) -> orchestrator_pb2.ValidateCanvasResponse:
        source = request.WhichOneof("source")
        if source is None:
            raise InvalidArgumentError.for_field("source", "give a canvas_id or an inline dsl")
        dsl = parse_object(request.dsl_json, "dsl_json") if source == "dsl_json" else \
            sorted_keys(from_struct(request.dsl)) if source == "dsl" else None
        result = await self._orchestrator.validate(dsl, request.canvas_id)
        response = orchestrator_pb2.ValidateCanvasResponse(valid=not result.problems)
        for problem in result.problems:
            response.problems.add(component_id=problem.component_id, field=problem.field, code=problem.code, message=problem.message)
        if result.canvas is not None:
            response.normalized_dsl.CopyFrom(to_struct(result.canvas.dsl))
            response.normalized_dsl_json = dump_object(result.canvas.dsl)
        return response
