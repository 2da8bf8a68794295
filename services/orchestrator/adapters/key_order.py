"""The key order of a JSON object, carried next to its Struct.

A run's spec travels to the store and back as a google.protobuf.Struct, whose maps come back in another
order in every process; the DSL inside it must not (Categorize's categories, Switch's conditions, form
fields and structured-output properties are read in DSL order). Sending the DSL a second time as text
would double the spec; its keys alone, in document order, are enough to restore the order.

`key_order(value)` lists every object's keys, object by object in a fixed walk (an object's keys, then
its children in that order; list items in order). `with_key_order(value, keys)` rebuilds `value` with
the listed order, or returns it unchanged when the list does not fit (a spec written without one, or
changed by hand): order is then lost, never the data.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def key_order(value: Any) -> list[str]:
    keys: list[str] = []

    def walk(item: Any) -> None:
        if isinstance(item, dict):
            keys.extend(item)
            for child in item.values():
                walk(child)
        elif isinstance(item, list):
            for child in item:
                walk(child)

    walk(value)
    return keys


class _Mismatch(Exception):
    pass


def with_key_order(value: Any, keys: list[Any]) -> Any:
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        return value
    stream: Iterator[str] = iter(keys)

    def rebuild(item: Any) -> Any:
        if isinstance(item, dict):
            order = [next(stream, None) for _ in range(len(item))]
            if set(order) != set(item) or len(set(order)) != len(order):
                raise _Mismatch
            return {key: rebuild(item[key]) for key in order}
        if isinstance(item, list):
            return [rebuild(child) for child in item]
        return item

    try:
        rebuilt = rebuild(value)
    except _Mismatch:
        return value
    return rebuilt if next(stream, None) is None else value
