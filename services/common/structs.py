"""Conversions between JSON-shaped Python values and google.protobuf.Struct / Value.

Struct stores every number as a double, so an int sent as 5 comes back as 5.0. `from_struct` and
`from_value` turn integral doubles back into ints (within 2**53), which keeps DSL round trips exact
for every value JSON documents realistically hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format, struct_pb2

_MAX_EXACT = 2**53


def _restore_ints(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) <= _MAX_EXACT:
        return int(value)
    if isinstance(value, dict):
        return {k: _restore_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore_ints(v) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    """Coerce tuples, sets and non-string keys so Struct accepts the value."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return str(value)


def to_struct(value: Mapping[str, Any] | None) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    if value:
        struct.update(_jsonable(value))
    return struct


def from_struct(struct: struct_pb2.Struct | None) -> dict[str, Any]:
    if struct is None:
        return {}
    return _restore_ints(json_format.MessageToDict(struct))


def to_value(value: Any) -> struct_pb2.Value:
    message = struct_pb2.Value()
    json_format.ParseDict(_jsonable(value), message)
    return message


def from_value(message: struct_pb2.Value) -> Any:
    return _restore_ints(json_format.MessageToDict(message))
