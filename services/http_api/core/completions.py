"""Runs for RAGFlow's completion routes: which session, which run, and reattaching to a run.

`Completions.start` does everything that can fail before the first byte of a stream (unknown agent or
session, bad inputs, a refused run) so that such failures are answered as a JSON body, and returns a
`RunStream` whose events the HTTP layer frames. Closing a RunStream early stops reading, not the run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.common import errors
from services.common.structs import to_struct
from services.http_api.core.errors import DENIED, ApiError, RetCode, argument, data_error, from_domain
from services.http_api.core.events import EventMapper
from services.http_api.core.known import SESSION_AGENTS
from services.http_api.core.params import flag

logger = logging.getLogger(__name__)
_CANCELS: set[asyncio.Task] = set()



@dataclass
class CompletionRequest:
    agent_id: str
    query: str = ""
    stream: bool = False
    session_id: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)
    user_id: str = ""
    return_trace: bool = False
    release: bool = False
    cancel_on_disconnect: bool = False
    last_event_id: int | None = None
    run_id: str = ""
    webhook_payload: dict[str, Any] | None = None

    @classmethod
    def from_body(cls, body: Mapping[str, Any], *, agent_id: str = "", last_event_id: str | None = None,
                  run_id: str = "") -> "CompletionRequest":
        agent = agent_id or body.get("agent_id")
        if not agent:
            raise argument("`agent_id` is required.")
        if not isinstance(agent, str):
            raise argument("`agent_id` must be a string.")
        query = body.get("query", body.get("question", ""))
        if query is None:
            query = ""
        if not isinstance(query, str):
            raise argument("`query` must be a string.")
        inputs = body.get("inputs") or {}
        if not isinstance(inputs, dict):
            raise argument("`inputs` must be an object of {name: {\"type\", \"value\"}}.")
        session_id = body.get("session_id") or ""
        user_id = body.get("user_id") or ""
        for name, value in (("session_id", session_id), ("user_id", user_id)):
            if not isinstance(value, str):
                raise argument(f"`{name}` must be a string.")
        after = None
        if last_event_id not in (None, ""):
            try:
                after = int(str(last_event_id).strip())
            except ValueError:
                raise argument("`Last-Event-ID` must be the integer id of an event of the stream.") from None
            if after < 0:
                raise argument("`Last-Event-ID` must not be negative.")
        run = run_id or body.get("run_id") or ""
        if not isinstance(run, str):
            raise argument("`run_id` must be a string.")
        return cls(agent_id=agent, query=query, stream=flag(body.get("stream")), session_id=session_id, inputs=inputs,
                   user_id=user_id, return_trace=flag(body.get("return_trace")), release=flag(body.get("release")),
                   cancel_on_disconnect=flag(body.get("cancel_on_disconnect")), last_event_id=after, run_id=run)


Batch = list[orchestrator_pb2.RunEvent]


@dataclass
class RunStream:
    """A run's events for one request, in the groups the orchestrator committed them: `first` (already
    received) then the rest of `rest`."""

    run_id: str
    session_id: str
    mapper: EventMapper
    first: Batch | None
    rest: AsyncIterator[Batch]
    reattached: bool
    backend: Any
    cancel_on_disconnect: bool = False
    finished: bool = False

    async def batches(self) -> AsyncIterator[Batch]:
        try:
            pending = [self.first] if self.first else []
            while True:
                if pending:
                    batch = pending.pop()
                else:
                    batch = await anext(self.rest, None)
                    if batch is None:
                        return
                events = [event for event in batch if event.WhichOneof("event") != "heartbeat"]
                if not events:
                    continue
                yield events
                if events[-1].WhichOneof("event") == "workflow_finished":
                    self.finished = True
                    return
        finally:
            await self.close()

    async def events(self) -> AsyncIterator[orchestrator_pb2.RunEvent]:
        async for batch in self.batches():
            for event in batch:
                yield event

    async def close(self) -> None:
        closer = getattr(self.rest, "aclose", None)
        if closer is not None:
            try:
                await closer()
            except (errors.AgentCanvasError, RuntimeError):
                pass
        if self.cancel_on_disconnect and not self.finished and self.run_id:
            # The reader went away and asked for its run to stop with it; done in its own task because
            # the reader's task is being cancelled.
            task = asyncio.get_running_loop().create_task(self._cancel())
            _CANCELS.add(task)  # the loop keeps only a weak reference: unheld, the cancel could be collected
            task.add_done_callback(_CANCELS.discard)

    async def _cancel(self) -> None:
        try:
            await self.backend.cancel_run(self.run_id)
        except errors.AgentCanvasError as exc:
            logger.info("cancel of run %s after a disconnect: %s", self.run_id, exc.reason)


class Completions:
    def __init__(self, backend):
        self.backend = backend

    async def _check_session(self, request: CompletionRequest) -> None:
        known = SESSION_AGENTS.hit(request.session_id)
        if known is None:
            known = SESSION_AGENTS.keep(request.session_id, (await self._session(request)).canvas_id)
        if known != request.agent_id:
            raise ApiError(RetCode.OPERATING_ERROR, "Session does not belong to the requested agent.", data=False)

    async def _session(self, request: CompletionRequest):
        try:
            session = await self.backend.get_session(request.session_id)
        except (errors.NotFoundError, errors.InvalidArgumentError):
            raise data_error("Session not found!") from None
        except errors.AgentCanvasError as exc:
            raise from_domain(exc, denied=DENIED) from None
        if session.canvas_id != request.agent_id:
            raise ApiError(RetCode.OPERATING_ERROR, "Session does not belong to the requested agent.", data=False)
        return session

    async def _new_session(self, request: CompletionRequest) -> str:
        """RAGFlow starts a session for a completion without one; its id rides on every event."""
        revision = ""
        if request.release:
            try:
                canvas = await self.backend.get_canvas(request.agent_id)
            except (errors.NotFoundError, errors.InvalidArgumentError):
                raise data_error("Agent not found.") from None
            except errors.AgentCanvasError as exc:
                raise from_domain(exc, denied=DENIED) from None
            if not canvas.published_revision_id:
                raise data_error("No available published version")
            revision = canvas.published_revision_id
        try:
            session = await self.backend.create_session(request.agent_id, revision, request.user_id)
        except (errors.NotFoundError, errors.InvalidArgumentError):
            raise data_error("Agent not found.") from None
        except errors.AgentCanvasError as exc:
            raise from_domain(exc, denied=DENIED) from None
        SESSION_AGENTS.keep(session.id, request.agent_id)
        return session.id

    async def _latest_run(self, session_id: str) -> str:
        runs: list[Any] = []
        token = ""
        try:
            while True:
                reply = await self.backend.list_session_runs(session_id, token)
                runs.extend(reply.runs)
                token = reply.next_page_token
                if not token:
                    break
        except errors.AgentCanvasError as exc:
            raise from_domain(exc, denied=DENIED) from None
        if not runs:
            raise data_error(f"Session {session_id} has no run to resume a stream of.")
        return max(runs, key=lambda run: (run.create_time.seconds, run.create_time.nanos)).id

    async def start(self, request: CompletionRequest, *, forward_all: bool | None = None) -> RunStream:
        """Open the run (or reattach to it after `last_event_id`) and wait for its first event."""
        if request.last_event_id is not None:
            return await self._reattach(request, forward_all)
        if request.session_id:
            await self._check_session(request)
            session_id = request.session_id
            forward = False if forward_all is None else forward_all
        else:
            session_id = await self._new_session(request)
            forward = True if forward_all is None else forward_all
        run_request = orchestrator_pb2.RunCanvasRequest(canvas_id=request.agent_id, query=request.query,
                                                        inputs=to_struct(request.inputs), session_id=session_id,
                                                        user_id=request.user_id,
                                                        text_delivery=_text_delivery(request))
        mapper = EventMapper(session_id=session_id, forward_all=forward, return_trace=request.return_trace)
        events = self.backend.run(run_request)
        first = await self._first(events, not_found="Agent not found.")
        return RunStream(run_id=first[0].run_id if first else "", session_id=session_id, mapper=mapper, first=first,
                         rest=events, reattached=False, backend=self.backend,
                         cancel_on_disconnect=request.cancel_on_disconnect)

    async def _reattach(self, request: CompletionRequest, forward_all: bool | None) -> RunStream:
        session_id = request.session_id
        run_id = request.run_id
        if not run_id:
            if not session_id:
                raise argument("To resume a stream with `Last-Event-ID`, send its `session_id` (or `run_id`).")
            await self._check_session(request)
            run_id = await self._latest_run(session_id)
        forward = (not request.session_id) if forward_all is None else forward_all
        mapper = EventMapper(session_id=session_id, forward_all=forward, return_trace=request.return_trace)
        events = self.backend.events(run_id, request.last_event_id or 0, _text_delivery(request))
        first = await self._first(events, not_found=f"Run {run_id} not found.")
        if first and first[0].session_id and session_id and first[0].session_id != session_id:
            raise ApiError(RetCode.OPERATING_ERROR, "Session does not belong to the requested run.", data=False)
        return RunStream(run_id=run_id, session_id=session_id or (first[0].session_id if first else ""), mapper=mapper,
                         first=first, rest=events, reattached=True, backend=self.backend)

    @staticmethod
    async def _first(batches: AsyncIterator[Batch], *, not_found: str) -> Batch | None:
        """The first group of events that is not a heartbeat; failures of the start are answered as JSON."""
        try:
            async for batch in batches:
                if any(event.WhichOneof("event") != "heartbeat" for event in batch):
                    return batch
        except errors.NotFoundError as exc:
            message = "Session not found!" if exc.resource_type == "session" else not_found
            raise from_domain(exc, not_found=message, denied=DENIED) from None
        except errors.AgentCanvasError as exc:
            raise from_domain(exc, not_found=not_found, denied=DENIED) from None
        return None


def failed(status: int) -> bool:
    return status in (common_pb2.RUN_STATUS_FAILED, common_pb2.RUN_STATUS_CANCELLED)


def _text_delivery(request: CompletionRequest) -> int:
    """An SSE reader appends every `message` it gets and cannot take text back, so a stream asks for each attempt's
    text only once that attempt is known to stand (a Message restarted after a takeover would otherwise show its
    opening twice). A whole answer is assembled here, where a MessageReset can still drop the superseded text."""
    if request.stream:
        return orchestrator_pb2.TEXT_DELIVERY_CONFIRMED
    return orchestrator_pb2.TEXT_DELIVERY_LIVE
