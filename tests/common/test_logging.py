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


def test_configured_secrets_are_found_wherever_the_config_keeps_or_names_them():
    raw = {
        "tools": {"tavily": {"api_key_env": "ACME_SEARCH"}, "bing": {"api_key": "bing-configured-1"},
                  "exesql": {"databases": {"shop": {"url": "postgresql://u:db-password-1@h/db"}}},
                  "mcp": {"servers": {"a": {"url": "http://x", "headers": {"Authorization": "Bearer mcp-bearer-1",
                                                                          "X-Tenant": "tenant-header-1",
                                                                          "Content-Type": "application/json"},
                                            "env": {"GITHUB_TOKEN": "gh-token-value-1", "PATH": "/usr/local/bin"}}}}},
        "gateway": {"models": {"m": {"model": "openai/x", "api_key": "model-key-value-1", "max_tokens": 123456789}}},
        "auth": {"tokens": [{"token": "auth-token-value-1"}, {"token_file": "/run/secrets/t"}]},
    }
    env = {"ACME_SEARCH": "search-key-value-1", "OPENAI_API_KEY": "env-openai-key-1", "HOME": "/home/someone",
           "DB_PASSWORD_FILE": "/run/secrets/db"}
    found = service_logging.config_secret_values(raw, env)
    assert {"search-key-value-1", "bing-configured-1", "db-password-1", "Bearer mcp-bearer-1", "mcp-bearer-1",
            "tenant-header-1", "gh-token-value-1", "model-key-value-1", "auth-token-value-1", "env-openai-key-1"} <= found
    assert not {"ACME_SEARCH", "/usr/local/bin", "/home/someone", "/run/secrets/t", "/run/secrets/db", "123456789",
                "application/json"} & found


def test_registered_secrets_are_masked_in_text_and_logs_but_short_values_are_not(captured):
    service_logging.register_secrets(["plain-looking-credential-42", "abc"])
    assert service_logging.redact_text("refused plain-looking-credential-42 (abc)") == "refused *** (abc)"
    service_logging.configure("INFO", "json", stream=captured, service="orchestrator")
    logging.getLogger("test.registered").warning("upstream said %s", "plain-looking-credential-42")
    line = json.loads(captured.getvalue().splitlines()[-1])
    assert line["message"] == "upstream said ***" and line["service"] == "orchestrator"


def test_the_text_format_names_the_service_too(captured):
    service_logging.configure("INFO", "text", stream=captured, service="canvas_store")
    logging.getLogger("test.text").info("hello")
    assert " INFO canvas_store test.text: hello" in captured.getvalue()
