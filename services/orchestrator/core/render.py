"""The one stringification rule (spec §3.3, fix list §7 item 18).

Strings verbatim; None → ""; everything else compact JSON with non-ASCII preserved (so True → "true").
Lists are joined with `joiner` when one is given (StringTransform merge, Message delimiters).
"""

from __future__ import annotations

import json
from typing import Any


def stringify(value: Any, joiner: str | None = None) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if joiner is not None and isinstance(value, (list, tuple)):
        return joiner.join(stringify(v) for v in value)
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return str(value)
