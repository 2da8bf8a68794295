"""Request guards of the store's gRPC adapter: a NUL character in any text field is INVALID_ARGUMENT.

Every RPC first passes `check_request` (installed on each method by `guard_every_rpc`): a NUL character in
any text field, map key or Struct string/key is INVALID_ARGUMENT naming the field, before any conversion or
database work, so PostgreSQL (which cannot store NUL in text) answers like SQLite and MariaDB.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator
from typing import Any

from google.protobuf import descriptor, struct_pb2

from agentcanvas.v1 import canvas_store_pb2 as pb
from services.common.errors import InvalidArgumentError
from services.common.structs import check_struct

_STRING = descriptor.FieldDescriptor.TYPE_STRING
_MESSAGE = descriptor.FieldDescriptor.TYPE_MESSAGE
_STRUCT_TYPES = (struct_pb2.Struct, struct_pb2.Value, struct_pb2.ListValue)
_NUL_TEXT = "contains a NUL character (\\x00), which text fields cannot hold"
_MAP_ENTRY: dict[Any, bool] = {}


def _is_map(field: descriptor.FieldDescriptor) -> bool:
    found = _MAP_ENTRY.get(field)
    if found is None:
        found = _MAP_ENTRY[field] = field.message_type.GetOptions().map_entry
    return found


def check_request(request: Any) -> None:
    """INVALID_ARGUMENT naming the first text field (string, repeated string, map key or value, Struct string or
    key, at any depth) that contains a NUL character, or the first non-finite number in a Struct.

    Iterative, so any nesting is fine. A request whose wire form has no zero byte cannot hold a NUL character,
    so those (GetCanvas, description updates and most other calls) cost one serialization and a byte search.
    NaN and infinities are then refused where the Structs are converted (`from_struct(..., field)`), which
    names the same paths.
    """
    if b"\x00" not in request.SerializeToString():
        return
    # A stack of iterators over (path prefix, message): only the messages along the current path are alive at
    # once (upb gets superlinearly slower with many live wrappers; see structs.find_bad_value).
    stack: list[Iterator[tuple[str, Any]]] = [iter((("", request),))]
    while stack:
        pair = next(stack[-1], None)
        if pair is None:
            stack.pop()
            continue
        prefix, message = pair
        if isinstance(message, _STRUCT_TYPES):
            check_struct(message, prefix[:-1])  # prefix ends with "."
            continue
        for field, value in message.ListFields():
            name = f"{prefix}{field.name}"
            if field.type == _STRING:
                if field.is_repeated:
                    for index, item in enumerate(value):
                        if "\x00" in item:
                            raise InvalidArgumentError.for_field(f"{name}[{index}]", _NUL_TEXT)
                elif "\x00" in value:
                    raise InvalidArgumentError.for_field(name, _NUL_TEXT)
            elif field.type == _MESSAGE:
                if not field.is_repeated:
                    stack.append(iter(((f"{name}.", value),)))
                elif _is_map(field):
                    stack.append(_map_messages(name, value))
                else:
                    stack.append(_list_messages(name, value))


def _list_messages(name: str, items: Any) -> Iterator[tuple[str, Any]]:
    for index, item in enumerate(items):
        yield f"{name}[{index}].", item


def _map_messages(name: str, entries: Any) -> Iterator[tuple[str, Any]]:
    """Checks a map's keys and text values; yields its message values."""
    for key in entries:
        if isinstance(key, str) and "\x00" in key:
            raise InvalidArgumentError.for_field(name, "has a key that " + _NUL_TEXT)
        item = entries[key]
        if isinstance(item, str):
            if "\x00" in item:
                raise InvalidArgumentError.for_field(f"{name}.{key}", _NUL_TEXT)
        elif hasattr(item, "ListFields"):
            yield f"{name}.{key}.", item


_CHECKS_ITSELF = frozenset({"CommitRunSteps"})
"""Methods that call check_request on parts of the request (each batch item fails on its own)."""


def guard_every_rpc(cls: type) -> type:
    """Run `check_request` before every RPC of the CanvasStore service (unary and streaming alike)."""
    for method in pb.DESCRIPTOR.services_by_name["CanvasStore"].methods:
        if method.name in _CHECKS_ITSELF:
            continue
        handler = getattr(cls, method.name)
        if inspect.isasyncgenfunction(handler):
            def wrap(handler=handler):
                @functools.wraps(handler)
                async def checked_stream(self, request, context):
                    check_request(request)
                    async for item in handler(self, request, context):
                        yield item
                return checked_stream
        else:
            def wrap(handler=handler):
                @functools.wraps(handler)
                async def checked(self, request, context):
                    check_request(request)
                    return await handler(self, request, context)
                return checked
        setattr(cls, method.name, wrap())
    return cls
