"""Gemini through Google AI Studio (generativelanguage.googleapis.com/v1beta/models/{model}:streamGenerateContent,
key in `x-goog-api-key`); the shapes are in gemini_wire."""

from __future__ import annotations

import pytest

from services.llm_gateway.core.types import ChatRequest, FinishReason, Message, Thinking, ThinkingMode
from tests.llm_gateway.providers.gemini_wire import GeminiProfile
from tests.llm_gateway.providers.harness import Turn, conformance, subset


class GeminiAIStudio(GeminiProfile):
    name = "Gemini (AI Studio)"

    def models(self, server):
        base = {"api_base": server.root_url + "/v1beta", "api_key": "AIza-test"}
        return {"m": {"model": "gemini/gemini-2.5-flash", **base}, "think": {"model": "gemini/gemini-2.5-flash", **base},
                "pro": {"model": "gemini/gemini-2.5-pro", **base}, "g3": {"model": "gemini/gemini-3-pro-preview", **base}}


PROFILE = GeminiAIStudio()
test_conformance = conformance(PROFILE)


async def test_requests_go_to_stream_generate_content_with_the_key_header(wire, make_gateway):
    wire.queue(PROFILE.stream(Turn(text="ok")))
    gw = make_gateway(PROFILE.models(wire))
    assert [e async for e in await gw.chat_stream(ChatRequest(model="m", messages=[Message("user", "hi")]))][-1].reason \
        == FinishReason.STOP
    (request,) = wire.requests
    assert request.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert {k.lower(): v for k, v in request.headers.items()}["x-goog-api-key"] == "AIza-test"


@pytest.mark.parametrize(("model", "expected"), [
    # 2.5 Pro cannot switch thinking off: its minimum budget instead
    ("pro", {"generationConfig": {"thinkingConfig": {"thinkingBudget": 128}}}),
    # Gemini 3 cannot either: the lowest level, without thoughts
    ("g3", {"generationConfig": {"thinkingConfig": {"thinkingLevel": "low", "includeThoughts": False}}}),
])
async def test_thinking_off_for_models_that_cannot_switch_it_off(wire, make_gateway, model, expected):
    wire.queue(PROFILE.stream(Turn(text="ok")))
    gw = make_gateway(PROFILE.models(wire))
    request = ChatRequest(model=model, messages=[Message("user", "hi")], thinking=Thinking(ThinkingMode.DISABLED))
    assert [e async for e in await gw.chat_stream(request)][-1].reason == FinishReason.STOP
    subset(expected, wire.chat_bodies[-1])
