"""Zhipu GLM (docs.z.ai/api-reference/llm/chat-completion, docs.bigmodel.cn "深度思考" / thinking): OpenAI chat
format at /api/paas/v4 with `reasoning_content` deltas, `thinking: {type: enabled|disabled}`, usage with
prompt_tokens_details.cached_tokens, finish reason `sensitive` for filtered output, and errors as
`{"error": {"code": "<business code>", "message"}}`."""

from __future__ import annotations

from services.llm_gateway.core.types import FinishReason, Usage
from tests.llm_gateway.providers.harness import Tokens, conformance
from tests.llm_gateway.providers.openai_wire import OpenAIChatProfile

CODES = {400: "1214", 401: "1000", 429: "1302", 500: "500"}


class Zhipu(OpenAIChatProfile):
    name = "Zhipu / GLM"
    families = ("glm",)
    model_name = "glm-4.6"
    echo = "field"
    thinking_bodies = {"on": {"thinking": {"type": "enabled"}}, "off": {"thinking": {"type": "disabled"}},
                       "budget": {"thinking": {"type": "enabled"}}}
    finish_reasons = [("stop", FinishReason.STOP), ("length", FinishReason.LENGTH),
                      ("tool_calls", FinishReason.TOOL_CALLS), ("sensitive", FinishReason.CONTENT_FILTER)]
    usage_in = Tokens(prompt=120, completion=40, cached=64)
    usage_out = Usage(prompt_tokens=120, completion_tokens=40, reasoning_tokens=0, cached_tokens=64)

    def usage(self, tokens: Tokens):
        return {"prompt_tokens": tokens.prompt, "completion_tokens": tokens.completion,
                "total_tokens": tokens.prompt + tokens.completion, "prompt_tokens_details": {"cached_tokens": tokens.cached}}

    def error_body(self, status):
        return {"error": {"code": CODES.get(status, "500"), "message": f"provider says {status}"}}

    def models(self, server):
        base = {"api_base": server.root_url + "/api/paas/v4", "api_key": "zhipu-test", "provider": "ZHIPU-AI"}
        return {"m": {"model": "openai/glm-4.6", **base}, "think": {"model": "openai/glm-4.6", **base}}


PROFILE = Zhipu()
test_conformance = conformance(PROFILE)
