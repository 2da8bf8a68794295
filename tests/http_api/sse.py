"""A strict reader of RAGFlow's SSE framing, for the tests: raw bytes in, (id, payload) events out."""

from __future__ import annotations

import json
from typing import Any

import httpx


def parse(raw: bytes, *, space: bool = False) -> tuple[list[tuple[int | None, Any]], bool]:
    """Every event block of `raw` as (id or None, decoded JSON); and whether it ended with [DONE] (then
    nothing may follow). Fails on anything RAGFlow's framing does not allow."""
    prefix = b"data: " if space else b"data:"
    done = prefix + b"[DONE]\n\n"
    ended = raw.endswith(done)
    body = raw[: -len(done)] if ended else raw
    events: list[tuple[int | None, Any]] = []
    if not body:
        return events, ended
    assert body.endswith(b"\n\n"), body[-200:]
    for block in body[:-2].split(b"\n\n"):
        lines = block.split(b"\n")
        event_id = None
        if lines[0].startswith(b"id:"):
            event_id = int(lines.pop(0)[3:])
        assert len(lines) == 1 and lines[0].startswith(prefix), block  # one data line; no event:, no comments
        text = lines[0][len(prefix):].decode("utf-8")
        events.append((event_id, json.loads(text)))
    return events, ended


def read_until(response: httpx.Response, stop) -> bytes:
    """Raw bytes of a streamed response up to and including the first whole event for which
    `stop(id, payload)` is true (then the caller drops the connection)."""
    buffer = b""
    for chunk in response.iter_raw():
        buffer += chunk
        complete = buffer[: buffer.rfind(b"\n\n") + 2] if b"\n\n" in buffer else b""
        if complete:
            events, _ = parse(complete)
            for index, (event_id, payload) in enumerate(events):
                if stop(event_id, payload):
                    return b"".join(_reframe(events[: index + 1]))
    return buffer


def _reframe(events: list[tuple[int | None, Any]]) -> list[bytes]:
    out = []
    for event_id, payload in events:
        head = b"" if event_id is None else b"id:%d\n" % event_id
        out.append(head + b"data:" + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n")
    return out
