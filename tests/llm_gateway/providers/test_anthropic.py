"""Anthropic Messages API (docs.anthropic.com/en/api/messages, /en/docs/build-with-claude/streaming,
/en/docs/build-with-claude/extended-thinking, /en/api/errors).

Streams are named SSE events: message_start (usage with input and cache tokens), per content block a
content_block_start / content_block_delta (thinking_delta + signature_delta, text_delta, input_json_delta) /
content_block_stop, then message_delta (stop_reason, output usage) and message_stop; `ping` events may come
anywhere. Errors are `{"type": "error", "error": {"type", "message"}}`; 429 carries `retry-after`."""

from __future__ import annotations

import json
from typing import Any

from services.llm_gateway.core.types import (
    ChatRequest, FinishReason, Message, ThinkingBlock, ThinkingBlockEvent, ToolCallEvent, Usage,
)
from tests.llm_gateway.providers.harness import (
    ABSENT, ON, PARALLEL, TIME, WEATHER, Profile, Tokens, Turn, conformance, pieces, sse,
)
from tests.support.openai_server import Raw

ERRORS = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error", 500: "api_error",
          529: "overloaded_error"}
STOP = {"stop": "end_turn", "tool_calls": "tool_use"}


class Anthropic(Profile):
    name = "Anthropic"
    families = ("claude", "claude-opus-fixed")
    echoes = True  # signed thinking blocks go back on the tool-call turn
    signs_reasoning = True
    na = {"reasoning_only_promoted": "with thinking off Claude sends no thinking blocks, so an answer cannot "
                                     "arrive as reasoning"}
    # extended thinking: thinking {type enabled, budget_tokens >= 1024}, max_tokens above the budget
    thinking_bodies = {"on": {"thinking": {"type": "enabled", "budget_tokens": 2048}, "max_tokens": 6144},
                       "off": {"thinking": ABSENT},
                       "budget": {"thinking": {"type": "enabled", "budget_tokens": 3000}, "max_tokens": 7096}}
    finish_reasons = [("end_turn", FinishReason.STOP), ("max_tokens", FinishReason.LENGTH),
                      ("tool_use", FinishReason.TOOL_CALLS), ("stop_sequence", FinishReason.STOP),
                      ("refusal", FinishReason.CONTENT_FILTER)]
    # input_tokens excludes cached input: litellm adds cache_read_input_tokens to prompt_tokens
    usage_in = Tokens(prompt=56, completion=40, cached=64)
    usage_out = Usage(prompt_tokens=120, completion_tokens=40, reasoning_tokens=0, cached_tokens=64)

    def models(self, server):
        base = {"api_base": server.root_url, "api_key": "sk-ant-test"}
        return {"m": {"model": "anthropic/claude-sonnet-4-5", **base}, "think": {"model": "anthropic/claude-sonnet-4-5", **base}}

    def blocks(self, turn: Turn) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        if turn.reasoning:
            out.append(("thinking", turn.reasoning))
        if turn.text:
            out.append(("text", turn.text))
        out += [("tool_use", call) for call in turn.calls]
        return out

    def stop_reason(self, turn: Turn) -> str:
        return turn.finish or ("tool_use" if turn.calls else "end_turn")

    def stream(self, turn: Turn) -> Raw:
        u = turn.usage
        events: list[dict[str, Any]] = [
            {"type": "message_start", "message": {
                "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [], "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": u.prompt, "cache_creation_input_tokens": 0, "cache_read_input_tokens": u.cached,
                          "output_tokens": 1}}},
            {"type": "ping"}]
        for index, (kind, value) in enumerate(self.blocks(turn)):
            if kind == "thinking":
                events.append({"type": "content_block_start", "index": index,
                               "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
                events += [{"type": "content_block_delta", "index": index,
                            "delta": {"type": "thinking_delta", "thinking": p}} for p in pieces(value)]
                events.append({"type": "content_block_delta", "index": index,
                               "delta": {"type": "signature_delta", "signature": turn.signature}})
            elif kind == "text":
                events.append({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
                events += [{"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}
                           for p in pieces(value)]
            else:
                events.append({"type": "content_block_start", "index": index, "content_block": {
                    "type": "tool_use", "id": value.id, "name": value.name, "input": {}}})
                events += [{"type": "content_block_delta", "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": p}}
                           for p in pieces(json.dumps(value.arguments), 6)]
            events.append({"type": "content_block_stop", "index": index})
        events += [{"type": "message_delta", "delta": {"stop_reason": self.stop_reason(turn), "stop_sequence": None},
                    "usage": {"output_tokens": u.completion}},
                   {"type": "message_stop"}]
        return Raw(headers={"Content-Type": "text/event-stream"}, frames=sse(events, named=True))

    def answer(self, turn: Turn) -> Raw:
        content: list[dict[str, Any]] = []
        for kind, value in self.blocks(turn):
            if kind == "thinking":
                content.append({"type": "thinking", "thinking": value, "signature": turn.signature})
            elif kind == "text":
                content.append({"type": "text", "text": value})
            else:
                content.append({"type": "tool_use", "id": value.id, "name": value.name, "input": value.arguments})
        body = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": content,
                "stop_reason": self.stop_reason(turn), "stop_sequence": None,
                "usage": {"input_tokens": turn.usage.prompt, "output_tokens": turn.usage.completion}}
        return Raw(headers={"Content-Type": "application/json"}, body=json.dumps(body).encode())

    def error(self, status: int, retry_after: float | None = None) -> Raw:
        headers = {"Content-Type": "application/json", "request-id": "req_011"}
        if retry_after is not None:
            headers["retry-after"] = f"{retry_after:g}"
        body = {"type": "error", "error": {"type": ERRORS.get(status, "api_error"), "message": f"provider says {status}"}}
        return Raw(status=status, headers=headers, body=json.dumps(body).encode())

    def tool_names(self, body):
        return {tool["name"] for tool in body["tools"]}

    def check_history(self, body):
        messages = body["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        assert "You answer briefly." in json.dumps(body["system"])
        turn = messages[1]["content"]
        assert [b["type"] for b in turn] == ["thinking", "text", "tool_use"]
        assert (turn[0]["thinking"], turn[0]["signature"]) == ("Need the weather tool.", "c2lnLWhpc3Rvcnk=")
        assert turn[1]["text"] == "Checking." and (turn[2]["id"], turn[2]["input"]) == ("call_w1", {"city": "Paris"})
        (result,) = messages[2]["content"]
        assert (result["type"], result["tool_use_id"]) == ("tool_result", "call_w1")
        assert "<think>" not in json.dumps(body)


PROFILE = Anthropic()
test_conformance = conformance(PROFILE)


async def test_signed_thinking_round_trips_across_turns_with_tools(wire, make_gateway):
    """Turn 1 streams a signed thinking block and two tool calls; turn 2 sends that block back unchanged."""
    gw = make_gateway(PROFILE.models(wire))
    wire.queue(PROFILE.stream(Turn(reasoning="Two tools are needed.", calls=PARALLEL, signature="RXFzaWc=")))
    first = [e async for e in await gw.chat_stream(ChatRequest(model="think", messages=[Message("user", "Paris?")],
                                                               thinking=ON, tools=[WEATHER, TIME]))]
    blocks = [e.block for e in first if isinstance(e, ThinkingBlockEvent)]
    calls = [e.call for e in first if isinstance(e, ToolCallEvent)]
    assert blocks == [ThinkingBlock(thinking="Two tools are needed.", signature="RXFzaWc=")] and len(calls) == 2
    history = [Message("user", "Paris?"), Message("assistant", "", tool_calls=calls, thinking_blocks=blocks),
               *[Message("tool", "ok", tool_call_id=c.id, name=c.name) for c in calls]]
    wire.queue(PROFILE.stream(Turn(text="Done.")))
    second = [e async for e in await gw.chat_stream(ChatRequest(model="think", messages=history, thinking=ON,
                                                                tools=[WEATHER, TIME]))]
    assert second[-1].reason == FinishReason.STOP
    sent = wire.chat_bodies[-1]["messages"][1]["content"]
    assert sent[0] == {"type": "thinking", "thinking": "Two tools are needed.", "signature": "RXFzaWc="}
    assert [b["type"] for b in sent[1:]] == ["tool_use", "tool_use"]


async def test_opus_4_7_never_gets_sampling_parameters(wire, make_gateway):
    from services.llm_gateway.core.types import Generation

    gw = make_gateway({"opus": {"model": "anthropic/claude-opus-4-7", "api_base": wire.root_url, "api_key": "k"}})
    wire.queue(PROFILE.stream(Turn(text="ok")))
    request = ChatRequest(model="opus", messages=[Message("user", "hi")], generation=Generation(temperature=0.3, top_p=0.5))
    assert [e async for e in await gw.chat_stream(request)][-1].reason == FinishReason.STOP
    assert "temperature" not in wire.chat_bodies[-1] and "top_p" not in wire.chat_bodies[-1]


