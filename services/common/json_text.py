"""JSON objects carried as text, so their key order survives a process boundary.

A google.protobuf.Struct is a map: its keys come back in another order in every process, and RAGFlow's
DSL gives key order meaning (Categorize lists its categories in that order, Switch tries its conditions
in order, forms show their fields in order). The contracts therefore carry a DSL as JSON text too
(`dsl_json` fields). `dump_object` writes such text; `parse_object` reads a request's text with the
same checks a Struct gets (finite numbers, no NUL, bounded nesting), naming the field on failure.
Python's `json` keeps key order (a repeated key keeps its first place and its last value), so the object
read is the object written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from services.common.errors import InvalidArgumentError

MAX_DEPTH = 100
"""Nesting accepted in text: protobuf's own recursion limit, so text and Struct refuse the same DSLs."""


def dump_object(value: Mapping[str, Any]) -> str:
    """Compact JSON text of `value`, keys in their order, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (numbers must be finite)")


def _finite(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is too large for a JSON number (numbers must be finite)")
    return number


def _problem(value: Any) -> tuple[str, str] | None:
    """The first text that storage cannot hold (NUL, a lone surrogate) or nesting past MAX_DEPTH."""
    stack: list[tuple[str, Any, int]] = [("", value, 1)]
    while stack:
        path, item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return path, f"nests objects and arrays more than {MAX_DEPTH} levels deep"
        if isinstance(item, dict):
            for key, child in item.items():
                if (problem := _text_problem(key)) is not None:
                    return path, f"has a key that {problem}"
                if isinstance(child, str):
                    if (problem := _text_problem(child)) is not None:
                        return f"{path}.{key}", problem
                elif isinstance(child, (dict, list)):
                    stack.append((f"{path}.{key}", child, depth + 1))
        else:
            for index, child in enumerate(item):
                if isinstance(child, str):
                    if (problem := _text_problem(child)) is not None:
                        return f"{path}[{index}]", problem
                elif isinstance(child, (dict, list)):
                    stack.append((f"{path}[{index}]", child, depth + 1))
    return None


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "contains a NUL character (\\x00), which text fields cannot hold"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (\\ud800-\\udfff), which UTF-8 cannot hold"
    return None


def parse_object(text: str, field: str) -> dict[str, Any]:
    """The JSON object in `text`, or INVALID_ARGUMENT naming `field` (and the path inside it)."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)
    except RecursionError:
        raise InvalidArgumentError.for_field(field, f"nests objects and arrays more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # JSONDecodeError is a ValueError, as is a refused NaN/Infinity
        raise InvalidArgumentError.for_field(field, f"is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidArgumentError.for_field(field, f"must be a JSON object, got {type(value).__name__}")
    found = _problem(value)
    if found is not None:
        path, problem = found
        raise InvalidArgumentError.for_field(f"{field}{path}", problem)
    return value


def sorted_keys(value: Any) -> Any:
    """`value` with every object's keys sorted: the one order a DSL that arrived as a Struct (whose own
    order is arbitrary, and differs between processes) can be given deterministically."""
    if isinstance(value, dict):
        return {key: sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(item) for item in value]
    return value


def text_or_struct(text: str, struct: Any) -> dict[str, Any]:
    """A JSON object a message carries both ways (`dsl_json` and `dsl`): the text when set (key order kept),
    else the Struct with sorted keys (a peer that sends no text)."""
    from services.common.structs import from_struct

    return parse_object(text, "dsl_json") if text else sorted_keys(from_struct(struct))
