"""Context fitting, token counting per family, the model registry and settings validation."""

from __future__ import annotations

import pytest

from services.common.errors import FailedPreconditionError, InvalidArgumentError
from services.llm_gateway.core import context
from services.llm_gateway.core.registry import ModelRegistry
from services.llm_gateway.core.settings import GatewaySettings
from services.llm_gateway.core.types import ChatRequest, Message
from tests.support.openai_server import Reply


def enc(name="cl100k_base"):
    return context.tokenizer(name)[0]


def test_tokenizers_are_offline_and_per_family():
    for name in ("cl100k_base", "claude", "deepseek"):
        encode, decode, actual = context.tokenizer(name)
        assert actual == name and decode(encode("hello world")).strip() == "hello world"
    assert context.tokenizer("o200k_base")[2] == "cl100k_base"  # not bundled: counted with cl100k
    assert str(context.bundled_tokenizer_dir()) in __import__("os").environ["TIKTOKEN_CACHE_DIR"]


def test_count_includes_message_overhead_images_and_tools():
    encode = enc()
    base = context.count([Message("user", "hello world")], encode)
    assert base == 3 + 3 + len(encode("user")) + len(encode("hello world"))
    image = context.count([Message("user", parts=[{"text": "hello world"}, {"image_url": "data:x"}])], encode)
    assert image == base + context.IMAGE_TOKENS
    from services.llm_gateway.core.types import ToolSpec
    assert context.count([Message("user", "hello world")], encode, [ToolSpec("t", "d", {"type": "object"})]) > base


def test_fit_keeps_system_and_drops_oldest_turns_first():
    messages = [Message("system", "You are terse.")] + [Message("user" if i % 2 == 0 else "assistant", f"turn {i} " + "word " * 50)
                                                        for i in range(10)] + [Message("user", "final question?")]
    encode = enc()
    budget = context.count([messages[0], *messages[-4:]], encode) + 2
    kept = context.fit(messages, budget, "cl100k_base")
    assert kept[0].content == "You are terse." and kept[-1].content == "final question?"
    assert [m.content for m in kept[1:]] == [m.content for m in messages[-len(kept) + 1:]]
    assert context.count(kept, encode) <= budget
    assert context.fit(messages, 10_000, "cl100k_base") == messages


def test_fit_never_starts_history_with_orphan_tool_results():
    from services.llm_gateway.core.types import ToolCall
    messages = [Message("system", "s"), Message("user", "a " * 200),
                Message("assistant", "", tool_calls=[ToolCall("c1", "t", "{}")]), Message("tool", "r " * 200, tool_call_id="c1"),
                Message("assistant", "done"), Message("user", "next?")]
    kept = context.fit(messages, 60, "cl100k_base")
    assert kept[1].role != "tool"


def test_too_long_last_message_is_cut_in_the_middle_so_the_question_survives():
    long_text = "Context: " + "filler " * 3000 + "QUESTION: what is the capital of France?"
    kept = context.fit([Message("system", "Be brief."), Message("user", long_text)], 300, "cl100k_base")
    assert kept[0].content == "Be brief."
    assert kept[-1].content.startswith("Context:") and kept[-1].content.endswith("capital of France?")
    assert context.CUT_MARKER in kept[-1].content
    assert context.count(kept, enc()) <= 300


async def test_count_tokens_core(make_gateway, scripted):
    gw = make_gateway({"claude": {"model": "anthropic/claude-sonnet-4-5", "api_key": "k-test"}})
    total, name, trimmed, trimmed_total = gw.count_tokens("claude", [Message("user", "hello")], 0)
    assert name == "claude" and total > 0 and trimmed == [] and trimmed_total == 0


async def test_context_window_is_enforced_before_sending(make_gateway, scripted):
    gw = make_gateway({"small": {"model": "openai/small", "api_base": scripted.base_url, "context_window": 400}})
    scripted.queue(Reply(content="ok"))
    history = [Message("user", "old " * 500), Message("assistant", "old answer"), Message("user", "new question?")]
    await gw.chat(ChatRequest("small", history))
    sent = scripted.chat_bodies[0]["messages"]
    assert sent == [{"role": "user", "content": "new question?"}]


# -- registry ----------------------------------------------------------------------------------------
def registry(models=None, factories=None, env=None):
    return ModelRegistry(models or {}, factories or {}, env=env or {})


def test_factory_ids_resolve_without_explicit_entries():
    env = {"DASHSCOPE_API_KEY": "sk-dash-secret", "OPENAI_API_KEY": "sk-oa", "ANTHROPIC_API_KEY": "a", "GEMINI_API_KEY": "g",
           "DEEPSEEK_API_KEY": "d", "MOONSHOT_API_KEY": "m", "ZHIPUAI_API_KEY": "z"}
    reg = registry(env=env, factories={"VLLM": {"api_base": "http://vllm:8000/v1"},
                                       "OpenAI-API-Compatible": {"api_base": "http://compat/v1"}})
    expected = {
        "qwen-plus@Tongyi-Qianwen": ("dashscope/qwen-plus", "Tongyi-Qianwen"),
        "gpt-4o@OpenAI": ("openai/gpt-4o", "OpenAI"),
        "claude-sonnet-4-5@Anthropic": ("anthropic/claude-sonnet-4-5", "Anthropic"),
        "gemini-2.5-flash@Gemini": ("gemini/gemini-2.5-flash", "Gemini"),
        "deepseek-chat@DeepSeek": ("deepseek/deepseek-chat", "DeepSeek"),
        "kimi-k2.5@Moonshot": ("moonshot/kimi-k2.5", "Moonshot"),
        "kimi-k2.5@Kimi": ("moonshot/kimi-k2.5", "Moonshot"),
        "glm-4.5@ZHIPU-AI": ("openai/glm-4.5", "ZHIPU-AI"),
        "qwen3:8b@Ollama": ("ollama_chat/qwen3:8b", "Ollama"),
        "Qwen/Qwen3-8B@VLLM": ("hosted_vllm/Qwen/Qwen3-8B", "VLLM"),
        "my-model@OpenAI-API-Compatible": ("openai/my-model", "OpenAI-API-Compatible"),
    }
    for llm_id, (model, provider) in expected.items():
        route = reg.resolve(llm_id)
        assert (route.litellm_model, route.entry.provider) == (model, provider), llm_id
    assert reg.resolve("qwen-plus@Tongyi-Qianwen").api_key == "sk-dash-secret"
    assert "sk-dash-secret" not in repr(reg.resolve("qwen-plus@Tongyi-Qianwen"))


def test_default_is_embedded_and_star_is_the_fallback():
    reg = registry({"*": {"model": "openai/{model}", "api_base": "http://proxy/v1"}})
    assert reg.resolve("").entry.is_embedded
    assert reg.resolve("anything").litellm_model == "openai/anything"
    assert reg.resolve("thing@UnknownFactory").litellm_model == "openai/thing"


def test_a_concrete_star_entry_is_also_the_default():
    reg = registry({"*": {"model": "openai/test-model", "api_base": "http://proxy/v1"}})
    assert reg.resolve("").litellm_model == "openai/test-model"
    assert not reg.default.is_embedded
    assert registry().default.is_embedded
    explicit = registry({"": {"model": "openai/a", "api_base": "http://a/v1"}, "*": {"model": "openai/b", "api_base": "http://b/v1"}})
    assert explicit.resolve("").litellm_model == "openai/a"


def test_a_factory_without_its_key_gives_way_to_the_star_entry():
    reg = registry({"*": {"model": "openai/gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"}}, env={"OPENAI_API_KEY": "sk-x"})
    assert reg.resolve("qwen-plus@Tongyi-Qianwen").litellm_model == "openai/gpt-4o-mini"
    with pytest.raises(FailedPreconditionError) as caught:
        registry({"*": {"model": "openai/gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"}}).resolve("x@OpenAI")
    assert "OPENAI_API_KEY" in caught.value.message


def test_unknown_models_and_missing_configuration_are_domain_errors():
    with pytest.raises(InvalidArgumentError) as caught:
        registry().resolve("nope@Nowhere")
    assert "nope@Nowhere" in caught.value.message and caught.value.violations[0].field == "model"
    with pytest.raises(FailedPreconditionError) as caught:
        registry().resolve("qwen-plus@Tongyi-Qianwen")
    assert "DASHSCOPE_API_KEY" in caught.value.message
    with pytest.raises(FailedPreconditionError):
        registry().resolve("m@VLLM")
    assert registry().resolve("qwen-plus@Tongyi-Qianwen", need_key=False).api_key is None  # token counting
    with pytest.raises(InvalidArgumentError):
        registry({"bad": {"api_base": "x"}})
    with pytest.raises(InvalidArgumentError):
        registry(factories={"NoSuchFactory": {}})


def test_settings_reject_unknown_keys():
    with pytest.raises(InvalidArgumentError):
        GatewaySettings.from_section({"modles": {}})
    with pytest.raises(InvalidArgumentError):
        GatewaySettings.from_section({"retry": {"max_attempt": 3}})
    settings = GatewaySettings.from_section({"retry": {"max_attempts": 2, "max_total_wait_s": 5}})
    assert settings.retry.max_attempts == 2 and settings.retry.max_total_wait_s == 5.0
    assert GatewaySettings().retry.max_total_wait_s <= 10
    # The keys the shared bootstrap reads belong to the section too.
    GatewaySettings.from_section({"port": 1, "metrics_port": 9464, "shutdown_grace_s": 5, "event_loop": "auto"})
