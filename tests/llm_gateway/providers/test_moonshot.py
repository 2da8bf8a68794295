"""Moonshot / Kimi (platform.moonshot.ai/docs/api/chat, /docs/guide/use-kimi-k2-thinking-model): OpenAI chat
format with `reasoning_content` deltas; the stream's usage comes inside the last choice (`choices[0].usage`,
with `cached_tokens`), not as a separate chunk; `thinking: {type}` switches thinking on the K2.5/K2.6 models,
which also fix their sampling; multi-step tool calls keep each turn's reasoning_content."""

from __future__ import annotations

from services.llm_gateway.core.types import FinishReason, Usage
from tests.llm_gateway.providers.harness import ABSENT, Tokens, Turn, conformance
from tests.llm_gateway.providers.openai_wire import OpenAIChatProfile

FIXED = {"top_p": 0.95, "n": 1, "presence_penalty": 0.0, "frequency_penalty": 0.0, "temperature": ABSENT}


class Moonshot(OpenAIChatProfile):
    name = "Moonshot / Kimi"
    families = ("kimi",)
    model_name = "kimi-k2.5"
    echo = "field"
    thinking_bodies = {"on": {"thinking": {"type": "enabled"}, **FIXED},
                       "off": {"thinking": {"type": "disabled"}, **FIXED},
                       "budget": {"thinking": {"type": "enabled"}, **FIXED}}
    finish_reasons = [("stop", FinishReason.STOP), ("length", FinishReason.LENGTH),
                      ("tool_calls", FinishReason.TOOL_CALLS), ("content_filter", FinishReason.CONTENT_FILTER)]
    usage_in = Tokens(prompt=120, completion=40, cached=64)
    usage_out = Usage(prompt_tokens=120, completion_tokens=40, reasoning_tokens=0, cached_tokens=64)

    def usage(self, tokens: Tokens):
        return {"prompt_tokens": tokens.prompt, "completion_tokens": tokens.completion,
                "total_tokens": tokens.prompt + tokens.completion, "cached_tokens": tokens.cached}

    def trailing(self, turn: Turn, finish: str):
        last = self.chunk({}, finish)
        last["choices"][0]["usage"] = self.usage(turn.usage)
        return [last]

    def models(self, server):
        base = {"api_base": server.base_url, "api_key": "sk-test", "provider": "Moonshot"}
        return {"m": {"model": "moonshot/kimi-k2.5", **base}, "think": {"model": "moonshot/kimi-k2.5", **base}}


PROFILE = Moonshot()
test_conformance = conformance(PROFILE)
