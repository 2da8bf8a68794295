"""Comparison operators shared by Switch, Loop termination and DataOperations/ListOperations filters."""

from __future__ import annotations

from typing import Any

from services.orchestrator.core.errors import NodeError
from services.orchestrator.core.render import stringify

_NUMERIC = {"=": lambda a, b: a == b, "≠": lambda a, b: a != b, "!=": lambda a, b: a != b,
            ">": lambda a, b: a > b, "<": lambda a, b: a < b, "≥": lambda a, b: a >= b, ">=": lambda a, b: a >= b,
            "≤": lambda a, b: a <= b, "<=": lambda a, b: a <= b}


def _text(value: Any) -> str:
    return stringify(value).lower()


def compare(value: Any, operator: str, target: Any) -> bool:
    """Switch semantics (spec §5.5): text operators are case-insensitive on stringified values;
    relational operators compare as floats when both sides are numeric, natively otherwise."""
    op = (operator or "").strip()
    if op == "contains":
        if isinstance(value, list):
            return target in value or _text(target) in [_text(v) for v in value]
        return _text(target) in _text(value)
    if op == "not contains":
        return not compare(value, "contains", target)
    if op == "start with":
        return _text(value).startswith(_text(target))
    if op == "end with":
        return _text(value).endswith(_text(target))
    if op == "empty":
        return not value
    if op == "not empty":
        return not compare(value, "empty", target)
    if op in ("is", "is not"):
        same = _text(value) == _text(target) if not isinstance(value, (list, dict)) else value == target
        return same if op == "is" else not same
    if op in _NUMERIC:
        try:
            return _NUMERIC[op](float(value), float(target))
        except (TypeError, ValueError):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                raise NodeError(f"cannot compare number {value!r} with {target!r}", reason="BAD_OPERAND") from None
            try:
                return _NUMERIC[op](value, target)
            except TypeError:
                return _NUMERIC[op](stringify(value), stringify(target))
    raise NodeError(f"invalid operator '{operator}'", reason="BAD_OPERATOR")
