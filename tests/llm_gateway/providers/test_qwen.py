"""Qwen on DashScope / Model Studio, OpenAI-compatible mode (help.aliyun.com/zh/model-studio/compatibility-of-
openai-with-dashscope, /deep-thinking): `reasoning_content` deltas, `enable_thinking` (and `thinking_budget`) in
the body, thinking only in streamed calls, usage with prompt_tokens_details.cached_tokens and
completion_tokens_details.reasoning_tokens; errors as OpenAI's plus DashScope's code and request_id."""

from __future__ import annotations

from services.llm_gateway.core.types import ChatRequest, FinishReason, Message
from tests.llm_gateway.providers.harness import Turn, conformance, subset
from tests.llm_gateway.providers.openai_wire import OpenAIChatProfile

CODES = {400: "invalid_parameter_error", 401: "invalid_api_key", 429: "limit_requests", 500: "internal_error"}


class DashScopeQwen(OpenAIChatProfile):
    name = "DashScope / Qwen"
    families = ("qwen3-dashscope", "qwen3")
    model_name = "qwen3-32b"
    thinking_bodies = {"on": {"enable_thinking": True, "stream": True},
                       "off": {"enable_thinking": False},
                       "budget": {"enable_thinking": True, "thinking_budget": 3000}}
    finish_reasons = [("stop", FinishReason.STOP), ("length", FinishReason.LENGTH),
                      ("tool_calls", FinishReason.TOOL_CALLS)]

    def error_body(self, status):
        return {"error": {"message": f"provider says {status}", "type": CODES.get(status, "internal_error"), "param": None,
                          "code": CODES.get(status, "internal_error")}, "id": "chatcmpl-1", "request_id": "0ba7-44"}

    def models(self, server):
        base = {"api_base": server.base_url, "api_key": "sk-test", "provider": "Tongyi-Qianwen"}
        return {"m": {"model": "dashscope/qwen3-32b", **base}, "think": {"model": "dashscope/qwen3-32b", **base}}


PROFILE = DashScopeQwen()
test_conformance = conformance(PROFILE)


async def test_chat_with_thinking_on_is_served_by_streaming(wire, make_gateway):
    # DashScope refuses non-streamed calls with thinking on (400 "only support stream mode")
    wire.queue(PROFILE.stream(Turn(reasoning="Sum it.", text="4")))
    from tests.llm_gateway.providers.harness import ON

    result = await make_gateway(PROFILE.models(wire)).chat(ChatRequest(model="think", messages=[Message("user", "2+2?")],
                                                                      thinking=ON))
    assert (result.text, result.reasoning, result.finish_reason) == ("4", "Sum it.", FinishReason.STOP)
    subset({"stream": True, "enable_thinking": True}, wire.chat_bodies[-1])


async def test_qwen3_elsewhere_gets_enable_thinking_in_the_body(wire, make_gateway):
    gw = make_gateway({"q": {"model": "openai/qwen3-32b", "api_base": wire.base_url, "provider": "OpenAI-API-Compatible"}})
    wire.queue(PROFILE.stream(Turn(text="ok")))
    assert [e async for e in await gw.chat_stream(ChatRequest(model="q", messages=[Message("user", "hi")]))][-1].reason \
        == FinishReason.STOP
    subset({"enable_thinking": False}, wire.chat_bodies[-1])
