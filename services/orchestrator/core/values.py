"""Helpers for JSON-shaped values (the only kind of value a canvas holds)."""

from __future__ import annotations

import json
import re
from typing import Any

_PLAIN = (str, int, float, bool, type(None))

MAX_DEPTH = 20
"""Deepest nesting of lists and objects a canvas value keeps (events, journal steps, run outputs) and
that JSON text from users, tools or models is parsed to. Events travel as protobuf Structs, whose
decoders stop at 100 message levels (each object level costs three of them), and json.loads
recurses per level: a deeper structure is kept as its compact JSON text instead."""
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_depth(text: str, limit: int = MAX_DEPTH) -> int:
    """Bracket nesting of JSON `text` outside strings, counted without recursion; stops once past
    `limit` (the result is then limit + 1)."""
    if text.count("[") + text.count("{") <= limit:
        return text.count("[") + text.count("{")  # an upper bound already within the limit
    depth = deepest = 0
    for match in _JSON_TOKENS.finditer(text):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                break
        else:
            depth = max(depth - 1, 0)
    return deepest


def parse_json(text: str | bytes) -> Any:
    """json.loads for untrusted text: ValueError (json.JSONDecodeError for bad syntax) also for text
    nested deeper than MAX_DEPTH, never a RecursionError."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if json_depth(text) > MAX_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    return json.loads(text)


def plain_copy(value: Any) -> Any:
    """Deep copy of a JSON-shaped value; several times faster than copy.deepcopy for dicts and lists."""
    if isinstance(value, dict):
        return {k: plain_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_copy(v) for v in value]
    return value


def jsonable(value: Any) -> Any:
    """JSON-safe form of a value; already-plain values (the usual case) are returned as they are."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        items = {k: jsonable(v) for k, v in value.items()}
        return value if all(items[k] is value[k] for k in value) else items
    if isinstance(value, list):
        items = [jsonable(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def json_copy(value: Any, depth: int = 0) -> Any:
    """A JSON-safe deep copy in one pass (tuples become lists, keys strings, odd leaves JSON-coerced);
    a list or object nested deeper than MAX_DEPTH below `value` becomes its compact JSON text."""
    if isinstance(value, _PLAIN):
        return value
    if depth > MAX_DEPTH and isinstance(value, (dict, list, tuple)):
        return _compact(value)
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): json_copy(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_copy(v, depth + 1) for v in value]
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def _compact(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (RecursionError, ValueError):
        return str(type(value).__name__) + " nested too deeply"
