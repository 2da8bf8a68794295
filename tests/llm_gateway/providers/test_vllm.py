"""vLLM's OpenAI-compatible server (docs.vllm.ai/en/latest/serving/openai_compatible_server.html,
/features/reasoning_outputs.html, /features/tool_calling.html): reasoning parsers put the reasoning in the
`reasoning` delta field (renamed from reasoning_content), `chat_template_kwargs.enable_thinking` switches Qwen3
thinking, usage comes in the include_usage chunk without details, and errors are
`{"object": "error", "message", "type", "param", "code"}`."""

from __future__ import annotations

from services.llm_gateway.core.types import ChatRequest, FinishReason, Message, Usage
from tests.llm_gateway.providers.harness import ON, Tokens, Turn, conformance, shape, subset
from tests.llm_gateway.providers.openai_wire import OpenAIChatProfile

TYPES = {400: "BadRequestError", 401: "Unauthorized", 429: "TooManyRequests", 500: "InternalServerError"}


class VLLMProfile(OpenAIChatProfile):
    reasoning_field = "reasoning"
    model_name = "Qwen/Qwen3-8B"
    id_prefix = "chatcmpl-"
    thinking_bodies = {"on": {"chat_template_kwargs": {"enable_thinking": True}},
                       "off": {"chat_template_kwargs": {"enable_thinking": False}},
                       "budget": {"chat_template_kwargs": {"enable_thinking": True}}}
    finish_reasons = [("stop", FinishReason.STOP), ("length", FinishReason.LENGTH),
                      ("tool_calls", FinishReason.TOOL_CALLS)]
    usage_in = Tokens(prompt=120, completion=40)
    usage_out = Usage(prompt_tokens=120, completion_tokens=40)

    def usage(self, tokens: Tokens):
        return {"prompt_tokens": tokens.prompt, "total_tokens": tokens.prompt + tokens.completion,
                "completion_tokens": tokens.completion, "prompt_tokens_details": None}

    def error_body(self, status):
        return {"object": "error", "message": f"provider says {status}", "type": TYPES.get(status, "InternalServerError"),
                "param": None, "code": status}


class VLLM(VLLMProfile):
    name = "vLLM"
    families = ("qwen3-vllm", "vllm", "deepseek-r1-distill", "qwq")

    def models(self, server):
        base = {"api_base": server.base_url, "provider": "VLLM"}
        return {"m": {"model": "hosted_vllm/Qwen/Qwen3-8B", **base}, "think": {"model": "hosted_vllm/Qwen/Qwen3-8B", **base},
                "llama": {"model": "hosted_vllm/meta-llama/Llama-3.1-8B-Instruct", **base},
                "r1": {"model": "hosted_vllm/deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", **base},
                "qwq": {"model": "hosted_vllm/Qwen/QwQ-32B", **base}}


PROFILE = VLLM()
test_conformance = conformance(PROFILE)


async def stream(wire, make_gateway, model, turn, **kw):
    wire.queue(PROFILE.stream(turn))
    return [e async for e in await make_gateway(PROFILE.models(wire)).chat_stream(
        ChatRequest(model=model, messages=[Message("user", "hi")], **kw))]


async def test_other_models_switch_thinking_through_the_chat_template(wire, make_gateway):
    assert (await stream(wire, make_gateway, "llama", Turn(text="ok"), thinking=ON))[-1].reason == FinishReason.STOP
    subset({"chat_template_kwargs": {"enable_thinking": True}}, wire.chat_bodies[-1])


async def test_r1_distill_and_qwq_start_inside_reasoning_without_a_parser(wire, make_gateway):
    # without --reasoning-parser the template's pre-filled <think> is not in the output: only the closing tag is
    for model in ("r1", "qwq"):
        events = await stream(wire, make_gateway, model, Turn(text="Weigh it.</think>Answer."))
        assert shape(events)[:4] == [("start",), ("think", "Weigh it."), ("end", False), ("text", "Answer.")]


async def test_r1_distill_behind_a_reasoning_parser_keeps_its_answer(wire, make_gateway):
    events = await stream(wire, make_gateway, "r1", Turn(reasoning="Weigh it.", text="Answer."))
    assert shape(events)[:4] == [("start",), ("think", "Weigh it."), ("end", False), ("text", "Answer.")]
