"""Stable model-facing function names (fix list §7 item 24).

RAGFlow appends the tool's list index (`tavily_search_1`), so reordering an Agent's tools renames
them and breaks scripts, caches and traces. Here a name depends only on the tool itself:

1. the base name (the tool's `function_name`, an explicit `function_name` param, a sub-agent's id
   suffix, or an MCP tool's name) is used as is when no other tool of the agent wants it;
2. when several tools want the same base, each gets `<base>_<slug of its display name>`;
3. if that still collides (same display name), a short hash of the tool's params is appended.

Every step looks at the whole set, never at positions, so any permutation yields the same names.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.orchestrator.tools.citations import stable_id

# OpenAI and most providers accept ^[a-zA-Z0-9_-]{1,64}$ for function names.
_MAX_LEN = 64
_INVALID = re.compile(r"[^A-Za-z0-9_-]+")


def slug(text: str) -> str:
    cleaned = _INVALID.sub("_", text.strip()).strip("_")
    return cleaned or "tool"


@dataclass(frozen=True)
class NamedEntry:
    """One tool of an agent, as seen by the naming step."""

    base: str
    display_name: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)


def _fingerprint(entry: NamedEntry) -> str:
    return stable_id(entry.base, entry.display_name, json.dumps(entry.params, sort_keys=True, default=str), length=6)


def _fit(name: str) -> str:
    if len(name) <= _MAX_LEN:
        return name
    return f"{name[: _MAX_LEN - 7]}_{stable_id(name, length=6)}"


def assign_function_names(entries: Sequence[NamedEntry]) -> list[str]:
    """Names for `entries`, in the same order; independent of that order."""
    bases = [slug(e.base) for e in entries]
    base_counts = Counter(bases)
    stage2 = [
        base if base_counts[base] == 1 else f"{base}_{slug(e.display_name)}" for base, e in zip(bases, entries)
    ]
    stage2_counts = Counter(stage2)
    names = [
        name if stage2_counts[name] == 1 else f"{name}_{_fingerprint(e)}" for name, e in zip(stage2, entries)
    ]
    return [_fit(n) for n in names]
