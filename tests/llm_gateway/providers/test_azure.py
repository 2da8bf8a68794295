"""Azure OpenAI (learn.microsoft.com/azure/ai-foundry/openai/reference, /concepts/content-filter): the OpenAI
chat format at /openai/deployments/{deployment}/chat/completions?api-version=…, key in `api-key`; the stream
starts with a `prompt_filter_results` chunk (empty choices, no model) and content chunks carry
`content_filter_results`; filtered output ends with finish_reason content_filter."""

from __future__ import annotations

from services.llm_gateway.core.types import ChatRequest, FinishReason, Message
from tests.llm_gateway.providers.harness import Turn, conformance
from tests.llm_gateway.providers.openai_wire import OpenAIChatProfile

SAFE = {"hate": {"filtered": False, "severity": "safe"}, "self_harm": {"filtered": False, "severity": "safe"},
        "sexual": {"filtered": False, "severity": "safe"}, "violence": {"filtered": False, "severity": "safe"}}
NO_REASONING_TEXT = "Azure OpenAI's chat completions return no reasoning text (reasoning_tokens in usage only)"


class AzureOpenAI(OpenAIChatProfile):
    name = "Azure OpenAI"
    families = ("openai-reasoning",)
    reasoning_field = None
    model_name = "gpt-5-mini-2025-08-07"  # (o-series deployments are fake-streamed by litellm: one JSON answer)
    na = {"reasoning_channel": NO_REASONING_TEXT, "reasoning_only_promoted": NO_REASONING_TEXT}
    thinking_bodies = {"on": {"reasoning_effort": "medium"}, "off": {"reasoning_effort": "minimal"},
                       "budget": {"reasoning_effort": "high"}}
    finish_reasons = [("stop", FinishReason.STOP), ("length", FinishReason.LENGTH),
                      ("tool_calls", FinishReason.TOOL_CALLS), ("content_filter", FinishReason.CONTENT_FILTER)]

    def leading(self):
        return [{"choices": [], "created": 0, "id": "", "model": "", "object": "",
                 "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": SAFE}]}]

    def chunk(self, delta, finish=None, **extra):
        out = super().chunk(delta, finish, **extra)
        if delta.get("content"):
            out["choices"][0]["content_filter_results"] = SAFE
        return out

    def models(self, server):
        base = {"api_base": server.root_url, "api_key": "azure-test-key"}
        return {"m": {"model": "azure/gpt-4o", **base}, "think": {"model": "azure/gpt-5-mini", **base}}


PROFILE = AzureOpenAI()
test_conformance = conformance(PROFILE)


async def test_deployment_path_api_version_and_key_header(wire, make_gateway):
    wire.queue(PROFILE.stream(Turn(text="ok")))
    events = [e async for e in await make_gateway(PROFILE.models(wire)).chat_stream(
        ChatRequest(model="m", messages=[Message("user", "hi")]))]
    assert events[-1].reason == FinishReason.STOP
    (request,) = wire.requests
    assert request.path.startswith("/openai/deployments/gpt-4o/chat/completions?api-version=")
    assert {k.lower(): v for k, v in request.headers.items()}["api-key"] == "azure-test-key"
