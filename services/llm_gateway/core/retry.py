"""Retry policy: which errors, how long to wait, and when to give up.

Only errors whose kind is retryable (429, 5xx, timeouts, connection errors; see types.RETRYABLE_KINDS)
are retried, and only while nothing has been streamed to the client. The delay is exponential with
full jitter, at least the provider's Retry-After, and the sum of all waits for one request never
exceeds `max_total_wait_s` (a Retry-After that would cross it ends the retries instead).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from services.common.errors import InvalidArgumentError
from services.llm_gateway.core.types import ProviderError


@dataclass(frozen=True)
class RetrySettings:
    max_attempts: int = 4
    """Attempts per model, the first included."""
    initial_backoff_s: float = 0.5
    max_backoff_s: float = 4.0
    multiplier: float = 2.0
    jitter: float = 0.5
    """Fraction of the delay that is randomised (0 = none, 1 = full jitter)."""
    max_total_wait_s: float = 10.0
    """Upper bound of all waits for one request, across fallback models."""

    @classmethod
    def from_config(cls, raw: dict[str, Any] | None) -> "RetrySettings":
        raw = dict(raw or {})
        known = set(cls.__dataclass_fields__)
        unknown = set(raw) - known
        if unknown:
            raise InvalidArgumentError.for_field("gateway.retry", f"unknown keys {sorted(unknown)}; known: {sorted(known)}")
        values = {k: (int(v) if k == "max_attempts" else float(v)) for k, v in raw.items()}
        settings = cls(**values)
        if settings.max_attempts < 1 or settings.max_total_wait_s < 0:
            raise InvalidArgumentError.for_field("gateway.retry", "max_attempts must be >= 1 and max_total_wait_s >= 0")
        return settings


class RetryBudget:
    """Tracks waits for one request; `next_delay` returns None when retrying must stop."""

    def __init__(self, settings: RetrySettings, rng: random.Random | None = None):
        self.settings = settings
        self.waited_s = 0.0
        self._rng = rng or random.Random()

    def next_delay(self, error: ProviderError, attempt: int) -> float | None:
        """Delay before attempt `attempt + 1` (attempt counts from 1), or None."""
        s = self.settings
        if not error.retryable or attempt >= s.max_attempts:
            return None
        base = min(s.initial_backoff_s * (s.multiplier ** (attempt - 1)), s.max_backoff_s)
        delay = base * (1 - s.jitter) + base * s.jitter * self._rng.random()
        if error.retry_after_s is not None:
            delay = max(delay, error.retry_after_s)
        if self.waited_s + delay > s.max_total_wait_s:
            return None
        self.waited_s += delay
        return delay
