"""OpenAI Chat Completions (platform.openai.com/docs/api-reference/chat): gpt-4o, and gpt-5 for reasoning effort."""

from __future__ import annotations

from services.llm_gateway.core.types import FinishReason
from tests.llm_gateway.providers.harness import conformance
from tests.llm_gateway.providers.openai_wire import OpenAIChatProfile

NO_REASONING_TEXT = "Chat Completions never returns reasoning text, only usage.completion_tokens_details.reasoning_tokens"


class OpenAI(OpenAIChatProfile):
    name = "OpenAI"
    families = ("openai-reasoning", "generic")
    reasoning_field = None
    na = {"reasoning_channel": NO_REASONING_TEXT, "reasoning_only_promoted": NO_REASONING_TEXT}
    # gpt-5: reasoning_effort (platform.openai.com/docs/guides/reasoning); "minimal" is its lowest setting
    thinking_bodies = {"on": {"reasoning_effort": "medium"},
                       "off": {"reasoning_effort": "minimal"},
                       "budget": {"reasoning_effort": "high"}}
    finish_reasons = [("stop", FinishReason.STOP), ("length", FinishReason.LENGTH),
                      ("tool_calls", FinishReason.TOOL_CALLS), ("content_filter", FinishReason.CONTENT_FILTER)]

    def models(self, server):
        base = {"api_base": server.base_url, "api_key": "sk-test", "provider": "OpenAI"}
        return {"m": {"model": "openai/gpt-4o", **base}, "think": {"model": "openai/gpt-5", **base}}


PROFILE = OpenAI()
test_conformance = conformance(PROFILE)
