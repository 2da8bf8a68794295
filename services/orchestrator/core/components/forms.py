"""Form handling shared by Begin and UserFillUp (spec §2.8, §5.1, §5.2)."""

from __future__ import annotations

from typing import Any

from services.orchestrator.core.values import parse_json


def form_fields(params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    fields = params.get("inputs")
    if not isinstance(fields, dict):
        return {}
    return {name: (spec if isinstance(spec, dict) else {"value": spec}) for name, spec in fields.items()}


def answer_value(field: dict[str, Any], raw: Any) -> Any:
    """RAGFlow's answer resolution: {"value": x} → x; object-typed JSON strings are parsed."""
    if isinstance(raw, dict) and "value" in raw:
        raw = raw["value"]
    if field.get("type") == "object" and isinstance(raw, str):
        try:
            return parse_json(raw)
        except ValueError:
            return raw
    return raw


def satisfied(field: dict[str, Any], value: Any) -> bool:
    if field.get("type") == "file":
        return bool(field.get("optional")) and value is None or value not in (None, [], "")
    return value is not None


def field_schema(name: str, field: dict[str, Any]) -> dict[str, Any]:
    schema = {"name": field.get("name", name), "type": field.get("type", "line"), "optional": bool(field.get("optional", False))}
    for key in ("options", "description"):
        if key in field:
            schema[key] = field[key]
    schema["value"] = None
    return schema
