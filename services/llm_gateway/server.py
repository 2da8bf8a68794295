"""gRPC adapter of LlmGateway: proto -> core types, call the core, core -> proto. No rules here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from agentcanvas.v1 import common_pb2, llm_gateway_pb2, llm_gateway_pb2_grpc

from services.common.errors import InvalidArgumentError, ViolationCollector
from services.common.json_text import parse_object, sorted_keys
from services.common.structs import find_bad_value, from_struct, to_value
from services.llm_gateway.coalesce import coalesce
from services.llm_gateway.core.gateway import LlmGateway
from services.llm_gateway.core.policy import reasons
from services.llm_gateway.core.registry import ModelRegistry
from services.llm_gateway.core.types import (
    ChatError, ChatRequest, ErrorKind, FinishEvent, FinishReason, Generation, Message, StructuredSpec, TextEvent,
    ThinkDeltaEvent, ThinkEndEvent, Thinking, ThinkingBlock, ThinkingBlockEvent, ThinkingMode, ThinkStartEvent, ToolCall,
    ToolCallEvent, ToolSpec, Usage, UsageEvent,
)

logger = logging.getLogger(__name__)
pb = llm_gateway_pb2

_MODE = {pb.THINKING_MODE_UNSPECIFIED: ThinkingMode.DEFAULT, pb.THINKING_MODE_ENABLED: ThinkingMode.ENABLED,
         pb.THINKING_MODE_DISABLED: ThinkingMode.DISABLED, pb.THINKING_MODE_EFFORT: ThinkingMode.EFFORT,
         pb.THINKING_MODE_BUDGET: ThinkingMode.BUDGET}
_EFFORT = {pb.REASONING_EFFORT_LOW: "low", pb.REASONING_EFFORT_MEDIUM: "medium", pb.REASONING_EFFORT_HIGH: "high"}
_FINISH = {FinishReason.STOP: pb.FINISH_REASON_STOP, FinishReason.LENGTH: pb.FINISH_REASON_LENGTH,
           FinishReason.TOOL_CALLS: pb.FINISH_REASON_TOOL_CALLS, FinishReason.CONTENT_FILTER: pb.FINISH_REASON_CONTENT_FILTER,
           FinishReason.ERROR: pb.FINISH_REASON_ERROR}
_KIND = {kind: getattr(pb, f"CHAT_ERROR_KIND_{kind.name}") for kind in ErrorKind}

_THINK_START = pb.ChatEvent(think_start=pb.ChatThinkStart())


def _block(b: pb.ThinkingBlock) -> ThinkingBlock:
    return ThinkingBlock(thinking=b.thinking, signature=b.signature, redacted_data=b.redacted_data)


def block_pb(b: ThinkingBlock) -> pb.ThinkingBlock:
    return pb.ThinkingBlock(thinking=b.thinking, signature=b.signature, redacted_data=b.redacted_data)


def _message(m: pb.ChatMessage) -> Message:
    parts = [{"text": p.text} if p.WhichOneof("part") == "text" else {"image_url": p.image_url} for p in m.parts]
    return Message(role=m.role, content=m.content, parts=parts,
                   tool_calls=[ToolCall(c.id, c.name, c.arguments_json) for c in m.tool_calls],
                   tool_call_id=m.tool_call_id, name=m.name, reasoning_content=m.reasoning_content,
                   thinking_blocks=[_block(b) for b in m.thinking_blocks])


def _message_pb(m: Message) -> pb.ChatMessage:
    parts = [pb.ContentPart(text=p["text"]) if "text" in p else pb.ContentPart(image_url=p["image_url"]) for p in m.parts]
    return pb.ChatMessage(role=m.role, content=m.content, parts=parts,
                          tool_calls=[pb.ToolCall(id=c.id, name=c.name, arguments_json=c.arguments_json) for c in m.tool_calls],
                          tool_call_id=m.tool_call_id, name=m.name, reasoning_content=m.reasoning_content,
                          thinking_blocks=[block_pb(b) for b in m.thinking_blocks])


def to_core_request(request: pb.ChatRequest) -> ChatRequest:
    g = request.generation
    generation = Generation(
        temperature=g.temperature if g.HasField("temperature") else None,
        top_p=g.top_p if g.HasField("top_p") else None,
        max_tokens=g.max_tokens if g.HasField("max_tokens") else None,
        presence_penalty=g.presence_penalty if g.HasField("presence_penalty") else None,
        frequency_penalty=g.frequency_penalty if g.HasField("frequency_penalty") else None,
        stop=tuple(g.stop), seed=g.seed if g.HasField("seed") else None)
    problems = ViolationCollector()
    # Enum values this server does not know (a newer client, or a raw number) are refused, not read as "default".
    if request.thinking.mode not in _MODE:
        problems.add("thinking.mode", f"unknown ThinkingMode value {request.thinking.mode}")
    if request.thinking.effort not in _EFFORT and request.thinking.effort != pb.REASONING_EFFORT_UNSPECIFIED:
        problems.add("thinking.effort", f"unknown ReasoningEffort value {request.thinking.effort}")
    tools = [ToolSpec(t.name, t.description,
                      _json_text(t.parameters_json, f"tools[{i}].parameters_json", problems) if t.parameters_json
                      else _json_object(t.parameters, f"tools[{i}].parameters", problems))
             for i, t in enumerate(request.tools)]
    structured = None
    if request.HasField("response_format"):  # without json_schema: refused by the core, never silently plain text
        rf = request.response_format
        if rf.json_schema_json:
            schema = _json_text(rf.json_schema_json, "response_format.json_schema_json", problems)
        else:
            schema = _json_object(rf.json_schema, "response_format.json_schema", problems) if rf.HasField("json_schema") else {}
        structured = StructuredSpec(schema=schema, name=rf.name or "answer",
                                    max_repairs=rf.max_repairs if rf.max_repairs != 0 else None)
    problems.raise_if_any("invalid chat request")
    thinking = Thinking(mode=_MODE[request.thinking.mode], effort=_EFFORT.get(request.thinking.effort, ""),
                        budget_tokens=request.thinking.budget_tokens)
    return ChatRequest(
        model=request.model, messages=[_message(m) for m in request.messages], thinking=thinking,
        with_reasoning=request.with_reasoning, tools=tools,
        tool_choice=request.tool_choice, structured=structured, generation=generation,
        fallback_models=list(request.fallback_models), request_id=request.request_id)


def _json_object(struct, field: str, problems: ViolationCollector) -> dict:
    """The Struct as a JSON object; a NaN or infinity (JSON has neither) is a violation naming the path to it.
    A Struct has no key order of its own (each process iterates it differently): its keys are sorted, so the
    schema a model sees is the same on every replica. Clients that mean an order send the `*_json` text."""
    found = find_bad_value(struct, nul=False)
    if found is not None:
        path, problem = found
        problems.add(field + path, problem)
        return {}
    return sorted_keys(from_struct(struct))


def _json_text(text: str, field: str, problems: ViolationCollector) -> dict:
    """A JSON object sent as text (key order kept), or a violation naming the field."""
    try:
        return parse_object(text, field)
    except InvalidArgumentError as exc:
        for violation in exc.violations:
            problems.add(violation.field, violation.description)
        return {}


def usage_pb(u: Usage) -> common_pb2.TokenUsage:
    return common_pb2.TokenUsage(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens,
                                 reasoning_tokens=u.reasoning_tokens, cached_tokens=u.cached_tokens,
                                 total_tokens=u.total_tokens, calls=u.calls, cost_usd=u.cost_usd)


def error_pb(e: ChatError | None) -> pb.ChatError | None:
    if e is None:
        return None
    return pb.ChatError(kind=_KIND[e.kind], message=e.message, retryable=e.retryable, partial_text=e.partial_text,
                        http_status=e.http_status)


def event_pb(event: object) -> pb.ChatEvent:
    if isinstance(event, TextEvent):
        return pb.ChatEvent(text_delta=pb.TextDelta(text=event.text))
    if isinstance(event, ThinkDeltaEvent):
        return pb.ChatEvent(think_delta=pb.ChatThinkDelta(text=event.text))
    if isinstance(event, ThinkStartEvent):
        return _THINK_START
    if isinstance(event, ThinkEndEvent):
        return pb.ChatEvent(think_end=pb.ChatThinkEnd(truncated=event.truncated))
    if isinstance(event, ToolCallEvent):
        c = event.call
        return pb.ChatEvent(tool_call=pb.ToolCall(id=c.id, name=c.name, arguments_json=c.arguments_json))
    if isinstance(event, UsageEvent):
        return pb.ChatEvent(usage=usage_pb(event.usage))
    if isinstance(event, ThinkingBlockEvent):
        return pb.ChatEvent(thinking_block=block_pb(event.block))
    assert isinstance(event, FinishEvent)
    return pb.ChatEvent(finish=pb.ChatFinish(reason=_FINISH[event.reason], error=error_pb(event.error), model=event.model,
                                             reasoning_as_answer=event.reasoning_as_answer))


class LlmGatewayServicer(llm_gateway_pb2_grpc.LlmGatewayServicer):
    def __init__(self, core: LlmGateway, registry: ModelRegistry):
        self._core = core
        self._registry = registry

    async def Chat(self, request, context):
        result = await self._core.chat(to_core_request(request))
        reply = pb.ChatResponse(text=result.text, reasoning=result.reasoning,
                                tool_calls=[pb.ToolCall(id=c.id, name=c.name, arguments_json=c.arguments_json) for c in result.tool_calls],
                                finish_reason=_FINISH[result.finish_reason], usage=usage_pb(result.usage), model=result.model,
                                error=error_pb(result.error), thinking_blocks=[block_pb(b) for b in result.thinking_blocks],
                                reasoning_as_answer=result.reasoning_as_answer)
        if result.has_structured:
            reply.structured.CopyFrom(to_value(result.structured))
        return reply

    async def ChatStream(self, request, context) -> AsyncIterator[pb.ChatEvent]:
        events = await self._core.chat_stream(to_core_request(request))
        async for event in events:
            yield event_pb(event)

    async def ChatStreamBatched(self, request, context) -> AsyncIterator[pb.ChatEventBatch]:
        events = await self._core.chat_stream(to_core_request(request))
        async for batch in coalesce(events):
            yield pb.ChatEventBatch(events=[event_pb(event) for event in batch])

    async def CountTokens(self, request, context):
        total, name, trimmed, trimmed_total = await asyncio.to_thread(
            self._core.count_tokens, request.model, [_message(m) for m in request.messages], request.max_tokens)
        return pb.CountTokensResponse(tokens=total, tokenizer=name, trimmed_messages=[_message_pb(m) for m in trimmed],
                                      trimmed_tokens=trimmed_total)

    async def ListModels(self, request, context):
        default_id = self._registry.default.llm_id
        models = []
        for entry in self._registry.entries:
            family = self._registry.family_of(entry)
            models.append(pb.ModelInfo(
                llm_id=entry.llm_id, litellm_model=entry.model, provider=entry.provider,
                api_base=entry.api_base or "",
                supports_tools=entry.supports_tools if entry.supports_tools is not None else family.native_tools,
                supports_reasoning=bool(entry.supports_reasoning) if entry.supports_reasoning is not None else reasons(family),
                context_window=entry.context_window or family.context_window, is_default=entry.llm_id == default_id))
        return pb.ListModelsResponse(models=models)
