"""OpenRouter (openrouter.ai/docs/api-reference/streaming, /docs/use-cases/reasoning-tokens,
/docs/api-reference/errors): OpenAI chat format at /api/v1/chat/completions; SSE comment lines
(`: OPENROUTER PROCESSING`) keep the connection alive; reasoning streams in the `reasoning` delta field (with
`reasoning_details`); effort goes as `reasoning: {effort}`; the usage chunk includes cost and token details;
errors are `{"error": {"code", "message", "metadata"}}`."""

from __future__ import annotations

from services.llm_gateway.core.types import FinishReason
from tests.llm_gateway.providers.harness import ABSENT, Tokens, Turn, conformance, pieces, sse
from tests.llm_gateway.providers.openai_wire import OpenAIChatProfile
from tests.support.openai_server import Raw


class OpenRouter(OpenAIChatProfile):
    name = "OpenRouter"
    families = ("generic",)
    reasoning_field = "reasoning"
    model_name = "anthropic/claude-sonnet-4.5"
    id_prefix = "gen-"
    thinking_bodies = {"on": {"reasoning": ABSENT, "reasoning_effort": ABSENT},
                       "off": {"reasoning": ABSENT, "reasoning_effort": ABSENT},
                       # OpenRouter takes OpenAI's reasoning_effort as well as its own `reasoning` object
                       "budget": {"reasoning_effort": "high", "reasoning": ABSENT}}
    finish_reasons = [("stop", FinishReason.STOP), ("length", FinishReason.LENGTH),
                      ("tool_calls", FinishReason.TOOL_CALLS), ("content_filter", FinishReason.CONTENT_FILTER)]

    def reasoning_deltas(self, text):
        return [{"reasoning": p, "reasoning_details": [{"type": "reasoning.text", "text": p, "format": "anthropic-claude-v1",
                                                        "index": 0}]} for p in pieces(text)]

    def usage(self, tokens: Tokens):
        return {**super().usage(tokens), "cost": 0.00042, "is_byok": False}

    def error_body(self, status):
        return {"error": {"code": status, "message": f"provider says {status}", "metadata": {"provider_name": "Anthropic"}}}

    def stream(self, turn: Turn) -> Raw:
        frames = sse(self.events(turn), done=True)
        return Raw(headers={"Content-Type": "text/event-stream"}, frames=[b": OPENROUTER PROCESSING\n\n", *frames])

    def models(self, server):
        entry = {"model": "openrouter/anthropic/claude-sonnet-4.5", "api_base": server.root_url + "/api/v1", "api_key": "sk-or-test"}
        return {"m": entry, "think": entry}


PROFILE = OpenRouter()
test_conformance = conformance(PROFILE)
