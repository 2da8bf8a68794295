"""What a caller asks of a run (RunCanvas as the core sees it), and the files it brings."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from services.common.errors import InvalidArgumentError

MAX_TEXT_FILE_BYTES = 2 * 1024 * 1024


@dataclass
class InputFileData:
    name: str = ""
    mime_type: str = ""
    content: bytes = b""
    url: str = ""


@dataclass
class RunRequest:
    canvas_id: str = ""
    revision_id: str = ""
    dsl: dict[str, Any] | None = None
    """An inline DSL (or see decode_dsl)."""
    query: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)
    files: list[InputFileData] = field(default_factory=list)
    session_id: str = ""
    user_id: str = ""
    request_id: str = ""
    resume_run_id: str = ""
    """Resume this paused run (a run without a session, or its session's paused run)."""
    webhook_payload: dict[str, Any] | None = None
    """The HTTP request that fired a webhook-mode Begin (Begin reads it from the run's spec)."""
    dsl_key: bytes = b""
    """A canonical encoding of the inline DSL (equal keys mean equal DSLs), or b"": lets a client that
    sends the same inline DSL with every run skip its decoding, load and validation after the first."""
    decode_dsl: Callable[[], dict[str, Any]] | None = None
    """The inline DSL on demand, in place of `dsl`, for an adapter that holds it encoded: called only
    when the DSL is loaded (its dsl_key is not cached), so a DSL seen before is not decoded either."""


def file_value(item: InputFileData) -> str:
    """sys.files entry: images as data URLs, text as text, remote files as their URL ."""
    if item.url and not item.content:
        return item.url
    if item.mime_type.startswith("image/"):
        return f"data:{item.mime_type};base64,{base64.b64encode(item.content).decode()}"
    if len(item.content) > MAX_TEXT_FILE_BYTES:
        raise InvalidArgumentError.for_field("files", f"{item.name or 'file'} is larger than {MAX_TEXT_FILE_BYTES} bytes")
    return item.content.decode("utf-8", "replace")
