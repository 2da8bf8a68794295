"""MiniMax (platform.minimax.io/docs/api-reference/text-openai-api, /docs/guides/text-m2-function-call): OpenAI
chat format; M2 always reasons and writes its reasoning inline as `<think>…</think>` at the start of the content
(its own channel on this API), wants that block back in the content of tool-call turns, and its chat-template
sentinels can leak into the text."""

from __future__ import annotations

from services.llm_gateway.core.types import ChatRequest, FinishReason, Message
from tests.llm_gateway.providers.harness import ABSENT, Turn, conformance, shape
from tests.llm_gateway.providers.openai_wire import OpenAIChatProfile

NOTHING = {"thinking": ABSENT, "enable_thinking": ABSENT, "reasoning_effort": ABSENT, "reasoning_split": ABSENT}


class MiniMax(OpenAIChatProfile):
    name = "MiniMax"
    families = ("minimax", "minimax-hosted")
    model_name = "MiniMax-M2"
    echo = "inline"
    na = {"reasoning_only_promoted": "M2 cannot switch thinking off, so reasoning is never the answer"}
    thinking_bodies = {"on": NOTHING, "off": NOTHING, "budget": NOTHING}  # M2 has no switch: nothing is sent
    finish_reasons = [("stop", FinishReason.STOP), ("length", FinishReason.LENGTH),
                      ("tool_calls", FinishReason.TOOL_CALLS)]

    def reasoning_deltas(self, text):
        return [{"content": piece} for piece in ["<think>", *(text[i:i + 8] for i in range(0, len(text), 8)), "</think>\n\n"]]

    def message(self, turn):
        message = super().message(turn)
        if turn.reasoning:
            message["content"] = f"<think>{turn.reasoning}</think>\n\n{turn.text}"
        return message

    def models(self, server):
        base = {"api_base": server.base_url, "api_key": "mm-test"}
        return {"m": {"model": "minimax/MiniMax-M2", **base}, "think": {"model": "minimax/MiniMax-M2", **base}}


PROFILE = MiniMax()
test_conformance = conformance(PROFILE)


async def test_sentinels_are_stripped_and_the_name_kept(wire, make_gateway):
    wire.queue(PROFILE.stream(Turn(reasoning="Say hi]~b]", text="Hi from Mini]<]minimax[>[Max[e~[")))
    events = [e async for e in await make_gateway(PROFILE.models(wire)).chat_stream(
        ChatRequest(model="m", messages=[Message("user", "hi")]))]
    assert shape(events)[:4] == [("start",), ("think", "Say hi"), ("end", False), ("text", "Hi from MiniMax")]


async def test_minimax_served_elsewhere_is_the_same_family(wire, make_gateway):
    gw = make_gateway({"or": {"model": "openai/minimax/minimax-m2", "api_base": wire.base_url, "api_key": "k"}})
    wire.queue(PROFILE.stream(Turn(text="A]~b]B")))
    events = [e async for e in await gw.chat_stream(ChatRequest(model="or", messages=[Message("user", "hi")]))]
    assert shape(events)[0] == ("text", "AB")
