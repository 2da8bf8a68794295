"""The model registry: RAGFlow llm_id strings -> litellm routes (config section `gateway.models`).

Resolution of a requested id, first hit wins:
1. an exact key of `gateway.models` ("" is the default model);
2. "name@Factory" with a known factory: litellm model = FACTORIES[factory].prefix + name, api_base
   and key from `gateway.factories.<Factory>` (if configured), else the factory defaults (env var);
3. the `*` entry (its `model` may contain "{model}", replaced by the requested name);
4. otherwise InvalidArgumentError naming the model.

"" is the default model: the "" entry, else a `*` entry without "{model}", else the embedded SmolLM2. Keys are resolved at
request time and never logged, returned or put into error messages.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.common.errors import FailedPreconditionError, InvalidArgumentError
from services.llm_gateway.core.policy import Family, family_for

EMBEDDED = "embedded"
EMBEDDED_MODEL_NAME = "smollm2-135m-instruct"


@dataclass(frozen=True)
class Factory:
    prefix: str
    api_base: str | None = None
    key_env: str | None = None
    needs_key: bool = True
    needs_base: bool = False


FACTORIES: dict[str, Factory] = {
    "OpenAI": Factory("openai/", key_env="OPENAI_API_KEY"),
    "Azure-OpenAI": Factory("azure/", key_env="AZURE_API_KEY", needs_base=True),
    "Anthropic": Factory("anthropic/", key_env="ANTHROPIC_API_KEY"),
    "Gemini": Factory("gemini/", key_env="GEMINI_API_KEY"),
    "DeepSeek": Factory("deepseek/", key_env="DEEPSEEK_API_KEY"),
    "Tongyi-Qianwen": Factory("dashscope/", key_env="DASHSCOPE_API_KEY"),
    "Moonshot": Factory("moonshot/", key_env="MOONSHOT_API_KEY"),
    "ZHIPU-AI": Factory("openai/", api_base="https://open.bigmodel.cn/api/paas/v4", key_env="ZHIPUAI_API_KEY"),
    "MiniMax": Factory("minimax/", key_env="MINIMAX_API_KEY"),
    "Ollama": Factory("ollama_chat/", api_base="http://127.0.0.1:11434", needs_key=False),
    "VLLM": Factory("hosted_vllm/", key_env="VLLM_API_KEY", needs_key=False, needs_base=True),
    "OpenAI-API-Compatible": Factory("openai/", key_env="OPENAI_COMPATIBLE_API_KEY", needs_key=False, needs_base=True),
    "Embedded": Factory("openai/", needs_key=False),
}
ALIASES = {"Kimi": "Moonshot", "ZHIPU": "ZHIPU-AI", "Zhipu": "ZHIPU-AI", "Dashscope": "Tongyi-Qianwen",
           "Tongyi": "Tongyi-Qianwen", "vLLM": "VLLM", "Google": "Gemini", "LocalAI": "OpenAI-API-Compatible"}
_PROVIDER_BY_PREFIX = {"dashscope": "Tongyi-Qianwen", "deepseek": "DeepSeek", "anthropic": "Anthropic",
                       "gemini": "Gemini", "moonshot": "Moonshot", "ollama_chat": "Ollama", "ollama": "Ollama",
                       "hosted_vllm": "VLLM", "azure": "Azure-OpenAI", "zai": "ZHIPU-AI",
                       "minimax": "MiniMax"}


def canonical_factory(name: str) -> str:
    return ALIASES.get(name, name)


@dataclass(frozen=True)
class ModelEntry:
    """One configured model (a value of `gateway.models`)."""

    llm_id: str
    model: str
    provider: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str | None = None
    family: str = ""
    supports_tools: bool | None = None
    supports_reasoning: bool | None = None
    native_response_format: bool | None = None
    context_window: int = 0
    think_format: str = ""
    implicit_open: bool | None = None

    @property
    def is_embedded(self) -> bool:
        return self.api_base == EMBEDDED


@dataclass(frozen=True)
class Route:
    """A resolved model: what to call, how, and its family."""

    llm_id: str
    entry: ModelEntry
    litellm_model: str
    family: Family
    api_key: str | None = field(default=None, repr=False)

    @property
    def model_name(self) -> str:
        return self.litellm_model.split("/", 1)[1] if "/" in self.litellm_model else self.litellm_model

    @property
    def native_tools(self) -> bool:
        return self.entry.supports_tools if self.entry.supports_tools is not None else self.family.native_tools

    @property
    def native_response_format(self) -> bool:
        value = self.entry.native_response_format
        return value if value is not None else self.family.native_response_format

    @property
    def context_window(self) -> int:
        return self.entry.context_window or self.family.context_window


def _provider_of(model: str, explicit: str | None, api_base: str | None) -> str:
    if explicit:
        return canonical_factory(explicit)
    prefix = model.split("/", 1)[0] if "/" in model else ""
    if prefix in ("openai", "custom_openai"):
        return "OpenAI-API-Compatible" if api_base else "OpenAI"
    return _PROVIDER_BY_PREFIX.get(prefix, prefix)


def _entry(llm_id: str, raw: Any) -> ModelEntry:
    if not isinstance(raw, Mapping) or not raw.get("model"):
        raise InvalidArgumentError.for_field(f"gateway.models[{llm_id!r}]", "must be a mapping with a 'model' key")
    model = str(raw["model"])
    api_base = raw.get("api_base")
    provider = "Embedded" if api_base == EMBEDDED else _provider_of(model, raw.get("provider"), api_base)
    return ModelEntry(
        llm_id=llm_id, model=model, provider=provider, api_base=str(api_base) if api_base else None,
        api_key=str(raw["api_key"]) if raw.get("api_key") else None,
        api_key_env=str(raw["api_key_env"]) if raw.get("api_key_env") else None,
        family=str(raw.get("family") or ""), supports_tools=raw.get("supports_tools"),
        supports_reasoning=raw.get("supports_reasoning"), native_response_format=raw.get("native_response_format"),
        context_window=int(raw.get("context_window") or 0), think_format=str(raw.get("think_format") or ""),
        implicit_open=raw.get("implicit_open"),
    )


def embedded_default() -> ModelEntry:
    return ModelEntry(llm_id="", model=f"openai/{EMBEDDED_MODEL_NAME}", provider="Embedded", api_base=EMBEDDED,
                      family="smollm2", context_window=2048)


class ModelRegistry:
    """Immutable view of `gateway.models` and `gateway.factories`."""

    def __init__(self, models: Mapping[str, Any] | None = None, factories: Mapping[str, Any] | None = None,
                 env: Mapping[str, str] | None = None):
        self._env = os.environ if env is None else env
        self._entries: dict[str, ModelEntry] = {str(k): _entry(str(k), v) for k, v in (models or {}).items()}
        if "" not in self._entries:
            star = self._entries.get("*")
            # A concrete `*` model is "a configured model", so it is the default too; a templated one
            # ("{model}") needs a name, and the embedded model stays the default.
            fixed_star = star is not None and "{model}" not in star.model
            self._entries[""] = dataclasses.replace(star, llm_id="") if fixed_star else embedded_default()
        self._factories: dict[str, dict[str, Any]] = {}
        for name, raw in (factories or {}).items():
            if canonical_factory(str(name)) not in FACTORIES:
                raise InvalidArgumentError.for_field(f"gateway.factories.{name}", f"unknown factory; known: {', '.join(FACTORIES)}")
            self._factories[canonical_factory(str(name))] = dict(raw or {})

    @property
    def entries(self) -> list[ModelEntry]:
        return list(self._entries.values())

    @property
    def default(self) -> ModelEntry:
        return self._entries[""]

    @property
    def uses_embedded(self) -> bool:
        return any(e.is_embedded for e in self._entries.values())

    def family_of(self, entry: ModelEntry) -> Family:
        return family_for(entry.provider, entry.model.split("/", 1)[-1], entry.family)

    def resolve(self, llm_id: str, field_name: str = "model", need_key: bool = True) -> Route:
        """The route for `llm_id`; `need_key=False` (token counting) skips the API-key requirement.

        A known factory that lacks its key or api_base gives way to the `*` entry when there is one;
        otherwise the missing piece is reported (FAILED_PRECONDITION)."""
        entry = self._entries.get(llm_id)
        problem = None
        if entry is None and "@" in llm_id:
            name, _, factory_name = llm_id.rpartition("@")
            factory = canonical_factory(factory_name)
            if factory in FACTORIES and name:
                candidate = self._from_factory(llm_id, name, factory)
                problem = self._missing(candidate, need_key)
                if problem is None:
                    entry = candidate
        if entry is None and "*" in self._entries:
            star = self._entries["*"]
            requested = llm_id.rpartition("@")[0] or llm_id
            entry = ModelEntry(**{**star.__dict__, "llm_id": llm_id, "model": star.model.replace("{model}", requested)})
            problem = None
        if entry is None:
            if problem:
                raise FailedPreconditionError(problem, reason="MODEL_NOT_CONFIGURED")
            raise InvalidArgumentError.for_field(field_name, f"unknown model {llm_id!r}: not in gateway.models, no known "
                                                 "'@Factory' suffix and no '*' fallback entry", reason="MODEL_NOT_FOUND")
        problem = self._missing(entry, need_key)
        if problem:
            raise FailedPreconditionError(problem, reason="MODEL_NOT_CONFIGURED")
        return Route(llm_id=llm_id, entry=entry, litellm_model=entry.model, family=self.family_of(entry),
                     api_key=self._key(entry) if need_key else None)

    def _from_factory(self, llm_id: str, name: str, factory_name: str) -> ModelEntry:
        factory = FACTORIES[factory_name]
        overrides = self._factories.get(factory_name, {})
        return ModelEntry(llm_id=llm_id, model=factory.prefix + name, provider=factory_name,
                          api_base=overrides.get("api_base") or factory.api_base, api_key=overrides.get("api_key"),
                          api_key_env=overrides.get("api_key_env") or factory.key_env,
                          context_window=int(overrides.get("context_window") or 0))

    def _missing(self, entry: ModelEntry, need_key: bool) -> str | None:
        """What keeps this entry from being called (never the key itself), or None."""
        factory = FACTORIES.get(entry.provider)
        if factory is None or entry.is_embedded:
            return None
        if factory.needs_base and not entry.api_base:
            return f"model {entry.llm_id!r}: factory {entry.provider} needs gateway.factories.{entry.provider}.api_base"
        if need_key and factory.needs_key and self._key(entry) is None:
            hint = entry.api_key_env or factory.key_env or "api_key"
            return f"model {entry.llm_id!r}: no API key for {entry.provider}; set {hint} or gateway.models[...].api_key"
        return None

    def _key(self, entry: ModelEntry) -> str | None:
        if entry.api_key:
            return entry.api_key
        env_name = entry.api_key_env or (FACTORIES[entry.provider].key_env if entry.provider in FACTORIES else None)
        if env_name and self._env.get(env_name):
            return self._env[env_name]
        return None
