"""Structured output: find the JSON in an answer, validate it against the schema, and word the repair.

`extract_json` accepts a bare JSON value, a fenced block (```json ... ```), or JSON wrapped in prose;
with several candidates it takes the first that parses. Validation uses jsonschema (Draft 2020-12).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema_specifications import REGISTRY as SPECIFICATIONS
from referencing.jsonschema import DRAFT202012

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)

MAX_JSON_DEPTH = 64
"""Deepest JSON the gateway parses (tool arguments, structured answers, history arguments). json.loads and
jsonschema recurse per level, so deeper text is refused before it is parsed, never by a RecursionError."""
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_depth(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> int:
    """Bracket nesting depth of JSON `text` outside strings, counted without recursion; stops counting once
    past `limit` (so the result is at most limit + 1). Cheap for the common case of few brackets."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if text.count("[") + text.count("{") <= limit:
        return min(text.count("[") + text.count("{"), limit)  # an upper bound that is already within the limit
    depth = deepest = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif token in "]}":
            depth = max(depth - 1, 0)
    return deepest


class NotStandardJson(ValueError):
    """Text Python's json module accepts but JSON (RFC 8259) does not carry: NaN, Infinity, or a number beyond
    a double's range (it would reach the client as NaN/Infinity, which no strict JSON parser reads back)."""


def _constant(name: str) -> Any:
    raise NotStandardJson(f"{name} is not a JSON value")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotStandardJson(f"the number {text[:24]} is out of range")
    return value


def _int(text: str) -> int:
    value = int(text)
    try:
        float(value)
    except OverflowError:
        raise NotStandardJson(f"the number {text[:24]}... is out of range") from None
    return value


_STRICT = json.JSONDecoder(parse_float=_float, parse_int=_int, parse_constant=_constant)


def loads(text: str) -> Any:
    """json.loads for untrusted text: ValueError (json.JSONDecodeError for bad syntax) also when the text nests
    deeper than MAX_JSON_DEPTH, and NotStandardJson for NaN, Infinity or a number no double holds."""
    if json_depth(text) > MAX_JSON_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return _STRICT.decode(text)


@dataclass
class Extracted:
    ok: bool
    value: Any = None
    error: str = ""


def extract_json(text: str) -> Extracted:
    stripped = text.strip()
    if not stripped:
        return Extracted(False, error="the answer was empty")
    if json_depth(stripped) > MAX_JSON_DEPTH:
        return Extracted(False, error=f"the answer nests JSON deeper than {MAX_JSON_DEPTH} levels")
    candidates = [m.group(1).strip() for m in _FENCE.finditer(stripped)] + [stripped]
    not_standard = ""
    for candidate in candidates:
        try:
            return Extracted(True, _STRICT.decode(candidate))
        except NotStandardJson as exc:
            not_standard = not_standard or str(exc)
        except ValueError:  # JSONDecodeError, or a number too long to convert
            pass
    # JSON wrapped in prose: decode from the first '{' or '[' that yields a complete value.
    for start, char in enumerate(stripped):
        if char in "{[":
            try:
                value, _ = _STRICT.raw_decode(stripped, start)
                return Extracted(True, value)
            except NotStandardJson as exc:
                not_standard = not_standard or str(exc)
            except ValueError:
                continue
    if not_standard:
        return Extracted(False, error=f"the answer is not standard JSON: {not_standard}")
    return Extracted(False, error="no JSON value found in the answer")


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why `schema` cannot be used to validate (not a Draft 2020-12 schema, or a `$ref` that does not resolve:
    the gateway never fetches remote references), or None."""
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        return f"is not a valid JSON Schema (Draft 2020-12) at {where}: {exc.message}"
    resolver = SPECIFICATIONS.resolver_with_root(DRAFT202012.create_resource(schema))
    stack: list[Any] = [schema]
    while stack:  # iterative: any depth
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                if "$id" in node or any(isinstance(v, dict) and "$id" in v for v in node.values()):
                    continue  # relative to a nested base URI: left to validation time
                try:
                    resolver.lookup(ref)
                except Exception:  # referencing.exceptions.Unresolvable and its wrappers
                    return f"has a $ref that does not resolve: {ref!r} (only references inside the schema are supported)"
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def validate(value: Any, schema: dict[str, Any]) -> str | None:
    """None when valid, else the validator's message with the failing path."""
    try:
        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.path))
    except Exception as exc:  # a schema problem only validation finds (unresolvable nested $ref, unknown type)
        return f"the schema could not be applied ({type(exc).__name__})"
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
