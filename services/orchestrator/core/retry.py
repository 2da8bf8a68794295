"""Per-node error policy: retries with exponential backoff and jitter, timeouts, and what happens
after the last attempt (spec §2.11-2.12, fixes §7 items 12-14).

    max_retries        extra attempts for *retryable* errors (network, 5xx, timeouts, model outages)
    delay_after_error  base delay in seconds; attempt n waits base * 2**(n-1) * jitter(0.5..1.5),
                       capped at max_backoff_s
    exception_method   "goto"    → follow exception_goto (the normal downstream gets "not taken")
                       "comment" → (or any non-empty exception_default_value) the node succeeds
                                   with the default value as its outputs; downstream continues
                       otherwise → the run fails with WorkflowFinished{FAILED, error{component_id}}
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from services.orchestrator.core.components.base import declared_outputs

GOTO = "goto"
DEFAULT = "default"
FAIL = "fail"


@dataclass(frozen=True)
class NodePolicy:
    max_retries: int
    base_delay_s: float
    max_backoff_s: float
    timeout_s: float | None
    on_error: str
    goto: tuple[str, ...] = ()
    default_value: Any = None

    def backoff(self, attempt: int, rng: random.Random) -> float:
        delay = self.base_delay_s * (2 ** max(0, attempt - 1))
        return min(self.max_backoff_s, delay) * rng.uniform(0.5, 1.5)

    def default_outputs(self, params: dict[str, Any]) -> dict[str, Any]:
        names = declared_outputs(params) or ["content"]
        return {name: self.default_value for name in names}


def policy_for(params: dict[str, Any], default_timeout_s: float | None, *, max_backoff_s: float = 30.0,
               timeout_override_s: float | None = None) -> NodePolicy:
    method = str(params.get("exception_method") or "").lower()
    goto = params.get("exception_goto") or []
    # The ids the loader made exception edges of (dsl/loader._ids): text, or a list of ids; nulls
    # and other shapes are no target.
    goto = (goto,) if isinstance(goto, str) else \
        tuple(str(g) for g in goto if isinstance(g, (str, int)) and str(g)) if isinstance(goto, list) else ()
    default = params.get("exception_default_value")
    if method == "goto" and goto:
        on_error = GOTO
    elif method == "comment" or default not in (None, ""):
        on_error = DEFAULT
    else:
        on_error = FAIL
    timeout = timeout_override_s if timeout_override_s is not None else default_timeout_s
    if default_timeout_s is not None and isinstance(params.get("timeout"), (int, float)) and params["timeout"] > 0:
        timeout = max(timeout or 0, float(params["timeout"]) + 5)  # component-level HTTP timeout + slack
    try:
        retries = max(0, int(params.get("max_retries") or 0))
        base = max(0.0, float(params.get("delay_after_error") if params.get("delay_after_error") is not None else 2.0))
    except (TypeError, ValueError):
        retries, base = 0, 2.0
    return NodePolicy(retries, base, max_backoff_s, timeout, on_error, goto, "" if default is None else default)
