"""Structured JSON logs with request and trace ids, and redaction of anything that looks secret.

Redaction (`redact`) masks values that look like keys (`sk-...`, `tvly-...`, `Bearer ...`) and every secret
value this process was told about (`register_secrets`, `register_config_secrets`: API keys, tokens, MCP
headers, database passwords from the config and the environment). Logs use it, and so does every place
where upstream text (an HTTP error body, an MCP error, a provider's message) becomes an error, an event,
a store row or a message to a model: AgentCanvasError redacts its own message and violations.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from services.common import context

_SECRET_KEY = re.compile(r"(api[_-]?key|token|secret|password|authorization|credential)", re.IGNORECASE)
_SECRET_VALUE = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|tvly-[A-Za-z0-9_\-]{6,}|Bearer\s+[A-Za-z0-9._\-]+)")
_RESERVED = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}

_PLAIN_HEADERS = frozenset({"accept", "accept-language", "content-type", "user-agent"})
"""Headers that carry no credential: their values ("application/json") are not secrets to mask."""
_NOT_A_VALUE = (".file", "_file", "_path", "_dir")
"""Names of settings or variables that say where a secret is, not what it is (`token_file`, `DB_PASSWORD_FILE`)."""

MIN_SECRET_LENGTH = 8
"""Shorter configured values are not masked: masking "false" or "1" would garble every text, and a real
key or password is longer."""

_SECRETS: frozenset[str] = frozenset()
_SECRETS_PATTERN: re.Pattern[str] | None = None
_SECRETS_LOCK = threading.Lock()


def register_secrets(values: Iterable[str]) -> None:
    """Mask these exact values from now on, in this process (in addition to the patterns)."""
    global _SECRETS, _SECRETS_PATTERN
    fresh = {value.strip() for value in values if isinstance(value, str)}
    fresh = {value for value in fresh if len(value) >= MIN_SECRET_LENGTH}
    with _SECRETS_LOCK:
        if fresh <= _SECRETS:
            return
        merged = _SECRETS | fresh
        # Longest first, so a secret that contains another is masked whole.
        _SECRETS_PATTERN = re.compile("|".join(re.escape(v) for v in sorted(merged, key=len, reverse=True)))
        _SECRETS = frozenset(merged)


def config_secret_values(raw: Mapping[str, Any], env: Mapping[str, str]) -> set[str]:
    """Every secret value a configuration holds or points at.

    - a value under a key naming a secret (`api_key`, `token`, `password`, `authorization`, ...);
    - the variable a `*_env` key names (`api_key_env: TAVILY_API_KEY`, `token_env`, `url_env`);
    - every value of a `headers` mapping (MCP servers send credentials there) but Accept, Content-Type and
      the like, and the credential after a scheme such as `Bearer`;
    - the password of any URL (`postgresql://user:password@host/db`);
    - every environment variable whose name names a secret (`TAVILY_API_KEY`, `OPENAI_API_KEY`,
      `AGENT_CANVAS_TOKEN`): tools and litellm read the conventional ones without any config key.
    """
    found: set[str] = set()

    def add(value: Any) -> None:
        if isinstance(value, str) and value:
            found.add(value)
            scheme, _, credential = value.strip().partition(" ")
            if credential and scheme.isalpha():
                found.add(credential.strip())
            url_password(value)

    def url_password(value: str) -> None:
        if "://" in value and "@" in value:
            try:
                password = urlsplit(value).password
            except ValueError:
                password = None
            if password:
                found.add(password)

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for name, value in node.items():
                name = str(name)
                if name.endswith("_env") and isinstance(value, str):
                    add(env.get(value, ""))
                elif name == "headers" and isinstance(value, Mapping):
                    for header, header_value in value.items():
                        if str(header).lower() not in _PLAIN_HEADERS:
                            add(str(header_value))
                elif _SECRET_KEY.search(name) and isinstance(value, str) and not name.lower().endswith(_NOT_A_VALUE):
                    add(value)
                else:
                    walk(value)
        elif isinstance(node, (list, tuple)):
            for item in node:
                walk(item)
        elif isinstance(node, str):
            url_password(node)

    walk(raw)
    for name, value in env.items():
        if _SECRET_KEY.search(name) and not name.lower().endswith(_NOT_A_VALUE):
            add(value)
    return found


def register_config_secrets(raw: Mapping[str, Any], env: Mapping[str, str]) -> None:
    """register_secrets(config_secret_values(...)): what every service does when it starts."""
    register_secrets(config_secret_values(raw, env))


def redact_text(text: str) -> str:
    """`text` with registered secrets and secret-looking values masked as `***`."""
    pattern = _SECRETS_PATTERN
    if pattern is not None:
        text = pattern.sub("***", text)
    return _SECRET_VALUE.sub("***", text)


def redact(value: Any) -> Any:
    """Mask secret-looking keys and values in nested data before it is logged or exported."""
    if isinstance(value, dict):
        return {k: ("***" if isinstance(k, str) and _SECRET_KEY.search(k) else redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


class JsonFormatter(logging.Formatter):
    """One JSON object per line: timestamp, severity, service, logger, message, ids and `extra` fields.

    `service` names the process's service (canvas_store, orchestrator, ...), so the interleaved lines of
    the processes `agent-canvas up` starts can be told apart; it is left out when empty."""

    def __init__(self, service: str = ""):
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "severity": record.levelname,
        }
        if self.service:
            payload["service"] = self.service
        payload["logger"] = record.name
        payload["message"] = redact(record.getMessage())
        ids = context.current_ids()
        payload.update({k: v for k, v in ids.items() if v})
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                payload[key] = redact(value)
        if record.exc_info:  # a traceback ends with the exception's message, which may quote a key or a header
            payload["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(payload, default=str)


class RedactingTextFormatter(logging.Formatter):
    """The plain-text format (`log.format: text`), redacted like the JSON one: message and traceback."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def text_format(service: str = "") -> str:
    """The `log.format: text` line: time, level, [service,] logger and message."""
    return f"%(asctime)s %(levelname)s {service.replace('%', '%%')} %(name)s: %(message)s" if service \
        else "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(level: str = "INFO", fmt: str = "json", stream=None, *, service: str = "") -> None:
    """Install the root handler once per process; `service` names the process's service on every line."""
    handler = logging.StreamHandler(stream or sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter(service))
    else:
        handler.setFormatter(RedactingTextFormatter(text_format(service)))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # litellm and httpx are chatty at INFO and may echo request bodies.
    for noisy in ("LiteLLM", "litellm", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
