"""Model families and the thinking policy table (spec §1.2, §1.5, §1.6).

A family is picked from the provider and the model name (first matching row of FAMILIES wins). The
family says how the user's thinking setting becomes provider-native parameters (`style`), what the
family does when the user says nothing (`default`), which sampling parameters the provider rejects,
how reasoning arrives (think format), and which tokenizer counts its tokens.

Styles (what ends up in the litellm call, and therefore in the HTTP body):

| style               | enabled / disabled                              | effort          | budget N                         |
|---------------------|-------------------------------------------------|-----------------|----------------------------------|
| qwen_toggle         | extra_body.enable_thinking true/false            | = enabled        | = enabled                        |
| qwen_template       | chat_template_kwargs.enable_thinking (vLLM)      | = enabled        | = enabled                        |
| type_toggle         | extra_body.thinking = {"type": enabled/disabled} | = enabled        | = enabled                        |
| anthropic           | thinking {enabled, budget 2048} / nothing        | 1024/2048/4096   | max(N, 1024)                     |
| gemini              | reasoning_effort medium / "disable" (budget 0)   | low/medium/high  | thinking {enabled, budget N}     |
| effort              | reasoning_effort medium / minimal                | low/medium/high  | = effort high                    |
| ollama              | reasoning_effort medium / "none" (think: bool)   | think: true      | think: true                      |
| none                | nothing is sent                                  |                 |                                  |
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from services.llm_gateway.core.markers import MINIMAX, MarkerSet
from services.llm_gateway.core.think import AUTO, FIELD, TAG, ThinkFormat
from services.llm_gateway.core.types import Generation, Thinking, ThinkingMode

EFFORT_BUDGET = {"low": 1024, "medium": 2048, "high": 4096}
ANTHROPIC_MIN_BUDGET = 1024
ANTHROPIC_OUTPUT_HEADROOM = 4096


@dataclass(frozen=True)
class Family:
    name: str
    providers: frozenset[str] = frozenset()
    """Factories this row applies to; empty = any."""
    pattern: str = ""
    """Regex searched in the lower-cased model name; empty = any."""
    style: str = "none"
    default: ThinkingMode = ThinkingMode.DEFAULT
    forced_on: str = ""
    """Regex: model names that only accept thinking on (user "disabled" is overridden)."""
    drop_always: tuple[str, ...] = ()
    drop_when_thinking: tuple[str, ...] = ()
    fixed_when_thinking: tuple[tuple[str, Any], ...] = ()
    fixed_pattern: str = ""
    """Regex: names that always get fixed_when_thinking (Kimi K2.5/K2.6)."""
    think_format: ThinkFormat = ThinkFormat()
    tokenizer: str = "cl100k_base"
    native_tools: bool = True
    native_response_format: bool = True
    echo_reasoning_with_tools: bool = False
    """reasoning_content goes back on assistant tool-call turns (the provider rejects or degrades without it)."""
    echo_reasoning_inline: bool = False
    """Reasoning goes back on assistant tool-call turns inside the content, as a <think> block (MiniMax M2)."""
    echo_thinking_blocks_with_tools: bool = False
    """Signed thinking blocks go back on assistant tool-call turns (Anthropic extended thinking + tools)."""
    stream_only_when_thinking: bool = False
    min_budget: int = 0
    context_window: int = 0
    markers: MarkerSet | None = None
    """Control tokens the models leak into text; removed from answers, reasoning and tool arguments."""


IMPLICIT = ThinkFormat(mode=TAG, implicit_open=True)

# First match wins. Provider names are RAGFlow factory names (see registry.FACTORIES).
FAMILIES: tuple[Family, ...] = (
    Family("ollama-qwen3", frozenset({"Ollama"}), r"qwen3", style="ollama", default=ThinkingMode.DISABLED),
    Family("ollama", frozenset({"Ollama"}), r"", style="ollama"),
    Family("qwen3-vllm", frozenset({"VLLM"}), r"qwen3", style="qwen_template", default=ThinkingMode.DISABLED,
           forced_on=r"-preview|2\.4t-a95b"),
    Family("qwen3-dashscope", frozenset({"Tongyi-Qianwen"}), r"qwen3", style="qwen_toggle", default=ThinkingMode.DISABLED,
           forced_on=r"-preview|2\.4t-a95b", stream_only_when_thinking=True),
    Family("qwen3", frozenset(), r"qwen3", style="qwen_toggle", default=ThinkingMode.DISABLED,
           forced_on=r"-preview|2\.4t-a95b"),
    Family("qwq", frozenset(), r"qwq", style="none", think_format=IMPLICIT),
    Family("deepseek", frozenset({"DeepSeek"}), r"", style="type_toggle", default=ThinkingMode.DISABLED,
           think_format=ThinkFormat(mode=FIELD), tokenizer="deepseek", echo_reasoning_with_tools=True,
           native_response_format=False),
    Family("deepseek-r1-distill", frozenset(), r"r1-distill|deepseek-r1", style="none", think_format=IMPLICIT,
           tokenizer="deepseek"),
    Family("openai-reasoning", frozenset({"OpenAI", "Azure-OpenAI"}), r"gpt-5|(^|/)o[134]", style="effort",
           drop_always=("temperature", "top_p", "logprobs", "top_logprobs"), tokenizer="cl100k_base"),
    Family("claude-opus-fixed", frozenset({"Anthropic"}), r"claude-opus-4-[78]", style="anthropic",
           drop_always=("temperature", "top_p", "top_k"), tokenizer="claude", native_response_format=True,
           echo_thinking_blocks_with_tools=True),
    Family("claude", frozenset({"Anthropic"}), r"", style="anthropic", drop_when_thinking=("temperature", "top_p", "top_k"),
           tokenizer="claude", echo_thinking_blocks_with_tools=True),
    Family("gemini-2.5-pro", frozenset({"Gemini"}), r"gemini-2\.5-pro", style="gemini", default=ThinkingMode.DISABLED,
           min_budget=128),
    Family("gemini-3", frozenset({"Gemini"}), r"gemini-3", style="gemini"),
    Family("gemini", frozenset({"Gemini"}), r"", style="gemini", default=ThinkingMode.DISABLED),
    # Kimi thinking models and GLM (4.5+, "preserved thinking") want each tool-call turn's reasoning_content back
    # (platform.moonshot.ai docs "kimi-k2-thinking" multi-step tool calls; docs.z.ai "Thinking mode").
    Family("kimi", frozenset({"Moonshot"}), r"", style="type_toggle", echo_reasoning_with_tools=True,
           drop_when_thinking=("temperature",),
           fixed_when_thinking=(("top_p", 0.95), ("n", 1), ("presence_penalty", 0.0), ("frequency_penalty", 0.0)),
           fixed_pattern=r"kimi-k2\.[56]"),
    Family("glm", frozenset({"ZHIPU-AI"}), r"glm", style="type_toggle", echo_reasoning_with_tools=True),
    Family("hunyuan", frozenset({"Tencent Hunyuan"}), r"", drop_always=("presence_penalty", "frequency_penalty")),
    # MiniMax M1/M2 always reason (no switch), inline in <think> tags on the OpenAI-compatible API; also when
    # served elsewhere (OpenRouter, vLLM), hence the name pattern.
    # MiniMax M2 "interleaved thinking": the <think> block of a tool-call turn goes back in its content
    # (platform.minimax.io docs, "M2 tool use & interleaved thinking").
    Family("minimax", frozenset({"MiniMax"}), r"", style="none", markers=MINIMAX, echo_reasoning_inline=True),
    Family("minimax-hosted", frozenset(), r"minimax", style="none", markers=MINIMAX, echo_reasoning_inline=True),
    Family("vllm", frozenset({"VLLM"}), r"", style="effort"),
    Family("smollm2", frozenset({"Embedded"}), r"", style="none", native_tools=False, native_response_format=False,
           context_window=2048),
    Family("generic", frozenset(), r"", style="effort"),
)


REASONING_STYLES = frozenset({"qwen_toggle", "qwen_template", "type_toggle", "anthropic", "gemini", "ollama"})


def reasons(family: Family) -> bool:
    """Whether models of this family are known to reason (ListModels.supports_reasoning)."""
    return family.style in REASONING_STYLES or family.name == "openai-reasoning" or family.think_format.implicit_open


def family_for(provider: str, model_name: str, override: str = "") -> Family:
    """The first FAMILIES row matching (provider, model name); `override` picks a row by name."""
    if override:
        for family in FAMILIES:
            if family.name == override:
                return family
    lowered = model_name.lower()
    for family in FAMILIES:
        if family.providers and provider not in family.providers:
            continue
        if family.pattern and not re.search(family.pattern, lowered):
            continue
        return family
    return FAMILIES[-1]


@dataclass
class PolicyResult:
    """litellm keyword arguments for thinking and sampling, and facts the caller needs."""

    params: dict[str, Any] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)
    thinking_on: bool | None = None
    """True/False when the request explicitly turns reasoning on/off, None for provider default."""


def effective_mode(family: Family, thinking: Thinking, model_name: str) -> ThinkingMode:
    mode = thinking.mode
    if mode == ThinkingMode.DEFAULT:
        mode = family.default
    if family.forced_on and re.search(family.forced_on, model_name.lower()):
        if mode in (ThinkingMode.DISABLED, ThinkingMode.DEFAULT):
            mode = ThinkingMode.ENABLED
    return mode


def apply(family: Family, thinking: Thinking, generation: Generation, model_name: str) -> PolicyResult:
    """Translate the user's setting and sampling into provider parameters, per the family row."""
    mode = effective_mode(family, thinking, model_name)
    result = PolicyResult()
    params = result.params
    for key in ("temperature", "top_p", "presence_penalty", "frequency_penalty", "seed", "max_tokens"):
        value = getattr(generation, key)
        if value is not None:
            params[key] = value
    if generation.stop:
        params["stop"] = list(generation.stop)

    on: bool | None = None if mode == ThinkingMode.DEFAULT else mode != ThinkingMode.DISABLED
    result.thinking_on = on
    effort = thinking.effort or "medium"
    style = family.style
    if style in ("qwen_toggle", "qwen_template") and on is not None:
        if style == "qwen_toggle":
            result.extra_body["enable_thinking"] = on
            if on and mode == ThinkingMode.BUDGET:  # DashScope's reasoning budget (deep-thinking docs)
                result.extra_body["thinking_budget"] = thinking.budget_tokens
        else:
            result.extra_body["chat_template_kwargs"] = {"enable_thinking": on}
    elif style == "type_toggle" and on is not None:
        result.extra_body["thinking"] = {"type": "enabled" if on else "disabled"}
    elif style == "anthropic" and on:
        budget = thinking.budget_tokens if mode == ThinkingMode.BUDGET else EFFORT_BUDGET.get(effort, 2048)
        if mode == ThinkingMode.ENABLED:
            budget = EFFORT_BUDGET["medium"]
        budget = max(budget, ANTHROPIC_MIN_BUDGET)
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
        params["max_tokens"] = max(int(params.get("max_tokens") or 0), budget + ANTHROPIC_OUTPUT_HEADROOM)
    elif style == "gemini" and on is not None:
        if not on:
            if family.min_budget:
                params["thinking"] = {"type": "enabled", "budget_tokens": family.min_budget}
            else:
                params["reasoning_effort"] = "disable"
        elif mode == ThinkingMode.BUDGET:
            params["thinking"] = {"type": "enabled", "budget_tokens": max(thinking.budget_tokens, family.min_budget)}
        else:
            params["reasoning_effort"] = effort if mode == ThinkingMode.EFFORT else "medium"
    elif style == "effort" and on is not None:
        if not on:
            if family.name == "openai-reasoning":
                params["reasoning_effort"] = "minimal"
        elif mode == ThinkingMode.EFFORT:
            params["reasoning_effort"] = effort
        elif mode == ThinkingMode.BUDGET:
            params["reasoning_effort"] = _effort_for_budget(thinking.budget_tokens)
        elif family.name == "openai-reasoning":
            params["reasoning_effort"] = "medium"
        elif family.name == "vllm":
            result.extra_body["chat_template_kwargs"] = {"enable_thinking": True}
    elif style == "ollama" and on is not None:
        params["reasoning_effort"] = (effort if mode == ThinkingMode.EFFORT else "medium") if on else "none"
    if style == "effort" and on is False and family.name == "vllm":
        result.extra_body["chat_template_kwargs"] = {"enable_thinking": False}

    for key in family.drop_always:
        params.pop(key, None)
    fixed = on is not None and family.fixed_when_thinking
    if fixed or (family.fixed_pattern and re.search(family.fixed_pattern, model_name.lower())):
        for key in family.drop_when_thinking:
            params.pop(key, None)
        params.update(dict(family.fixed_when_thinking))
    elif on:
        for key in family.drop_when_thinking:
            params.pop(key, None)
    return result


def _effort_for_budget(budget: int) -> str:
    if budget <= EFFORT_BUDGET["low"]:
        return "low"
    if budget <= EFFORT_BUDGET["medium"]:
        return "medium"
    return "high"


def think_format_for(family: Family, mode: ThinkingMode, override: ThinkFormat | None = None) -> ThinkFormat:
    """Implicit-open families only start inside a block when reasoning is not switched off."""
    fmt = override or family.think_format
    if fmt.implicit_open and mode == ThinkingMode.DISABLED:
        return replace(fmt, implicit_open=False, mode=AUTO)
    return fmt
