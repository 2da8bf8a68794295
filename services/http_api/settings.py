"""The `http` section of the config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.common.errors import InvalidArgumentError
from services.common.settings import SERVER_KEYS

DEFAULT_PORT = 9380
"""RAGFlow's own API port, so a client's base URL changes by host only."""


@dataclass(frozen=True)
class HttpSettings:
    max_body_bytes: int = 16 << 20
    call_timeout_s: float = 30.0
    shutdown_grace_s: float = 20.0
    cors_origins: tuple[str, ...] = ("*",)
    """Browser origins allowed to call the API (RAGFlow allows any); () turns CORS off."""

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> "HttpSettings":
        known = {"max_body_bytes", "call_timeout_s", "cors_origins"} | SERVER_KEYS
        for key in section:
            if key not in known:
                raise InvalidArgumentError.for_field(f"http.{key}", f"unknown key (known: {', '.join(sorted(known))})")
        values: dict[str, Any] = {}
        for key, kind, minimum in (("max_body_bytes", int, 1), ("call_timeout_s", float, 0.001),
                                   ("shutdown_grace_s", float, 0.0)):
            if section.get(key) is None:
                continue
            raw = section[key]
            try:
                if isinstance(raw, bool):
                    raise ValueError
                value = kind(raw)
            except (TypeError, ValueError):
                raise InvalidArgumentError.for_field(f"http.{key}", f"must be a number, not {raw!r}") from None
            if not value >= minimum or value == float("inf"):
                raise InvalidArgumentError.for_field(f"http.{key}", f"must be at least {minimum}, not {raw!r}")
            values[key] = value
        origins = section.get("cors_origins")
        if origins is not None:
            if not isinstance(origins, list) or not all(isinstance(o, str) and o for o in origins):
                raise InvalidArgumentError.for_field("http.cors_origins", f"must be a list of origins, not {origins!r}")
            values["cors_origins"] = tuple(origins)
        return cls(**values)
