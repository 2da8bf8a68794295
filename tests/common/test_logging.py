"""Logs never carry secrets: the JSON and text formats redact messages, extra fields and tracebacks."""

from __future__ import annotations

import io
import json
import logging

import pytest

from services.common import logging as service_logging

SECRET = "sk-" + "a1b2c3d4e5f6g7h8"


@pytest.fixture
def captured():
    stream = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    yield stream
    root.handlers[:], root.level = saved[0], saved[1]


def _fail_with_the_key() -> None:
    raise ValueError(f"provider refused Authorization: Bearer {SECRET}")  # the traceback ends with this message


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_messages_extras_and_tracebacks_are_redacted(captured, fmt):
    service_logging.configure("INFO", fmt, stream=captured)
    log = logging.getLogger("test.redaction")
    log.warning("calling with %s", SECRET, extra={"api_key": SECRET, "detail": {"token": SECRET, "n": 1}})
    try:
        _fail_with_the_key()
    except ValueError:
        log.exception("the call failed")
    text = captured.getvalue()
    assert SECRET not in text
    assert "the call failed" in text and "ValueError" in text and "_fail_with_the_key" in text  # still useful
    if fmt == "json":
        first, second = (json.loads(line) for line in text.splitlines() if line.startswith("{"))
        assert first["api_key"] == "***" and first["detail"] == {"token": "***", "n": 1}
        assert "Traceback" in second["exception"] and "***" in second["exception"]
