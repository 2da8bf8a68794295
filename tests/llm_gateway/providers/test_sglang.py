"""SGLang's OpenAI-compatible server (docs.sglang.ai/basic_usage/openai_api_completions.html,
/advanced_features/separate_reasoning.html): with `--reasoning-parser qwen3` the reasoning streams in
`reasoning_content`; thinking is switched with `chat_template_kwargs.enable_thinking` (configure SGLang models
with `family: qwen3-vllm`, the row that sends that knob); errors as vLLM's `{"object": "error", …}`."""

from __future__ import annotations

from tests.llm_gateway.providers.harness import conformance
from tests.llm_gateway.providers.test_vllm import VLLMProfile


class SGLang(VLLMProfile):
    name = "SGLang"
    families = ("qwen3-vllm",)
    reasoning_field = "reasoning_content"

    def models(self, server):
        entry = {"model": "openai/Qwen/Qwen3-8B", "api_base": server.base_url, "family": "qwen3-vllm"}
        return {"m": entry, "think": entry}


PROFILE = SGLang()
test_conformance = conformance(PROFILE)
