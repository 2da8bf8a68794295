"""Thinking policy contract: the exact request body each provider receives, family by family."""

from __future__ import annotations

import pytest

from services.llm_gateway.core.types import ChatRequest, Generation, Message, Thinking, ThinkingMode, ToolCall, ToolSpec

OFF = Thinking(ThinkingMode.DISABLED)
ON = Thinking(ThinkingMode.ENABLED)
DEFAULT = Thinking()
SAMPLING = Generation(temperature=0.7, top_p=0.9, max_tokens=100)
OPENAI_FACTORIES = ["Tongyi-Qianwen", "VLLM", "OpenAI-API-Compatible", "DeepSeek", "Moonshot", "ZHIPU-AI", "OpenAI"]


@pytest.fixture(params=[True, False], ids=["direct", "acompletion"])
def gw(request, make_gateway, scripted):
    """Both provider paths must send byte-identical bodies: litellm's provider layer direct, and acompletion."""
    factories = {name: {"api_base": scripted.base_url, "api_key": "k-test"} for name in OPENAI_FACTORIES}
    factories["Anthropic"] = {"api_base": scripted.root_url, "api_key": "k-test"}
    factories["Gemini"] = {"api_base": scripted.root_url + "/v1beta", "api_key": "k-test"}
    factories["Ollama"] = {"api_base": scripted.root_url}
    return make_gateway({}, factories=factories, litellm_direct=request.param)


async def body(gw, scripted, model, thinking=DEFAULT, generation=SAMPLING, stream=False):
    scripted.clear()
    request = ChatRequest(model=model, messages=[Message("user", "hi")], thinking=thinking, generation=generation)
    if stream:
        async for _ in await gw.chat_stream(request):
            pass
    else:
        result = await gw.chat(request)
        assert result.error is None, result.error
    (recorded,) = scripted.requests
    sent = dict(recorded.body)
    for key in ("messages", "contents", "system_instruction", "stream_options"):
        sent.pop(key, None)
    if sent.get("stream") is False:
        sent.pop("stream")
    return recorded.path, sent


BASE = {"temperature": 0.7, "top_p": 0.9, "max_tokens": 100}

CASES = [
    # Qwen3: off by default, per provider in the field that provider reads
    ("qwen3-32b@Tongyi-Qianwen", DEFAULT, {"model": "qwen3-32b", **BASE, "enable_thinking": False}),
    ("qwen3-32b@VLLM", DEFAULT, {"model": "qwen3-32b", **BASE, "chat_template_kwargs": {"enable_thinking": False}}),
    ("qwen3-32b@OpenAI-API-Compatible", DEFAULT, {"model": "qwen3-32b", **BASE, "enable_thinking": False}),
    ("qwen3-32b@VLLM", ON, {"model": "qwen3-32b", **BASE, "chat_template_kwargs": {"enable_thinking": True}}),
    ("qwen3-max-preview@OpenAI-API-Compatible", OFF, {"model": "qwen3-max-preview", **BASE, "enable_thinking": True}),
    # DeepSeek: thinking disabled by default, max_tokens kept, reasoning_effort never sent
    ("deepseek-chat@DeepSeek", DEFAULT, {"model": "deepseek-chat", **BASE, "thinking": {"type": "disabled"}}),
    ("deepseek-chat@DeepSeek", Thinking(ThinkingMode.EFFORT, "high"), {"model": "deepseek-chat", **BASE, "thinking": {"type": "enabled"}}),
    # Kimi K2.5: fixed sampling
    ("kimi-k2.5@Moonshot", DEFAULT, {"model": "kimi-k2.5", "top_p": 0.95, "n": 1, "max_tokens": 100, "presence_penalty": 0.0,
                                      "frequency_penalty": 0.0}),
    ("moonshot-v1-8k@Moonshot", ON, {"model": "moonshot-v1-8k", "top_p": 0.95, "n": 1, "max_tokens": 100,
                                      "presence_penalty": 0.0, "frequency_penalty": 0.0, "thinking": {"type": "enabled"}}),
    ("moonshot-v1-8k@Moonshot", DEFAULT, {"model": "moonshot-v1-8k", **BASE}),
    # GLM: passthrough only when specified
    ("glm-4.5@ZHIPU-AI", DEFAULT, {"model": "glm-4.5", **BASE}),
    ("glm-4.5@ZHIPU-AI", OFF, {"model": "glm-4.5", **BASE, "thinking": {"type": "disabled"}}),
    # OpenAI reasoning models: sampling dropped, effort passed
    ("gpt-5@OpenAI", Thinking(ThinkingMode.EFFORT, "high"), {"model": "gpt-5", "max_completion_tokens": 100, "reasoning_effort": "high"}),
    ("gpt-4o@OpenAI", DEFAULT, {"model": "gpt-4o", **BASE}),
    # generic OpenAI-compatible: effort forwarded as reasoning_effort, nothing by default
    ("my-model@OpenAI-API-Compatible", Thinking(ThinkingMode.EFFORT, "low"), {"model": "my-model", **BASE, "reasoning_effort": "low"}),
    ("my-model@OpenAI-API-Compatible", DEFAULT, {"model": "my-model", **BASE}),
]


@pytest.mark.parametrize("model,thinking,expected", CASES, ids=[f"{c[0]}-{c[1].mode.value}" for c in CASES])
async def test_openai_compatible_bodies(gw, scripted, model, thinking, expected):
    path, sent = await body(gw, scripted, model, thinking)
    assert path == "/v1/chat/completions"
    assert sent == expected
    calls_before = getattr(gw.provider, "direct_calls", 0)
    for _ in range(2):  # the second stream reuses the direct path's memoised litellm param mapping
        path, streamed = await body(gw, scripted, model, thinking, stream=True)
        assert path == "/v1/chat/completions"
        assert streamed.pop("stream") is True
        assert streamed == expected
    # with litellm_direct on, streams of these factories take the direct path (and still send this body)
    assert getattr(gw.provider, "direct_calls", 0) - calls_before == (2 if gw.settings.litellm_direct else 0)


async def test_stream_and_non_stream_send_the_same_toggle(gw, scripted):
    _, plain = await body(gw, scripted, "qwen3-32b@OpenAI-API-Compatible", DEFAULT)
    _, streamed = await body(gw, scripted, "qwen3-32b@OpenAI-API-Compatible", DEFAULT, stream=True)
    assert streamed.pop("stream") is True
    assert plain == streamed


async def test_dashscope_qwen3_thinking_is_served_by_streaming_even_for_chat(gw, scripted):
    _, sent = await body(gw, scripted, "qwen3-32b@Tongyi-Qianwen", ON)
    assert sent == {"model": "qwen3-32b", **BASE, "stream": True, "enable_thinking": True}


@pytest.mark.parametrize("thinking,expected_thinking,max_tokens", [
    (Thinking(ThinkingMode.EFFORT, "low"), {"type": "enabled", "budget_tokens": 1024}, 5120),
    (Thinking(ThinkingMode.EFFORT, "high"), {"type": "enabled", "budget_tokens": 4096}, 8192),
    (Thinking(ThinkingMode.BUDGET, budget_tokens=100), {"type": "enabled", "budget_tokens": 1024}, 5120),
    (ON, {"type": "enabled", "budget_tokens": 2048}, 6144),
])
async def test_anthropic_budget_and_temperature(gw, scripted, thinking, expected_thinking, max_tokens):
    path, sent = await body(gw, scripted, "claude-sonnet-4-5@Anthropic", thinking)
    assert path == "/v1/messages"
    assert sent == {"model": "claude-sonnet-4-5", "max_tokens": max_tokens, "thinking": expected_thinking}


async def test_anthropic_without_thinking_keeps_sampling_and_opus_variants_drop_it(gw, scripted):
    _, sent = await body(gw, scripted, "claude-sonnet-4-5@Anthropic", DEFAULT)
    assert sent == {"model": "claude-sonnet-4-5", "max_tokens": 100, "temperature": 0.7, "top_p": 0.9}
    for name in ("claude-opus-4-7", "claude-opus-4-8-20260101"):
        _, sent = await body(gw, scripted, f"{name}@Anthropic", DEFAULT)
        assert sent == {"model": name, "max_tokens": 100}


@pytest.mark.parametrize("model,thinking,config", [
    ("gemini-2.5-flash", DEFAULT, {"thinkingBudget": 0, "includeThoughts": False}),
    ("gemini-2.5-flash", Thinking(ThinkingMode.BUDGET, budget_tokens=2000), {"thinkingBudget": 2000, "includeThoughts": True}),
    ("gemini-2.5-pro", OFF, {"thinkingBudget": 128, "includeThoughts": True}),
    ("gemini-3-pro-preview", OFF, {"thinkingLevel": "low", "includeThoughts": False}),
])
async def test_gemini_thinking_config(gw, scripted, model, thinking, config):
    path, sent = await body(gw, scripted, f"{model}@Gemini", thinking)
    assert path == f"/v1beta/models/{model}:generateContent"
    assert sent == {"generationConfig": {"temperature": 0.7, "top_p": 0.9, "max_output_tokens": 100, "thinkingConfig": config}}


@pytest.mark.parametrize("model,thinking,think", [("llama3.2@Ollama", ON, True), ("llama3.2@Ollama", OFF, False),
                                                   ("qwen3:8b@Ollama", DEFAULT, False)])
async def test_ollama_think_flag(gw, scripted, model, thinking, think):
    path, sent = await body(gw, scripted, model, thinking)
    assert path == "/api/chat"
    assert sent == {"model": model.split("@")[0], "options": {"temperature": 0.7, "top_p": 0.9, "num_predict": 100}, "think": think}


@pytest.mark.parametrize("model", ["qwen3-32b@Tongyi-Qianwen", "qwen3-32b@VLLM", "deepseek-chat@DeepSeek", "kimi-k2.5@Moonshot",
                                   "glm-4.5@ZHIPU-AI", "gpt-4o@OpenAI", "my-model@OpenAI-API-Compatible"])
async def test_direct_and_acompletion_send_the_same_messages_and_tools(make_gateway, scripted, model):
    """acompletion (Chat) and the direct path (ChatStream) agree on a history with every message shape."""
    factories = {name: {"api_base": scripted.base_url, "api_key": "k-test"} for name in OPENAI_FACTORIES}
    gw = make_gateway({}, factories=factories, litellm_direct=True)
    tool = ToolSpec("lookup", "Look a word up", {"type": "object", "properties": {"word": {"type": "string"}},
                                                  "required": ["word"]})
    history = [Message("system", "Be brief."),
               Message("user", parts=[{"text": "What is this?"}, {"image_url": "data:image/png;base64,iVBORw0KGgo="}]),
               Message("assistant", "", tool_calls=[ToolCall("call_1", "lookup", '{"word": "cat"}')], reasoning_content="r"),
               Message("tool", "a small feline", tool_call_id="call_1", name="lookup"),
               Message("assistant", "<think>old</think>A cat."),
               Message("user", "Thanks! And a dog?")]
    scripted.clear()
    request = ChatRequest(model=model, messages=history, tools=[tool], tool_choice="auto", generation=SAMPLING)
    assert (await gw.chat(request)).error is None
    async for _ in await gw.chat_stream(request):
        pass
    plain, streamed = scripted.chat_bodies
    assert gw.provider.direct_calls == 1
    assert streamed.pop("stream") is True and plain.pop("stream", False) is False
    streamed.pop("stream_options")
    assert streamed == plain
