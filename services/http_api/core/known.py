"""What the facade may remember between requests: facts that never change, never permissions."""

from __future__ import annotations

from services.common.lru import LRU

SESSION_AGENTS: LRU[str, str] = LRU(65536)
"""session id -> its agent (canvas) id. A session never changes canvas, so a known pair skips the
GetSession round trip before a turn; access is still checked by the orchestrator on every run, and a
deleted session is NOT_FOUND there."""
