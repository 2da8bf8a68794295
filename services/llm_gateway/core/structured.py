"""Structured output: find the JSON in an answer, validate it against the schema, and word the repair.

`extract_json` accepts a bare JSON value, a fenced block (```json ... ```), or JSON wrapped in prose;
with several candidates it takes the first that parses. Validation uses jsonschema (Draft 2020-12).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import jsonschema

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


@dataclass
class Extracted:
    ok: bool
    value: Any = None
    error: str = ""


def extract_json(text: str) -> Extracted:
    stripped = text.strip()
    if not stripped:
        return Extracted(False, error="the answer was empty")
    candidates = [m.group(1).strip() for m in _FENCE.finditer(stripped)] + [stripped]
    for candidate in candidates:
        try:
            return Extracted(True, json.loads(candidate))
        except json.JSONDecodeError:
            pass
    # JSON wrapped in prose: decode from the first '{' or '[' that yields a complete value.
    for start, char in enumerate(stripped):
        if char in "{[":
            try:
                value, _ = _DECODER.raw_decode(stripped, start)
                return Extracted(True, value)
            except json.JSONDecodeError:
                continue
    return Extracted(False, error="no JSON value found in the answer")


def validate(value: Any, schema: dict[str, Any]) -> str | None:
    """None when valid, else the validator's message with the failing path."""
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.path))
    if not errors:
        return None
    first = errors[0]
    where = "/".join(str(p) for p in first.path) or "(root)"
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"at {where}: {first.message}{more}"


def check(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """(value, None) when the answer holds valid JSON for the schema, else (None, problem)."""
    found = extract_json(text)
    if not found.ok:
        return None, found.error
    problem = validate(found.value, schema)
    return (found.value, None) if problem is None else (None, problem)


def schema_prompt(schema: dict[str, Any]) -> str:
    return ("Answer with ONLY a JSON value that satisfies this JSON Schema, with no prose and no code fences:\n"
            + json.dumps(schema))


def repair_prompt(problem: str, schema: dict[str, Any]) -> str:
    return (f"Your previous answer was not valid: {problem}. Answer again with ONLY the corrected JSON value "
            f"that satisfies this JSON Schema:\n{json.dumps(schema)}")


def response_format_param(schema: dict[str, Any], name: str) -> dict[str, Any]:
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", name or "answer")[:64]
    return {"type": "json_schema", "json_schema": {"name": safe, "schema": schema}}
