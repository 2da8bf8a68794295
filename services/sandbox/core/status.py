"""The runner's status record, and the one parser every backend uses for it.

The runner (adapters/runner/) writes one JSON object to a separate channel (a pipe on `local`, a file
on `docker`, where the runner first fills the file with 1 KiB of spaces to hold room for it) just before
it exits:

    {"ok": true|false, "result": "<main()'s return value as JSON text>" (optional),
     "error": {"type": str, "message": str, "memory": bool} (optional)}

A record too large to deliver is replaced by the runner with
`{"ok": false, "error": {"type": "StatusTooLarge", "size": N, "limit": L, ...}}`.

Backends hand over the raw bytes, at most MAX_STATUS_BYTES + 1 of them (plus the real size when they
know it), and `parse_status` turns them into a RunnerStatus or a StatusProblem. Everything the job
could have written itself is treated as untrusted input: it never crashes the parser, and no text
from it reaches a problem's message.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from typing import Any, Literal

from services.sandbox.core.models import ExitReason

MAX_STATUS_BYTES = 16 << 20
"""The largest status record accepted (it holds main()'s return value as JSON, quoted once more)."""

MAX_RESULT_DEPTH = 32
"""The deepest nesting of lists and objects a result may have: a google.protobuf.Value takes up to three
message levels per JSON level, and protobuf refuses messages nested deeper than 100 levels."""
_DOUBLE_MAX = sys.float_info.max
"""A result's numbers travel as doubles: an integer such as 10**400 has none (json.loads reads 1e400 as inf)."""

TOO_LARGE_TYPE = "StatusTooLarge"
"""error.type of the runner's stand-in record when the real one is over its limit."""


@dataclass(frozen=True)
class RunnerStatus:
    """A well-formed record. `result` is valid JSON text when present, and a value the API can carry (at most
    MAX_RESULT_DEPTH levels deep, numbers within a double's range): else parse_status gives a StatusProblem."""

    ok: bool
    result: str | None = None
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class StatusProblem:
    """No usable record. `missing`: none was written; `too_large`: over the limit; `invalid`: unreadable
    or the wrong shape."""

    kind: Literal["missing", "too_large", "invalid"]
    message: str

    @property
    def reason(self) -> ExitReason:
        return ExitReason.OUTPUT_LIMIT if self.kind == "too_large" else ExitReason.ERROR


MISSING = StatusProblem(
    "missing",
    "the runner left no status record: the process ended without reporting (e.g. os._exit() or "
    "process.reallyExit() in the job's code, or the runner was killed)",
)


def _too_large(size: int | None, limit: int) -> StatusProblem:
    size_text = f"{size} bytes" if size is not None else f"more than {limit} bytes"
    return StatusProblem(
        "too_large",
        f"the status record (main()'s return value as JSON) is {size_text}; the limit is {limit} bytes",
    )


def _invalid(detail: str) -> StatusProblem:
    return StatusProblem("invalid", f"the runner's status record {detail}")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""JSON's \\udXXX escapes decode to lone surrogates, which UTF-8 (and so a proto string) cannot carry."""


def _escape_surrogates(json_text: str) -> str:
    """Valid JSON text with each lone surrogate written as its \\uXXXX escape: the same JSON value."""
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)


def _printable_error(error: dict[str, Any]) -> dict[str, Any]:
    """The error with its type and message made UTF-8-safe (they end up in the Exit message)."""
    return {key: _LONE_SURROGATE.sub("?", value) if isinstance(value, str) else value for key, value in error.items()}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN and infinities: strict JSON only (a result becomes a proto Value)


def _not_carried(value: Any) -> str | None:
    """Why the API's google.protobuf.Value cannot carry this parsed result, or None. Iterative, and only
    containers go on the stack (a result may hold millions of numbers)."""
    if not isinstance(value, (dict, list)):
        value = [value]
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_RESULT_DEPTH:
            return f"it nests lists and objects deeper than {MAX_RESULT_DEPTH} levels"
        for child in item.values() if isinstance(item, dict) else item:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif (kind is int or kind is float) and not -_DOUBLE_MAX <= child <= _DOUBLE_MAX:
                return "it holds a number beyond the range of a double (return it as a string)"
    return None


def parse_status(raw: bytes | None, *, size: int | None = None) -> RunnerStatus | StatusProblem:
    """`raw`: the record as read (None or empty when there was none), at most MAX_STATUS_BYTES + 1 bytes;
    `size`: its real size when the reader knows it (e.g. from a tar header) and did not read it all.
    Whitespace only is no record either: a file channel starts as the runner's reserved room of spaces."""
    total = max(size or 0, len(raw or b""))
    if total > MAX_STATUS_BYTES:
        return _too_large(size if size is not None and size > MAX_STATUS_BYTES else None, MAX_STATUS_BYTES)
    if not raw or raw.isspace():
        return MISSING
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return _invalid(f"is not JSON ({type(exc).__name__})")
    if not isinstance(record, dict):
        return _invalid(f"is a JSON {type(record).__name__}, not an object")
    ok = record.get("ok")
    if not isinstance(ok, bool):
        return _invalid("has no boolean 'ok'")
    error = record.get("error")
    if error is not None and not isinstance(error, dict):
        return _invalid("has an 'error' that is not an object")
    if error is not None and error.get("type") == TOO_LARGE_TYPE:
        limit = _int(error.get("limit"))
        return _too_large(_int(error.get("size")), limit if limit is not None else MAX_STATUS_BYTES)
    result = record.get("result")
    if result is not None:
        if not isinstance(result, str):
            return _invalid("has a 'result' that is not JSON text")
        try:
            value = json.loads(result, parse_constant=_refuse_constant)
        except (ValueError, RecursionError):
            return _invalid("has a 'result' that is not JSON text")
        if (why := _not_carried(value)) is not None:
            return StatusProblem("invalid", f"main()'s return value cannot be sent as a result: {why}")
        result = _escape_surrogates(result)
    return RunnerStatus(ok=ok, result=result, error=_printable_error(error) if error is not None else None)
