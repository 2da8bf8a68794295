"""The store and the orchestrator over gRPC, as any client calls them.

Each call carries the HTTP caller's own bearer token, so the store and the orchestrator authorise the
real user; this service holds no identity of its own and no state. gRPC failures come back as the
shared domain errors (services/common/status.py), never as grpc exceptions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import grpc
from agentcanvas.v1 import canvas_store_pb2, canvas_store_pb2_grpc, orchestrator_pb2, orchestrator_pb2_grpc
from google.protobuf import field_mask_pb2

from services.common import status
from services.common.clients import create_channel, outbound_metadata


@dataclass
class Channels:
    """One channel per peer, and one stub on each, for the whole process (a stub builds a callable per
    method: too costly to make per request)."""

    store: grpc.aio.Channel
    orchestrator: grpc.aio.Channel

    def __post_init__(self) -> None:
        self.store_stub = canvas_store_pb2_grpc.CanvasStoreStub(self.store)
        self.orchestrator_stub = orchestrator_pb2_grpc.OrchestratorStub(self.orchestrator)

    @classmethod
    def connect(cls, store_address: str, orchestrator_address: str) -> "Channels":
        return cls(create_channel(store_address), create_channel(orchestrator_address))

    async def close(self) -> None:
        await self.store.close()
        await self.orchestrator.close()


class GrpcBackend:
    """The calls of one HTTP request, made with that request's token."""

    def __init__(self, channels: Channels, token: str, *, timeout_s: float = 30.0, request_id: str = ""):
        self._store = channels.store_stub
        self._orchestrator = channels.orchestrator_stub
        self._token = token
        self._timeout = timeout_s
        self._request_id = request_id

    def _metadata(self) -> list[tuple[str, str]]:
        metadata = outbound_metadata(self._token)
        if self._request_id and not any(key == "x-request-id" for key, _ in metadata):
            metadata.append(("x-request-id", self._request_id))
        return metadata

    async def _unary(self, method, request):
        try:
            return await method(request, metadata=self._metadata(), timeout=self._timeout)
        except grpc.aio.AioRpcError as err:
            raise status.from_rpc_error(err) from None

    # canvases
    async def get_canvas(self, canvas_id: str) -> canvas_store_pb2.Canvas:
        return await self._unary(self._store.GetCanvas, canvas_store_pb2.GetCanvasRequest(id=canvas_id))

    async def list_canvases(self, *, order_by: str, page_size: int, page_token: str = "",
                            filter: str = "") -> canvas_store_pb2.ListCanvasesResponse:
        request = canvas_store_pb2.ListCanvasesRequest(order_by=order_by, page_size=page_size, page_token=page_token, filter=filter)
        return await self._unary(self._store.ListCanvases, request)

    async def create_canvas(self, canvas: canvas_store_pb2.Canvas) -> canvas_store_pb2.Canvas:
        return await self._unary(self._store.CreateCanvas, canvas_store_pb2.CreateCanvasRequest(canvas=canvas))

    async def update_canvas(self, canvas: canvas_store_pb2.Canvas, paths: Sequence[str]) -> canvas_store_pb2.Canvas:
        request = canvas_store_pb2.UpdateCanvasRequest(canvas=canvas, update_mask=field_mask_pb2.FieldMask(paths=list(paths)))
        return await self._unary(self._store.UpdateCanvas, request)

    async def delete_canvas(self, canvas_id: str) -> None:
        await self._unary(self._store.DeleteCanvas, canvas_store_pb2.DeleteCanvasRequest(id=canvas_id))

    async def get_revision(self, canvas_id: str, revision_id: str) -> canvas_store_pb2.CanvasRevision:
        request = canvas_store_pb2.GetRevisionRequest(canvas_id=canvas_id, revision_id=revision_id)
        return await self._unary(self._store.GetRevision, request)

    # sessions
    async def create_session(self, canvas_id: str, revision_id: str, user_id: str) -> canvas_store_pb2.Session:
        request = canvas_store_pb2.CreateSessionRequest(canvas_id=canvas_id, revision_id=revision_id, user_id=user_id)
        return await self._unary(self._store.CreateSession, request)

    async def get_session(self, session_id: str) -> canvas_store_pb2.Session:
        return await self._unary(self._store.GetSession, canvas_store_pb2.GetSessionRequest(id=session_id))

    async def list_sessions(self, canvas_id: str, user_id: str, page_size: int,
                            page_token: str = "") -> canvas_store_pb2.ListSessionsResponse:
        request = canvas_store_pb2.ListSessionsRequest(canvas_id=canvas_id, user_id=user_id, page_size=page_size,
                                                       page_token=page_token)
        return await self._unary(self._store.ListSessions, request)

    async def delete_session(self, session_id: str) -> None:
        await self._unary(self._store.DeleteSession, canvas_store_pb2.DeleteSessionRequest(id=session_id))

    async def list_session_runs(self, session_id: str, page_token: str = "") -> canvas_store_pb2.ListRunRecordsResponse:
        request = canvas_store_pb2.ListRunRecordsRequest(session_id=session_id, page_size=100, page_token=page_token)
        return await self._unary(self._store.ListRunRecords, request)

    # runs
    async def get_run(self, run_id: str) -> orchestrator_pb2.Run:
        return await self._unary(self._orchestrator.GetRun, orchestrator_pb2.GetRunRequest(run_id=run_id))

    async def cancel_run(self, run_id: str) -> orchestrator_pb2.Run:
        return await self._unary(self._orchestrator.CancelRun, orchestrator_pb2.CancelRunRequest(run_id=run_id))

    async def _batches(self, call) -> AsyncIterator[list[orchestrator_pb2.RunEvent]]:
        try:
            async for batch in call:
                yield list(batch.events)
        except grpc.aio.AioRpcError as err:
            raise status.from_rpc_error(err) from None
        finally:
            # Closing our side only: the run goes on without a reader (RunCanvas's contract).
            call.cancel()

    def run(self, request: orchestrator_pb2.RunCanvasRequest) -> AsyncIterator[list[orchestrator_pb2.RunEvent]]:
        """The run's events grouped as the orchestrator commits them (RunCanvasBatched): one write per group."""
        return self._batches(self._orchestrator.RunCanvasBatched(request, metadata=self._metadata()))

    def events(self, run_id: str, after_seq: int) -> AsyncIterator[list[orchestrator_pb2.RunEvent]]:
        request = orchestrator_pb2.StreamRunEventsRequest(run_id=run_id, after_seq=after_seq)
        return self._batches(self._orchestrator.StreamRunEventsBatched(request, metadata=self._metadata()))
