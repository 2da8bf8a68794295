"""Tencent Hunyuan, OpenAI-compatible endpoint (cloud.tencent.com/document/product/1729/111007,
api.hunyuan.cloud.tencent.com/v1/chat/completions): OpenAI chat format; hunyuan-t1 streams its reasoning in
`reasoning_content` and has no thinking switch; presence/frequency penalties are not accepted (dropped)."""

from __future__ import annotations

from services.llm_gateway.core.types import ChatRequest, FinishReason, Generation, Message
from tests.llm_gateway.providers.harness import ABSENT, Turn, conformance
from tests.llm_gateway.providers.openai_wire import OpenAIChatProfile

NOTHING = {"thinking": ABSENT, "enable_thinking": ABSENT, "reasoning_effort": ABSENT}


class Hunyuan(OpenAIChatProfile):
    name = "Tencent Hunyuan"
    families = ("hunyuan",)
    model_name = "hunyuan-t1-latest"
    na = {"reasoning_only_promoted": "hunyuan-t1 has no thinking switch, so reasoning is never the answer"}
    thinking_bodies = {"on": NOTHING, "off": NOTHING, "budget": NOTHING}
    finish_reasons = [("stop", FinishReason.STOP), ("length", FinishReason.LENGTH),
                      ("tool_calls", FinishReason.TOOL_CALLS), ("sensitive", FinishReason.CONTENT_FILTER)]

    def models(self, server):
        entry = {"model": "openai/hunyuan-t1-latest", "api_base": server.base_url, "api_key": "hy-test",
                 "provider": "Tencent Hunyuan"}
        return {"m": entry, "think": entry}


PROFILE = Hunyuan()
test_conformance = conformance(PROFILE)


async def test_penalties_are_dropped(wire, make_gateway):
    wire.queue(PROFILE.stream(Turn(text="ok")))
    request = ChatRequest(model="m", messages=[Message("user", "hi")],
                          generation=Generation(presence_penalty=0.5, frequency_penalty=0.5, temperature=0.2))
    events = [e async for e in await make_gateway(PROFILE.models(wire)).chat_stream(request)]
    assert events[-1].reason == FinishReason.STOP
    body = wire.chat_bodies[-1]
    assert "presence_penalty" not in body and "frequency_penalty" not in body and body["temperature"] == 0.2
