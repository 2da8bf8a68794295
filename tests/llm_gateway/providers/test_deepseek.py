"""DeepSeek (api-docs.deepseek.com/api/create-chat-completion, /guides/thinking_mode, /guides/kv_cache): OpenAI
chat format with `reasoning_content` deltas, `thinking: {type}` to switch thinking mode, usage with
prompt_cache_hit_tokens / prompt_cache_miss_tokens, and the tool-call turns' reasoning_content required back."""

from __future__ import annotations

from services.llm_gateway.core.types import FinishReason
from tests.llm_gateway.providers.harness import ABSENT, Tokens, conformance
from tests.llm_gateway.providers.openai_wire import OpenAIChatProfile


class DeepSeek(OpenAIChatProfile):
    name = "DeepSeek"
    families = ("deepseek",)
    model_name = "deepseek-chat"
    echo = "field"
    inline_parsed = False  # DeepSeek reasons only in reasoning_content: <think> in content is the answer's text
    thinking_bodies = {"on": {"thinking": {"type": "enabled"}, "reasoning_effort": ABSENT},
                       "off": {"thinking": {"type": "disabled"}, "reasoning_effort": ABSENT},
                       "budget": {"thinking": {"type": "enabled"}, "reasoning_effort": ABSENT}}
    finish_reasons = [("stop", FinishReason.STOP), ("length", FinishReason.LENGTH),
                      ("tool_calls", FinishReason.TOOL_CALLS), ("content_filter", FinishReason.CONTENT_FILTER)]

    def usage(self, tokens: Tokens):
        return {"prompt_tokens": tokens.prompt, "completion_tokens": tokens.completion,
                "total_tokens": tokens.prompt + tokens.completion, "prompt_tokens_details": {"cached_tokens": tokens.cached},
                "prompt_cache_hit_tokens": tokens.cached, "prompt_cache_miss_tokens": tokens.prompt - tokens.cached,
                "completion_tokens_details": {"reasoning_tokens": tokens.reasoning}}

    def models(self, server):
        base = {"api_base": server.base_url, "api_key": "sk-test", "provider": "DeepSeek"}
        return {"m": {"model": "deepseek/deepseek-chat", **base}, "think": {"model": "deepseek/deepseek-chat", **base}}


PROFILE = DeepSeek()
test_conformance = conformance(PROFILE)
