"""LlmClient over the llm_gateway service. One channel per process.

Streams use ChatStreamBatched: the same events as ChatStream, grouped while the gateway's previous
write is in flight, so a fast model's tokens cost one gRPC message per group instead of per token
(the first event is never held back)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
from agentcanvas.v1 import llm_gateway_pb2, llm_gateway_pb2_grpc

from services.common import status
from services.common.clients import call_timeout
from services.common.errors import AgentCanvasError, UnavailableError
from services.orchestrator.adapters.peer import PeerClient, TokenSource
from services.orchestrator.core.errors import NodeError
from services.orchestrator.core.ports import ChatChunk, ChatRequest, Usage

_THINKING = {
    "enabled": llm_gateway_pb2.THINKING_MODE_ENABLED,
    "disabled": llm_gateway_pb2.THINKING_MODE_DISABLED,
    "low": llm_gateway_pb2.THINKING_MODE_EFFORT,
    "medium": llm_gateway_pb2.THINKING_MODE_EFFORT,
    "high": llm_gateway_pb2.THINKING_MODE_EFFORT,
}
_EFFORT = {"low": llm_gateway_pb2.REASONING_EFFORT_LOW, "medium": llm_gateway_pb2.REASONING_EFFORT_MEDIUM,
           "high": llm_gateway_pb2.REASONING_EFFORT_HIGH}


def to_request(request: ChatRequest) -> llm_gateway_pb2.ChatRequest:
    from services.common.json_text import dump_object
    from services.common.structs import to_struct

    proto = llm_gateway_pb2.ChatRequest(model=request.model, with_reasoning=True, request_id=request.request_id)
    for message in request.messages:
        added = proto.messages.add(role=str(message.get("role", "user")), content=str(message.get("content", "")))
        for call in message.get("tool_calls") or ():
            added.tool_calls.add(id=str(call.get("id", "")), name=str(call.get("name", "")),
                                 arguments_json=str(call.get("arguments", "") or "{}"))
        if message.get("tool_call_id"):
            added.tool_call_id = str(message["tool_call_id"])
        if message.get("name"):
            added.name = str(message["name"])
        for block in message.get("thinking_blocks") or ():  # signed reasoning, echoed as received
            added.thinking_blocks.add(thinking=str(block.get("thinking", "")), signature=str(block.get("signature", "")),
                                      redacted_data=str(block.get("redacted_data", "")))
        if message.get("images"):  # multimodal: the text first, then every image
            added.parts.add(text=added.content)
            for url in message["images"]:
                added.parts.add(image_url=str(url))
    generation = proto.generation
    for name in ("temperature", "top_p", "max_tokens", "presence_penalty", "frequency_penalty"):
        value = getattr(request, name)
        if value is not None:
            setattr(generation, name, value)
    if request.thinking and request.thinking.lower() in _THINKING:
        proto.thinking.mode = _THINKING[request.thinking.lower()]
        if request.thinking.lower() in _EFFORT:
            proto.thinking.effort = _EFFORT[request.thinking.lower()]
    if request.json_schema:
        # text keeps the order of the schema's properties; the Struct goes too, for an older gateway
        proto.response_format.json_schema.CopyFrom(to_struct(request.json_schema))
        proto.response_format.json_schema_json = dump_object(request.json_schema)
        if request.max_repairs is not None:
            proto.response_format.max_repairs = request.max_repairs
    for spec in request.tools or ():
        function = spec.get("function", spec)
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        proto.tools.add(name=str(function.get("name", "")), description=str(function.get("description", "")),
                        parameters=to_struct(parameters), parameters_json=dump_object(parameters))
    if request.tool_choice:
        proto.tool_choice = request.tool_choice
    return proto


class GatewayLlmClient(PeerClient):
    stub_class = llm_gateway_pb2_grpc.LlmGatewayStub

    def __init__(self, target: str, *, own_token: TokenSource = None, timeout_s: float = 600.0):
        super().__init__(target, own_token=own_token, timeout_s=timeout_s)

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        call = self._stub.ChatStreamBatched(to_request(request), metadata=self._metadata(), timeout=call_timeout(self._timeout))
        try:
            async for batch in call:
                for event in batch.events:
                    yield _to_chunk(event)
        except grpc.aio.AioRpcError as exc:
            domain = status.from_rpc_error(exc)
            retryable = isinstance(domain, UnavailableError) or exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)
            message = domain.message if isinstance(domain, AgentCanvasError) else str(exc.details())
            raise NodeError(f"model gateway: {message}", reason=getattr(domain, "reason", "MODEL_ERROR"), retryable=retryable) from None


def _to_chunk(event: llm_gateway_pb2.ChatEvent) -> ChatChunk:
    kind = event.WhichOneof("event")
    if kind == "text_delta":
        return ChatChunk("text", event.text_delta.text)
    if kind == "think_delta":
        return ChatChunk("think_delta", event.think_delta.text)
    if kind in ("think_start", "think_end"):
        return ChatChunk(kind)
    if kind == "tool_call":
        call = event.tool_call
        return ChatChunk("tool_call", tool_call={"id": call.id, "name": call.name, "arguments": call.arguments_json})
    if kind == "thinking_block":
        block = event.thinking_block
        return ChatChunk("thinking_block", thinking_block={"thinking": block.thinking, "signature": block.signature,
                                                           "redacted_data": block.redacted_data})
    if kind == "usage":
        u = event.usage
        return ChatChunk("usage", usage=Usage(u.prompt_tokens, u.completion_tokens, u.reasoning_tokens,
                                              u.cached_tokens, u.total_tokens, u.calls or 1, u.cost_usd))
    if kind == "finish":
        error = event.finish.error
        if event.finish.HasField("error") and (error.message or error.kind):
            return ChatChunk("finish", error=error.message or llm_gateway_pb2.ChatErrorKind.Name(error.kind),
                             error_kind=llm_gateway_pb2.ChatErrorKind.Name(error.kind), retryable=error.retryable)
        return ChatChunk("finish")
    return ChatChunk(kind or "unknown")  # a kind added to the gateway later: ignored by the components
