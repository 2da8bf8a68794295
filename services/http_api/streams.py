"""The completion routes: RAGFlow's agent completions (SSE or one JSON answer) and its OpenAI-compatible mode.

SSE framing is RAGFlow's: `data:{json}` lines (one JSON object on one line, UTF-8 text, no `event:`
lines), a blank line after each, and `data:[DONE]` at the end; the OpenAI-compatible stream writes
`data: {json}` with a space, as RAGFlow does there. Each event that comes from a RunEvent is preceded
by `id:<seq>`: a client that reconnects with `Last-Event-ID: <seq>` gets the events after it, through
StreamRunEvents, and a reader that goes away does not stop the run.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from services.common import errors
from services.http_api.core import openai_compat
from services.http_api.core.completions import CompletionRequest, Completions, RunStream, failed
from services.http_api.core.errors import ApiError, RetCode, argument, from_domain
from services.http_api.core.events import Answer
from services.http_api.core.params import flag
from services.http_api.server import INTERNAL, Context, dumps, json_response, result

logger = logging.getLogger(__name__)
SSE_HEADERS = {"Cache-Control": "no-cache", "Connection": "keep-alive", "X-Accel-Buffering": "no"}
SSE_MEDIA_TYPE = "text/event-stream; charset=utf-8"
DONE = b"data:[DONE]\n\n"
OPENAI_DONE = b"data: [DONE]\n\n"


def frame(payload: dict, *, seq: int | None = None, space: bool = False) -> bytes:
    head = b"" if seq is None else b"id:%d\n" % seq
    return head + (b"data: " if space else b"data:") + dumps(payload) + b"\n\n"


def sse_response(body: AsyncIterator[bytes], stream: RunStream) -> StreamingResponse:
    headers = dict(SSE_HEADERS)
    if stream.run_id:
        headers["X-Run-Id"] = stream.run_id
    if stream.session_id:
        headers["X-Session-Id"] = stream.session_id
    return StreamingResponse(body, media_type=SSE_MEDIA_TYPE, headers=headers)


async def ragflow_events(stream: RunStream) -> AsyncIterator[bytes]:
    """One write per group of events the orchestrator committed together."""
    sent = False
    try:
        async for batch in stream.batches():
            frames = []
            for event in batch:
                mapped = stream.mapper.map(event)
                if mapped is not None:
                    frames.append(frame(mapped, seq=event.seq))
            if frames:
                sent = True
                yield b"".join(frames)
    except errors.AgentCanvasError as exc:  # the orchestrator went away mid-run: say so, then end the stream
        sent = True
        yield frame({"code": int(RetCode.SERVER_ERROR), "message": from_domain(exc).message, "data": False})
    except Exception:  # noqa: BLE001 - the headers are sent: end the stream with a JSON error, not a cut
        logger.exception("unexpected error while streaming run %s", stream.run_id)
        sent = True
        yield frame({"code": int(RetCode.SERVER_ERROR), "message": INTERNAL, "data": False})
    if not sent and not stream.reattached:
        yield frame({"session_id": stream.session_id, "data": {}})
    yield DONE


async def openai_events(stream: RunStream, chunks: openai_compat.ChunkMapper) -> AsyncIterator[bytes]:
    ended = False
    try:
        async for batch in stream.batches():
            frames = []
            for event in batch:
                chunk = chunks.map(event)
                if chunk is not None:
                    ended = ended or chunk["choices"][0]["finish_reason"] is not None
                    frames.append(frame(chunk, seq=event.seq, space=True))
            if frames:
                yield b"".join(frames)
    except errors.AgentCanvasError as exc:
        yield frame(chunks.chunk(0, {"content": f"**ERROR**: {from_domain(exc).message}"}, finish_reason="stop"), space=True)
        ended = True
    except Exception:  # noqa: BLE001 - as above
        logger.exception("unexpected error while streaming run %s", stream.run_id)
        yield frame(chunks.chunk(0, {"content": f"**ERROR**: {INTERNAL}"}, finish_reason="stop"), space=True)
        ended = True
    if not ended and not stream.reattached:
        yield frame(chunks.chunk(0, {"content": ""}, finish_reason="stop"), space=True)
    yield OPENAI_DONE


async def _answer(stream: RunStream) -> Answer:
    answer = Answer(stream.mapper)
    try:
        async for event in stream.events():
            answer.add(event)
    except errors.AgentCanvasError as exc:
        raise from_domain(exc) from None
    return answer


async def _ragflow(context: Context, request: Request, body: dict, agent_id: str) -> Response:
    backend = context.backend(request)
    last_event_id = request.headers.get("last-event-id")
    completion = CompletionRequest.from_body(body, agent_id=agent_id, last_event_id=last_event_id,
                                             run_id=request.query_params.get("run_id", ""))
    stream = await Completions(backend).start(completion)
    if completion.stream or completion.last_event_id is not None:
        return sse_response(ragflow_events(stream), stream)
    answer = await _answer(stream)
    if answer.error and failed(answer.status):
        if stream.mapper.forward_all:
            return result(f"**ERROR**: {answer.error}")
        raise ApiError(RetCode.EXCEPTION_ERROR, answer.error)
    final = answer.result()
    return result(final if final is not None else {"session_id": stream.session_id})


async def _openai(context: Context, request: Request, body: dict, agent_id: str) -> Response:
    backend = context.backend(request)
    question = openai_compat.question_of(body)
    session_id = openai_compat.session_of(body)
    fields = {key: body[key] for key in ("stream", "inputs", "user_id", "release", "cancel_on_disconnect") if key in body}
    agent = agent_id or body.get("agent_id") or body.get("model") or ""
    completion = CompletionRequest.from_body({**fields, "agent_id": agent, "query": question, "session_id": session_id},
                                             last_event_id=request.headers.get("last-event-id"),
                                             run_id=request.query_params.get("run_id", ""))
    stream = await Completions(backend).start(completion, forward_all=False)
    chunks = openai_compat.ChunkMapper(completion.agent_id, stream.session_id)
    if completion.stream or completion.last_event_id is not None:
        return sse_response(openai_events(stream, chunks), stream)
    answer = await _answer(stream)
    error = answer.error if failed(answer.status) else ""
    return json_response(openai_compat.completion(completion.agent_id, stream.session_id, answer.content, answer.reasoning,
                                                  answer.reference, answer.usage_raw, error))


async def chat_completions(context: Context, request: Request) -> Response:
    """POST /agents/chat/completions; `"openai-compatible": true` selects the OpenAI shapes."""
    body = await context.body(request)
    if flag(body.get("openai-compatible")):
        return await _openai(context, request, body, "")
    return await _ragflow(context, request, body, "")


async def agent_completions(context: Context, request: Request) -> Response:
    """POST /agents/{agent_id}/completions: RAGFlow's older alias, the agent id in the path."""
    body = await context.body(request)
    agent_id = request.path_params["agent_id"]
    if flag(body.get("openai-compatible")):
        return await _openai(context, request, body, agent_id)
    return await _ragflow(context, request, body, agent_id)


async def openai_completions(context: Context, request: Request) -> Response:
    """POST /agents_openai/{agent_id}/chat/completions."""
    body = await context.body(request)
    return await _openai(context, request, body, request.path_params["agent_id"])


async def run_events(context: Context, request: Request) -> Response:
    """GET /agents/{agent_id}/runs/{run_id}/events: reattach with a GET (what EventSource can send); the
    events after `Last-Event-ID` (or `?after_seq=`), in RAGFlow's framing."""
    backend = context.backend(request)
    after = request.headers.get("last-event-id") or request.query_params.get("after_seq") or "0"
    completion = CompletionRequest.from_body({"stream": True}, agent_id=request.path_params["agent_id"],
                                             last_event_id=after, run_id=request.path_params["run_id"])
    if not completion.run_id.isalnum():
        raise argument("`run_id` is not a run id.")
    stream = await Completions(backend).start(completion, forward_all=flag(request.query_params.get("all"), True))
    return sse_response(ragflow_events(stream), stream)
