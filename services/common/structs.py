"""Conversions between JSON-shaped Python values and google.protobuf.Struct / Value.

Struct stores every number as a double, so an int sent as 5 comes back as 5.0. `from_struct` and
`from_value` turn integral doubles back into ints (within 2**53), which keeps DSL round trips exact
for every value JSON documents realistically hold.

The walk is written out here rather than left to `Struct.update` / `json_format.MessageToDict`:
every run spec, step and event payload crosses it (several times per run in each service), and one
direct pass is 6-9x faster than those generic paths, with the same results: tuples and sets become
lists, non-string keys and unknown objects become strings, bytes are decoded, NaN and infinities are
refused on the way out (ValueError) as json_format refuses them. Strings and keys with lone surrogates
(which UTF-8 cannot carry) get '?' in their place instead of failing the conversion.

Input checks for servers: `from_struct(struct, field="canvas.dsl")` turns a NaN or infinity into
INVALID_ARGUMENT naming the path down to the key (`canvas.dsl.components.begin.params.x`), and
`find_bad_value` finds the first such number, or a NUL character in a string or key, without recursion.
For clients: `find_inexact_integer` finds an integer that `to_struct` would round, before it is sent;
`find_too_deep` finds nesting past a limit (the store's, or protobuf's recursion limit).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2

from services.common.errors import InvalidArgumentError
from services.common.lru import LRU

_MAX_EXACT = 2**53
_INF = float("inf")
_NULL = struct_pb2.NULL_VALUE


def _utf8(text: str) -> str:
    """`text` with each lone surrogate (not encodable as UTF-8) replaced by '?'."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _set(target: struct_pb2.Value, value: Any) -> None:
    if isinstance(value, str):
        try:
            target.string_value = value
        except UnicodeEncodeError:  # a lone surrogate
            target.string_value = _utf8(value)
    elif value is None:
        target.null_value = _NULL
    elif isinstance(value, bool):  # before int: bool is an int
        target.bool_value = value
    elif isinstance(value, (int, float)):
        target.number_value = value
    elif isinstance(value, Mapping):
        struct = target.struct_value
        struct.SetInParent()  # an empty dict is still a struct, not an unset Value
        _fill(struct, value)
    elif isinstance(value, (list, tuple, set)):
        items = target.list_value
        items.SetInParent()
        add = items.values.add
        for item in value:
            _set(add(), item)
    elif isinstance(value, bytes):
        target.string_value = value.decode("utf-8", "replace")
    else:
        target.string_value = str(value)


def _fill(struct: struct_pb2.Struct, value: Mapping[Any, Any]) -> None:
    fields = struct.fields
    for key, item in value.items():
        if not isinstance(key, str):
            key = str(key)
        try:
            slot = fields[key]
        except UnicodeEncodeError:  # a lone surrogate in the key
            slot = fields[_utf8(key)]
        _set(slot, item)


def _get(message: struct_pb2.Value) -> Any:
    kind = message.WhichOneof("kind")
    if kind == "string_value":
        return message.string_value
    if kind == "number_value":
        number = message.number_value
        if number.is_integer() and -_MAX_EXACT <= number <= _MAX_EXACT:
            return int(number)
        if number != number or number == _INF or number == -_INF:
            raise ValueError("Fail to serialize Infinity or NaN for Value.number_value")
        return number
    if kind == "struct_value":
        return {key: _get(item) for key, item in message.struct_value.fields.items()}
    if kind == "list_value":
        return [_get(item) for item in message.list_value.values]
    if kind == "bool_value":
        return message.bool_value
    return None  # null_value, or no kind set


def to_struct(value: Mapping[str, Any] | None) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    if value:
        _fill(struct, value)
    return struct


def from_struct(struct: struct_pb2.Struct | None, field: str | None = None) -> dict[str, Any]:
    """The JSON object a Struct holds. With `field` (the request path of the Struct), a NaN or infinity is
    INVALID_ARGUMENT naming the path down to the key; without, it is ValueError."""
    if struct is None:
        return {}
    try:
        return {key: _get(item) for key, item in struct.fields.items()}
    except ValueError:
        if field is None:
            raise
        check_struct(struct, field)
        raise


_NON_FINITE = "is NaN or infinite; JSON numbers must be finite"
_NUL = "contains a NUL character (\\x00), which text fields cannot hold"
_NUL_KEY = "has a key that contains a NUL character (\\x00)"


def _path(node: tuple | None) -> str:
    """Materialise a path kept as nested (parent, segment) pairs (built lazily: most walks find nothing)."""
    parts: list[str] = []
    while node is not None:
        node, segment = node
        parts.append(segment)
    return "".join(reversed(parts))


def find_inexact_integer(value: Any) -> tuple[str, int] | None:
    """The first integer in a JSON-shaped value that a Struct cannot carry exactly (beyond ±2**53: Struct
    numbers are doubles), as (path, integer), or None. Paths as in `find_bad_value`. Iterative."""
    stack: list[tuple[tuple | None, Any]] = [(None, value)]
    while stack:
        node, item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend(((node, f".{key}"), child) for key, child in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend(((node, f"[{index}]"), child) for index, child in enumerate(item))
        elif isinstance(item, int) and not isinstance(item, bool) and not -_MAX_EXACT <= item <= _MAX_EXACT:
            return _path(node), item
    return None


def find_too_deep(value: Any, limit: int) -> str | None:
    """The path of the first object or array nested deeper than `limit` levels in a JSON-shaped value (the value
    itself is level 1), or None. Paths as in `find_bad_value`. Iterative; scalars cost nothing."""
    stack: list[tuple[tuple | None, Any, int]] = [(None, value, 1)] if isinstance(value, (Mapping, list, tuple)) else []
    while stack:
        node, item, depth = stack.pop()
        if depth > limit:
            return _path(node)
        pairs = ((f".{key}", child) for key, child in item.items()) if isinstance(item, Mapping) else (
            (f"[{index}]", child) for index, child in enumerate(item))
        stack.extend(((node, segment), child, depth + 1) for segment, child in pairs
                     if isinstance(child, (Mapping, list, tuple)))
    return None


def find_bad_value(message: struct_pb2.Struct | struct_pb2.Value | struct_pb2.ListValue, *,
                   nul: bool = True) -> tuple[str, str] | None:
    """The first problem in a Struct, Value or ListValue as (path relative to it, description), or None.

    Problems: a NaN or infinite number; with `nul`, a NUL character in a string or a key (PostgreSQL cannot
    store one). Paths are `.key` for object members and `[i]` for list items. Iterative: any depth is fine.
    """
    # Only containers wait on the stack: scalars are checked as they are met, so their upb wrappers die at
    # once. Keeping a wrapper per value alive costs upb superlinear time (a flat list of 1M numbers: 15 s
    # instead of 0.6 s).
    stack: list[tuple[tuple | None, Any]] = []
    pop, push = stack.pop, stack.append
    struct_type, list_type = struct_pb2.Struct, struct_pb2.ListValue

    def scalar_problem(value: struct_pb2.Value) -> str | None:
        kind = value.WhichOneof("kind")
        if kind == "string_value":
            return _NUL if nul and "\x00" in value.string_value else None
        if kind == "number_value":
            number = value.number_value
            return _NON_FINITE if number != number or number == _INF or number == -_INF else None
        if kind == "struct_value":
            push((node, value.struct_value))
        elif kind == "list_value":
            push((node, value.list_value))
        return None

    node: tuple | None = None
    if isinstance(message, (struct_type, list_type)):
        push((None, message))
    elif (problem := scalar_problem(message)) is not None:
        return "", problem
    while stack:
        parent, item = pop()
        if isinstance(item, struct_type):
            for key, value in item.fields.items():
                if nul and "\x00" in key:
                    return _path(parent), _NUL_KEY
                node = (parent, "." + key)
                if (problem := scalar_problem(value)) is not None:
                    return _path(node), problem
        else:
            for index, value in enumerate(item.values):
                node = (parent, f"[{index}]")
                if (problem := scalar_problem(value)) is not None:
                    return _path(node), problem
    return None


def check_struct(message: struct_pb2.Struct | struct_pb2.Value | struct_pb2.ListValue, field: str, *,
                 nul: bool = True) -> None:
    """INVALID_ARGUMENT naming `field` plus the path inside it when `find_bad_value` finds a problem."""
    found = find_bad_value(message, nul=nul)
    if found is not None:
        path, problem = found
        raise InvalidArgumentError.for_field(f"{field}{path}" if field else path.lstrip("."), problem)


def to_value(value: Any) -> struct_pb2.Value:
    message = struct_pb2.Value()
    _set(message, value)
    return message


def from_value(message: struct_pb2.Value) -> Any:
    return _get(message)


class StoredJson:
    """A JSON object kept as the text a database returned, parsed only when `value` is first read.

    Why: an object read only to be returned to a client (a canvas DSL on GetCanvas) needs no parse at all
    when `StructCache` has its Struct under this very text, whereas a parse plus the compact dump that keys
    a plain dict cost ~0.4 ms of CPU for an 18 KB RAGFlow DSL (~20 us for a tiny one). Equal to another
    StoredJson or a mapping with the same value.
    """

    __slots__ = ("text", "_value")

    def __init__(self, text: str):
        self.text = text
        self._value: dict[str, Any] | None = None

    @property
    def value(self) -> dict[str, Any]:
        if self._value is None:
            self._value = json.loads(self.text)
        return self._value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredJson):
            return self.text == other.text or self.value == other.value
        if isinstance(other, Mapping):
            return self.value == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment] - mutable value semantics, like the dict it stands for

    def __repr__(self) -> str:
        return f"StoredJson({self.text[:40]!r}{'...' if len(self.text) > 40 else ''})"


class StructCache:
    """Fills Structs from JSON objects, reusing the wire bytes of objects it converted recently.

    Why: filling a Struct costs about 2.5 us per JSON node (each node is a upb message built from
    Python), so a 40-node canvas DSL takes ~100 us, while its JSON text (the key) takes ~20 us and
    parsing cached wire bytes ~6 us. The same DSLs are read over and over (every run loads its canvas,
    editors poll theirs), so a content-keyed cache pays for itself after one hit. A `StoredJson` is keyed
    by its own text, so it costs neither a dump nor, on a hit, a parse. Objects whose JSON is over
    `max_key_chars` or that are not JSON-clean (NaN, tuples, bytes...) are filled directly.
    Thread-safe; the entries are immutable bytes, so a hit can never hand out a mutated value.
    """

    def __init__(self, entries: int = 256, max_key_chars: int = 64 << 10):
        self._wire: LRU[str, bytes] = LRU(entries)
        self._max_key_chars = max_key_chars
        self._lock = threading.Lock()

    def fill(self, target: struct_pb2.Struct, value: Mapping[str, Any] | StoredJson) -> None:
        """Make the empty Struct `target` (usually a message's field) hold `value`."""
        target.SetInParent()  # an empty object still sets the field
        if isinstance(value, StoredJson):
            key: str | None = value.text
        else:
            try:
                key = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            except (TypeError, ValueError):
                key = None
        if key is not None and len(key) > self._max_key_chars:
            key = None
        if key is not None:
            with self._lock:
                wire = self._wire.hit(key)
            if wire is not None:
                target.MergeFromString(wire)
                return
        _fill(target, value.value if isinstance(value, StoredJson) else value)
        if key is not None:
            with self._lock:
                self._wire.keep(key, target.SerializeToString())
