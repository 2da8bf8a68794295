"""Mistral (docs.mistral.ai/api/#tag/chat, /capabilities/reasoning): OpenAI-like chat at /v1/chat/completions;
Magistral streams its reasoning as content chunks `[{"type": "thinking", "thinking": [{"type": "text", …}]}]`
before the plain string content; errors are `{"object": "error", "message", "type", "param", "code"}`."""

from __future__ import annotations

from services.llm_gateway.core.types import FinishReason, Usage
from tests.llm_gateway.providers.harness import ABSENT, Tokens, conformance, pieces
from tests.llm_gateway.providers.openai_wire import OpenAIChatProfile


class Mistral(OpenAIChatProfile):
    name = "Mistral"
    families = ("generic",)
    model_name = "magistral-medium-2509"
    role_delta = {"role": "assistant", "content": ""}
    # Magistral has no effort parameter: litellm puts Mistral's reasoning system prompt in front instead
    thinking_bodies = {"on": {"reasoning_effort": ABSENT}, "off": {"reasoning_effort": ABSENT},
                       "budget": {"reasoning_effort": ABSENT, "prompt_mode": ABSENT}}
    finish_reasons = [("stop", FinishReason.STOP), ("length", FinishReason.LENGTH),
                      ("tool_calls", FinishReason.TOOL_CALLS)]
    usage_in = Tokens(prompt=120, completion=40)
    usage_out = Usage(prompt_tokens=120, completion_tokens=40)

    def reasoning_deltas(self, text):
        return [{"content": [{"type": "thinking", "thinking": [{"type": "text", "text": p}]}]} for p in pieces(text)]

    def message(self, turn):
        message = super().message(turn)
        if turn.reasoning:
            message["content"] = [{"type": "thinking", "thinking": [{"type": "text", "text": turn.reasoning}]},
                                  {"type": "text", "text": turn.text}]
        return message

    def usage(self, tokens: Tokens):
        return {"prompt_tokens": tokens.prompt, "total_tokens": tokens.prompt + tokens.completion,
                "completion_tokens": tokens.completion}

    def error_body(self, status):
        return {"object": "error", "message": f"provider says {status}", "type": "invalid_request_error", "param": None,
                "code": str(status)}

    def models(self, server):
        entry = {"model": "mistral/magistral-medium-2509", "api_base": server.base_url, "api_key": "mistral-test"}
        return {"m": {**entry, "model": "mistral/mistral-large-latest"}, "think": entry}


PROFILE = Mistral()
test_conformance = conformance(PROFILE)
