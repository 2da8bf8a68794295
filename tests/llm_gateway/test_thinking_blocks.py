"""Anthropic signed thinking blocks: returned with the answer, echoed back on tool-call turns, stripped elsewhere.

The scripted server speaks Anthropic's /v1/messages (JSON and SSE, with signature_delta and
redacted_thinking); every assertion on the way back is on the exact request body it received."""

from __future__ import annotations

import json

import pytest

from services.llm_gateway.core.thinking_blocks import ThinkingBlockAssembler
from services.llm_gateway.core.types import (
    ChatRequest, FinishReason, Message, Thinking, ThinkingBlock, ThinkingBlockDelta, ThinkingBlockEvent, ThinkingMode,
    ToolCall, ToolCallEvent, ToolSpec,
)
from tests.llm_gateway.conftest import collect
from tests.support.openai_server import Reply

ON = Thinking(ThinkingMode.ENABLED)
WEATHER = ToolSpec("get_weather", "Weather of a city", {"type": "object", "properties": {"city": {"type": "string"}},
                                                         "required": ["city"]})
SIGNED = ThinkingBlock(thinking="The user wants the weather; call the tool.", signature="c2lnbmF0dXJlLTE=")
REDACTED = ThinkingBlock(redacted_data="RU5DUllQVEVE")


@pytest.fixture
def gw(make_gateway, scripted):
    return make_gateway({
        "claude": {"model": "anthropic/claude-sonnet-4-5", "api_base": scripted.root_url, "api_key": "k-test"},
        "gpt": {"model": "openai/gpt-4o", "api_base": scripted.base_url, "api_key": "k-test"},
        "compat": {"model": "openai/my-model", "api_base": scripted.base_url, "api_key": "k-test"},
    })


def tool_turn_history() -> list[Message]:
    return [Message("user", "Weather in Paris?"),
            Message("assistant", "", tool_calls=[ToolCall("toolu_1", "get_weather", '{"city": "Paris"}')],
                    thinking_blocks=[SIGNED, REDACTED]),
            Message("tool", "sunny, 21 C", tool_call_id="toolu_1", name="get_weather")]


def blocks_of(events) -> list[ThinkingBlock]:
    return [e.block for e in events if isinstance(e, ThinkingBlockEvent)]


async def test_streamed_thinking_block_arrives_whole_with_its_signature(gw, scripted):
    scripted.queue(Reply(content="Paris.", reasoning_content="The user asks about France.", chunk_size=5,
                         signature="c2lnLXN0cmVhbQ=="))
    events = await collect(gw, ChatRequest(model="claude", messages=[Message("user", "Capital?")], thinking=ON))
    assert blocks_of(events) == [ThinkingBlock(thinking="The user asks about France.", signature="c2lnLXN0cmVhbQ==")]
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ThinkingBlockEvent") > kinds.index("TextEvent") and kinds[-2:] == ["UsageEvent", "FinishEvent"]


async def test_chat_returns_signed_and_redacted_blocks(gw, scripted):
    scripted.queue(Reply(content="Paris.", reasoning_content="Thinking it over.", signature="c2lnLWNoYXQ=",
                         redacted_thinking=["RU5DMQ=="]))
    result = await gw.chat(ChatRequest(model="claude", messages=[Message("user", "Capital?")], thinking=ON))
    assert result.text == "Paris." and result.reasoning == "Thinking it over."
    assert result.thinking_blocks == [ThinkingBlock(thinking="Thinking it over.", signature="c2lnLWNoYXQ="),
                                      ThinkingBlock(redacted_data="RU5DMQ==")]


async def test_blocks_are_carried_even_without_reasoning_events(gw, scripted):
    scripted.queue(Reply(content="Paris.", reasoning_content="Hidden.", signature="c2ln"))
    events = await collect(gw, ChatRequest(model="claude", messages=[Message("user", "Capital?")], thinking=ON,
                                           with_reasoning=False))
    assert blocks_of(events) == [ThinkingBlock(thinking="Hidden.", signature="c2ln")]
    assert not [e for e in events if type(e).__name__.startswith("Think") and not isinstance(e, ThinkingBlockEvent)]


async def test_tool_turn_blocks_come_before_the_tool_calls_and_round_trip(gw, scripted):
    scripted.queue(Reply(reasoning_content="Need the weather tool.", signature="c2lnLXRvb2w=", redacted_thinking=["RU5D"],
                         tool_calls=[{"id": "toolu_9", "name": "get_weather", "arguments": '{"city": "Paris"}'}]))
    first = await collect(gw, ChatRequest(model="claude", messages=[Message("user", "Weather in Paris?")], thinking=ON,
                                          tools=[WEATHER]))
    kinds = [type(e).__name__ for e in first]
    assert kinds.index("ThinkingBlockEvent") < kinds.index("ToolCallEvent") and first[-1].reason == FinishReason.TOOL_CALLS
    blocks = blocks_of(first)
    assert blocks == [ThinkingBlock(thinking="Need the weather tool.", signature="c2lnLXRvb2w="), ThinkingBlock(redacted_data="RU5D")]
    (call,) = [e.call for e in first if isinstance(e, ToolCallEvent)]
    # the client runs the tool and sends the turn back with the blocks it received
    scripted.queue(Reply(content="Sunny."))
    history = [Message("user", "Weather in Paris?"), Message("assistant", "", tool_calls=[call], thinking_blocks=blocks),
               Message("tool", "sunny", tool_call_id=call.id, name=call.name)]
    await collect(gw, ChatRequest(model="claude", messages=history, thinking=ON, tools=[WEATHER]))
    assistant = scripted.chat_bodies[-1]["messages"][1]
    assert assistant == {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Need the weather tool.", "signature": "c2lnLXRvb2w="},
        {"type": "redacted_thinking", "data": "RU5D"},
        {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {"city": "Paris"}}]}


async def test_anthropic_with_tools_gets_the_signed_blocks_back_unchanged(gw, scripted):
    scripted.queue(Reply(content="It is sunny."))
    await gw.chat(ChatRequest(model="claude", messages=tool_turn_history(), thinking=ON, tools=[WEATHER]))
    body = scripted.chat_bodies[-1]
    assert body["messages"][1]["content"][:2] == [
        {"type": "thinking", "thinking": SIGNED.thinking, "signature": SIGNED.signature},
        {"type": "redacted_thinking", "data": REDACTED.redacted_data}]
    assert body["messages"][1]["content"][2]["type"] == "tool_use"


async def test_anthropic_turns_without_tool_calls_are_sent_without_blocks(gw, scripted):
    history = [Message("user", "Capital?"), Message("assistant", "Paris.", thinking_blocks=[SIGNED]), Message("user", "And Spain?")]
    scripted.queue(Reply(content="Madrid."))
    await gw.chat(ChatRequest(model="claude", messages=history, thinking=ON))
    sent = json.dumps(scripted.chat_bodies[-1]["messages"])
    assert SIGNED.signature not in sent and "thinking" not in sent


@pytest.mark.parametrize("model", ["gpt", "compat"])
async def test_other_providers_never_receive_thinking_blocks(gw, scripted, model):
    scripted.queue(Reply(content="It is sunny."))
    await gw.chat(ChatRequest(model=model, messages=tool_turn_history(), tools=[WEATHER]))
    assistant = scripted.chat_bodies[-1]["messages"][1]
    assert "tool_calls" in assistant and not set(assistant) - {"role", "content", "tool_calls"}
    assert SIGNED.signature not in json.dumps(scripted.chat_bodies[-1])


def test_assembler_joins_pieces_by_index_and_keeps_only_verifiable_blocks():
    assembler = ThinkingBlockAssembler()
    for piece in [ThinkingBlockDelta(0, thinking="Let "), ThinkingBlockDelta(0, thinking="me"),
                  ThinkingBlockDelta(0, signature="s0"), ThinkingBlockDelta(1, redacted_data="R1"),
                  ThinkingBlockDelta(2, thinking="never signed")]:
        assembler.feed(piece)
    assert assembler.blocks() == [ThinkingBlock(thinking="Let me", signature="s0"), ThinkingBlock(redacted_data="R1")]


def test_assembler_without_indexes_starts_a_new_block_after_a_signature():
    assembler = ThinkingBlockAssembler()
    for piece in [ThinkingBlockDelta(None, thinking="a"), ThinkingBlockDelta(None, signature="s1"),
                  ThinkingBlockDelta(None, thinking="b"), ThinkingBlockDelta(None, signature="s2")]:
        assembler.feed(piece)
    assert assembler.blocks() == [ThinkingBlock("a", "s1"), ThinkingBlock("b", "s2")]
