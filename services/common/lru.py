"""A small least-recently-used cache: an OrderedDict that drops its oldest entry past `size`."""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(OrderedDict, Generic[K, V]):
    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def hit(self, key: K) -> V | None:
        """The value under `key` (now the most recently used), or None."""
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value

    def keep(self, key: K, value: V) -> V:
        """Store `value` under `key` as the most recently used, dropping the least recently used entry past
        `size`; returns it."""
        self[key] = value
        self.move_to_end(key)  # a key stored again is new again
        if len(self) > self.size:
            self.popitem(last=False)
        return value
