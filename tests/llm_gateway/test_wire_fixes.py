"""Behaviours that were wrong when litellm talked to a provider in its own wire format, one test each.

Every test replays the provider's own bytes (tests.support.openai_server.Raw) and drives the gateway through
litellm over real HTTP; the wider per-provider conformance suite lives in tests/llm_gateway/providers/."""

from __future__ import annotations

import json

import pytest

from services.llm_gateway.core.types import (
    ChatRequest, ErrorKind, FinishEvent, FinishReason, Message, TextEvent, ThinkDeltaEvent, ThinkEndEvent,
)
from tests.llm_gateway.conftest import collect
from tests.support.openai_server import Raw


def sse(events: list[dict]) -> list[bytes]:
    return [b"data: " + json.dumps(e).encode() + b"\r\n\r\n" for e in events]


def text_of(events) -> str:
    return "".join(e.text for e in events if isinstance(e, TextEvent))


# Gemini streamGenerateContent?alt=sse (ai.google.dev/api/generate-content#method:-models.streamgeneratecontent):
# each event is a GenerateContentResponse; the last candidate carries finishReason.
GEMINI_STREAM = [
    {"candidates": [{"content": {"parts": [{"text": "Hello"}], "role": "model"}, "index": 0}],
     "usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 5}, "modelVersion": "gemini-2.5-flash"},
    {"candidates": [{"content": {"parts": [{"text": " world"}], "role": "model"}, "finishReason": "STOP", "index": 0}],
     "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7},
     "modelVersion": "gemini-2.5-flash"},
]


@pytest.fixture
def gemini(make_gateway, scripted):
    return make_gateway({"g": {"model": "gemini/gemini-2.5-flash", "api_base": scripted.root_url + "/v1beta",
                               "api_key": "k-test"}})


async def test_gemini_stream_ending_in_stop_finishes_stop(gemini, scripted):
    scripted.queue(Raw(headers={"Content-Type": "text/event-stream"}, frames=sse(GEMINI_STREAM)))
    events = await collect(gemini, ChatRequest(model="g", messages=[Message("user", "hi")]))
    assert text_of(events) == "Hello world"
    assert events[-1] == FinishEvent(FinishReason.STOP, "gemini/gemini-2.5-flash")
    assert ":streamGenerateContent?alt=sse" in scripted.requests[0].path


# OpenAI-compatible chat.completion.chunk SSE with DeepSeek/vLLM's `reasoning_content` delta field
# (api-docs.deepseek.com/guides/reasoning_model, docs.vllm.ai/en/latest/features/reasoning_outputs.html).
def chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def openai_sse(*chunks: dict) -> Raw:
    return Raw(headers={"Content-Type": "text/event-stream"}, frames=sse(list(chunks)) + [b"data: [DONE]\n\n"])


TOOL_DELTA = {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                              "function": {"name": "lookup", "arguments": "{}"}}]}


@pytest.fixture
def compat(make_gateway, scripted):
    return make_gateway({"m": {"model": "openai/my-model", "api_base": scripted.base_url, "api_key": "k-test"}})


def think_ends(events) -> list[bool]:
    return [e.truncated for e in events if isinstance(e, ThinkEndEvent)]


@pytest.mark.parametrize(("tail", "truncated", "reason"), [
    ([chunk(TOOL_DELTA), chunk({}, "tool_calls")], False, FinishReason.TOOL_CALLS),
    ([chunk({}, "stop")], False, FinishReason.STOP),
    ([chunk({}, "length")], True, FinishReason.LENGTH),
], ids=["tool_call", "stop", "length"])
async def test_think_end_is_truncated_only_when_the_stream_ended_inside_reasoning(compat, scripted, tail, truncated, reason):
    from services.llm_gateway.core.types import ToolSpec

    scripted.queue(openai_sse(chunk({"role": "assistant", "reasoning_content": "Check the tool."}), *tail))
    events = await collect(compat, ChatRequest(model="m", messages=[Message("user", "hi")],
                                               tools=[ToolSpec("lookup", "look up", {"type": "object"})]))
    assert "".join(e.text for e in events if isinstance(e, ThinkDeltaEvent)) == "Check the tool."
    assert think_ends(events) == [truncated]
    assert events[-1].reason == reason


# Anthropic Messages API response (docs.anthropic.com/en/api/messages) whose `content` is null: litellm's own
# transformation then fails with a TypeError, which it wraps in APIConnectionError.
ANTHROPIC_NULL_CONTENT = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                          "content": None, "stop_reason": "end_turn", "stop_sequence": None,
                          "usage": {"input_tokens": 3, "output_tokens": 1}}


async def test_a_python_error_inside_litellm_is_internal_and_not_retried(make_gateway, scripted):
    gw = make_gateway({"c": {"model": "anthropic/claude-sonnet-4-5", "api_base": scripted.root_url, "api_key": "k-test"}})
    for _ in range(3):
        scripted.queue(Raw(headers={"Content-Type": "application/json"}, body=json.dumps(ANTHROPIC_NULL_CONTENT).encode()))
    result = await gw.chat(ChatRequest(model="c", messages=[Message("user", "hi")]))
    assert result.finish_reason == FinishReason.ERROR
    assert result.error.kind == ErrorKind.INTERNAL and not result.error.retryable
    assert "TypeError" in result.error.message and "not iterable" in result.error.message
    assert "Traceback" not in result.error.message
    assert len(scripted.requests) == 1


# Qwen3 behind SGLang/vLLM with a reasoning parser and chat_template_kwargs.enable_thinking=false
# (qwen.readthedocs.io/en/latest/deployment/sglang.html, docs.vllm.ai reasoning outputs): the parser finds no
# </think> and reports the whole answer as reasoning_content, content stays empty.
QWEN_REASONING_ONLY = [chunk({"role": "assistant", "content": None, "reasoning_content": "The answer"}),
                       chunk({"reasoning_content": " is 4."}), chunk({}, "stop")]


@pytest.fixture
def qwen(make_gateway, scripted):
    return make_gateway({"q": {"model": "hosted_vllm/Qwen/Qwen3-8B", "api_base": scripted.base_url, "provider": "VLLM"}})


async def test_thinking_off_reasoning_only_answer_is_promoted_and_flagged(qwen, scripted):
    from services.llm_gateway.core.types import Thinking, ThinkingMode, ThinkStartEvent

    for thinking in (Thinking(), Thinking(ThinkingMode.DISABLED)):  # Qwen3's default is off, as is asking for off
        scripted.clear()
        scripted.queue(openai_sse(*QWEN_REASONING_ONLY))
        events = await collect(qwen, ChatRequest(model="q", messages=[Message("user", "2+2?")], thinking=thinking))
        assert text_of(events) == "The answer is 4."
        assert not [e for e in events if isinstance(e, (ThinkStartEvent, ThinkDeltaEvent, ThinkEndEvent))]
        assert events[-1].reason == FinishReason.STOP and events[-1].reasoning_as_answer
        assert scripted.requests[0].body["chat_template_kwargs"] == {"enable_thinking": False}
    scripted.queue(Raw(headers={"Content-Type": "application/json"}, body=json.dumps({
        "id": "c", "object": "chat.completion", "created": 1, "model": "Qwen/Qwen3-8B",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "reasoning_content": "Four."},
                     "finish_reason": "stop"}]}).encode()))
    result = await qwen.chat(ChatRequest(model="q", messages=[Message("user", "2+2?")]))
    assert (result.text, result.reasoning, result.reasoning_as_answer) == ("Four.", "", True)


async def test_thinking_off_reasoning_followed_by_an_answer_stays_reasoning(qwen, scripted):
    scripted.queue(openai_sse(chunk({"reasoning_content": "Hmm."}), chunk({"content": "4"}), chunk({}, "stop")))
    events = await collect(qwen, ChatRequest(model="q", messages=[Message("user", "2+2?")]))
    assert "".join(e.text for e in events if isinstance(e, ThinkDeltaEvent)) == "Hmm." and text_of(events) == "4"
    assert not events[-1].reasoning_as_answer


async def test_thinking_on_reasoning_only_stays_reasoning(qwen, scripted):
    from services.llm_gateway.core.types import Thinking, ThinkingMode

    scripted.queue(openai_sse(*QWEN_REASONING_ONLY))
    events = await collect(qwen, ChatRequest(model="q", messages=[Message("user", "2+2?")],
                                             thinking=Thinking(ThinkingMode.ENABLED)))
    assert text_of(events) == "" and not events[-1].reasoning_as_answer
    assert "".join(e.text for e in events if isinstance(e, ThinkDeltaEvent)) == "The answer is 4."


def test_the_flag_reaches_the_wire():
    from services.llm_gateway.server import event_pb

    assert event_pb(FinishEvent(FinishReason.STOP, "m", reasoning_as_answer=True)).finish.reasoning_as_answer


# MiniMax's OpenAI-compatible chat completions (platform.minimax.io/docs/api-reference/text-openai-api): the
# model's chat-template sentinels (`]~b]`, `[e~[`, `]<]…[>[`) leak into content, split across deltas.
MINIMAX_DELTAS = ["Hello ]<]mini", "max[>[from Mini", "Max]~", "b]ai.[e", "~["]


@pytest.fixture
def minimax(make_gateway, scripted):
    return make_gateway({"mm": {"model": "minimax/MiniMax-M2", "api_base": scripted.base_url, "api_key": "k-test"}})


async def test_minimax_control_markers_are_stripped_when_streaming(minimax, scripted):
    scripted.queue(openai_sse(*[chunk({"content": d}) for d in MINIMAX_DELTAS], chunk({}, "stop")))
    events = await collect(minimax, ChatRequest(model="mm", messages=[Message("user", "hi")]))
    assert text_of(events) == "Hello from MiniMaxai."
    assert scripted.requests[0].path.endswith("/chat/completions")


async def test_minimax_control_markers_are_stripped_when_streaming_with_tools(minimax, scripted):
    from services.llm_gateway.core.types import ToolCallEvent, ToolSpec

    call = {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q": "MiniMax]<]minimax[>["}'}}]}
    deltas = [*MINIMAX_DELTAS[:3], "b]"]
    scripted.queue(openai_sse(*[chunk({"content": d}) for d in deltas], chunk(call), chunk({}, "tool_calls")))
    events = await collect(minimax, ChatRequest(model="mm", messages=[Message("user", "hi")],
                                                tools=[ToolSpec("lookup", "look up", {"type": "object"})]))
    assert text_of(events) == "Hello from MiniMax"
    assert [e.call.arguments_json for e in events if isinstance(e, ToolCallEvent)] == ['{"q": "MiniMax"}']


async def test_minimax_control_markers_are_stripped_in_chat(minimax, scripted):
    scripted.queue(Raw(headers={"Content-Type": "application/json"}, body=json.dumps({
        "id": "c", "object": "chat.completion", "created": 1, "model": "MiniMax-M2",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(MINIMAX_DELTAS)},
                     "finish_reason": "stop"}]}).encode()))
    result = await minimax.chat(ChatRequest(model="mm", messages=[Message("user", "hi")]))
    assert result.text == "Hello from MiniMaxai."


# Reasoning echo (api-docs.deepseek.com/guides/thinking_mode#tool-calls: in thinking mode with tools, each
# assistant tool-call turn goes back with its reasoning_content). RAGFlow's stored history carries that
# reasoning inline, as a <think> block in the content.
def inline_history() -> list[Message]:
    from services.llm_gateway.core.types import ToolCall

    return [Message("user", "Weather in Paris?"),
            Message("assistant", "<think>Need the weather tool.</think>Checking.",
                    tool_calls=[ToolCall("call_1", "get_weather", '{"city": "Paris"}')]),
            Message("tool", "sunny", tool_call_id="call_1", name="get_weather")]


def assistant_turn(body: dict) -> dict:
    return next(m for m in body["messages"] if m["role"] == "assistant")


@pytest.mark.parametrize(("model", "entry", "reasoning", "content"), [
    ("deepseek-chat", {"model": "deepseek/deepseek-chat", "provider": "DeepSeek"}, "Need the weather tool.", "Checking."),
    ("kimi-k2-thinking", {"model": "moonshot/kimi-k2-thinking", "provider": "Moonshot"}, "Need the weather tool.", "Checking."),
    ("glm-4.6", {"model": "openai/glm-4.6", "provider": "ZHIPU-AI"}, "Need the weather tool.", "Checking."),
    ("minimax-m2", {"model": "minimax/MiniMax-M2"}, None, "<think>Need the weather tool.</think>\nChecking."),
    ("gpt-4o", {"model": "openai/gpt-4o", "provider": "OpenAI"}, None, "Checking."),
    ("qwen3", {"model": "hosted_vllm/Qwen/Qwen3-8B", "provider": "VLLM"}, None, "Checking."),
])
async def test_inline_reasoning_of_a_tool_call_turn_is_echoed_where_required_and_dropped_elsewhere(
        make_gateway, scripted, model, entry, reasoning, content):
    from services.llm_gateway.core.types import Thinking, ThinkingMode, ToolSpec

    gw = make_gateway({model: {**entry, "api_base": scripted.base_url, "api_key": "k-test"}})
    scripted.queue(openai_sse(chunk({"content": "Sunny."}), chunk({}, "stop")))
    events = await collect(gw, ChatRequest(model=model, messages=inline_history(), thinking=Thinking(ThinkingMode.ENABLED),
                                           tools=[ToolSpec("get_weather", "weather", {"type": "object"})]))
    assert events[-1].reason == FinishReason.STOP, events[-1]
    turn = assistant_turn(scripted.requests[0].body)
    assert turn.get("reasoning_content") == reasoning
    assert turn["content"] == content
    assert turn["tool_calls"][0]["id"] == "call_1"
