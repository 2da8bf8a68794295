"""Ids, etags and clocks."""

from __future__ import annotations

import secrets
import time
import uuid


def new_id() -> str:
    """32-char lowercase hex, as RAGFlow uses."""
    return uuid.uuid4().hex


def new_etag() -> str:
    return secrets.token_hex(8)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def is_id(value: str) -> bool:
    return len(value) == 32 and all(c in "0123456789abcdef" for c in value)
