"""Groq (console.groq.com/docs/api-reference#chat-create, /docs/reasoning, /docs/errors): OpenAI chat format at
/openai/v1/chat/completions; reasoning models stream the `reasoning` delta field (reasoning_format parsed);
the last chunk also carries `x_groq.usage`; 429 comes with `retry-after`."""

from __future__ import annotations

import json

from services.llm_gateway.core.types import FinishReason, Usage
from tests.llm_gateway.providers.harness import ABSENT, Tokens, Turn, conformance
from tests.llm_gateway.providers.openai_wire import OpenAIChatProfile


class Groq(OpenAIChatProfile):
    name = "Groq"
    families = ("generic",)
    reasoning_field = "reasoning"
    model_name = "openai/gpt-oss-120b"
    thinking_bodies = {"on": {"reasoning_effort": ABSENT}, "off": {"reasoning_effort": ABSENT},
                       "budget": {"reasoning_effort": "high"}}
    finish_reasons = [("stop", FinishReason.STOP), ("length", FinishReason.LENGTH),
                      ("tool_calls", FinishReason.TOOL_CALLS)]
    usage_in = Tokens(prompt=120, completion=40, reasoning=16)
    usage_out = Usage(prompt_tokens=120, completion_tokens=40, reasoning_tokens=16)

    def usage(self, tokens: Tokens):
        return {"queue_time": 0.02, "prompt_tokens": tokens.prompt, "prompt_time": 0.01,
                "completion_tokens": tokens.completion, "completion_time": 0.1,
                "total_tokens": tokens.prompt + tokens.completion, "total_time": 0.11,
                "completion_tokens_details": {"reasoning_tokens": tokens.reasoning}}

    def trailing(self, turn: Turn, finish: str):
        last, usage_chunk = super().trailing(turn, finish)
        last["x_groq"] = {"id": "req_01", "usage": self.usage(turn.usage)}
        return [last, usage_chunk]

    def answer(self, turn: Turn):
        raw = super().answer(turn)
        body = json.loads(raw.body)
        body.update(service_tier="on_demand", x_groq={"id": "req_01"})  # as Groq's answers carry them
        raw.body = json.dumps(body).encode()
        return raw

    def models(self, server):
        entry = {"model": "groq/openai/gpt-oss-120b", "api_base": server.root_url + "/openai/v1", "api_key": "gsk_test"}
        return {"m": entry, "think": entry}


PROFILE = Groq()
test_conformance = conformance(PROFILE)
