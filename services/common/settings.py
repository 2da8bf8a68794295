"""Configuration: one YAML file plus environment overrides, shared by every service and the CLI.

Precedence, lowest first: built-in defaults, the YAML file (`--config FILE` or AGENT_CANVAS_CONFIG),
named environment variables (table below), then generic `AGENT_CANVAS__SECTION__KEY=value` variables
whose value is parsed as YAML (so `AGENT_CANVAS__SANDBOX__POOL_SIZE=4` sets an int).

| variable             | config key                 |
|----------------------|----------------------------|
| AGENT_CANVAS_DATA_DIR| data_dir                   |
| CANVAS_STORE_ADDR    | addresses.canvas_store     |
| ORCHESTRATOR_ADDR    | addresses.orchestrator     |
| LLM_GATEWAY_ADDR     | addresses.llm_gateway      |
| SANDBOX_ADDR         | addresses.sandbox          |
| HTTP_API_ADDR        | addresses.http_api         |
| STORE_DATABASE_URL   | store.database_url         |
| AGENT_CANVAS_TOKEN   | client token used by the CLI and by services calling peers |

Each service reads its own section (`config.section("gateway")`) into its own typed settings; this
module knows no service's keys beyond addresses, ports and the data directory.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from services.common.errors import InvalidArgumentError

SERVICES = ("canvas_store", "orchestrator", "llm_gateway", "sandbox", "http_api")

# http_api speaks HTTP (RAGFlow's API) on RAGFlow's own port; the others speak gRPC.
DEFAULT_PORTS = {"canvas_store": 50051, "orchestrator": 50052, "llm_gateway": 50053, "sandbox": 50054, "http_api": 9380}

# Config section that holds each service's own keys (short names, as users write them).
SECTION_BY_SERVICE = {"canvas_store": "store", "orchestrator": "orchestrator", "llm_gateway": "gateway", "sandbox": "sandbox",
                      "http_api": "http"}

SERVER_KEYS = frozenset({"port", "shutdown_grace_s", "metrics_port", "event_loop"})
"""Keys of every service's section that the shared bootstrap reads (a service's own settings accept them)."""

_NAMED_ENV = {
    "AGENT_CANVAS_DATA_DIR": ("data_dir",),
    "CANVAS_STORE_ADDR": ("addresses", "canvas_store"),
    "ORCHESTRATOR_ADDR": ("addresses", "orchestrator"),
    "LLM_GATEWAY_ADDR": ("addresses", "llm_gateway"),
    "SANDBOX_ADDR": ("addresses", "sandbox"),
    "HTTP_API_ADDR": ("addresses", "http_api"),
    "STORE_DATABASE_URL": ("store", "database_url"),
}
_GENERIC_PREFIX = "AGENT_CANVAS__"
MAX_CONFIG_BYTES = 4 << 20
"""A config file is a few KB; reading stops past this (PyYAML takes seconds per 10 MB, forever on /dev/zero)."""


def _default_data_dir() -> str:
    return str(Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "agent-canvas")


def _defaults() -> dict[str, Any]:
    return {
        "data_dir": _default_data_dir(),
        "addresses": {name: f"127.0.0.1:{port}" for name, port in DEFAULT_PORTS.items()},
        "log": {"level": "INFO", "format": "json"},
        "auth": {"tokens": []},
    }


def _set_path(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = target
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[path[-1]] = value


def _deep_merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _one_line(exc: yaml.YAMLError) -> str:
    """A YAML error on one line: what is wrong and where (PyYAML's own text spans several, with a caret)."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem and mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(problem or exc).split())


def _port(value: Any, where: str) -> int:
    """A TCP port (0 = any free one), or InvalidArgumentError naming `where`."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidArgumentError.for_field(where, f"must be a port number (0-65535), not {value!r}")
    try:
        port = int(value)
    except ValueError:
        raise InvalidArgumentError.for_field(where, f"must be a port number (0-65535), not {value!r}") from None
    if not 0 <= port <= 65535:
        raise InvalidArgumentError.for_field(where, f"must be a port number (0-65535), not {port}")
    return port


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
"""What `log.level` may be (any case), as the bootstrap passes it to logging."""


def _check(merged: Mapping[str, Any], env: Mapping[str, str]) -> None:
    """Refuse, naming the key, what this module and the shared bootstrap read: the data directory, the
    addresses, the log settings, and each service section's shared keys (SERVER_KEYS but event_loop, which
    event_loops.py checks). A service's own keys are its settings' business."""
    data_dir = merged.get("data_dir")
    if not isinstance(data_dir, str) or not data_dir.strip():
        raise InvalidArgumentError.for_field("data_dir", f"must be a directory path, not {data_dir!r}")
    addresses = merged.get("addresses")
    if not isinstance(addresses, Mapping):
        raise InvalidArgumentError.for_field("addresses", "must be a mapping of service name to host:port")
    for service in SERVICES:
        address = addresses.get(service)
        if not isinstance(address, str) or not address.strip():
            raise InvalidArgumentError.for_field(f"addresses.{service}", f"must be host:port, not {address!r}")
    log = merged.get("log")
    if log is not None:
        if not isinstance(log, Mapping):
            raise InvalidArgumentError.for_field("log", "must be a mapping")
        level = log.get("level", "INFO")
        if not isinstance(level, str) or level.upper() not in logging.getLevelNamesMapping():
            raise InvalidArgumentError.for_field("log.level", f"must be one of {', '.join(_LOG_LEVELS)}, not {level!r}")
        if log.get("format", "json") not in ("json", "text"):
            raise InvalidArgumentError.for_field("log.format", f"must be json or text, not {log.get('format')!r}")
    for section_name in SECTION_BY_SERVICE.values():
        section = merged.get(section_name)
        if section is None:
            continue
        if not isinstance(section, Mapping):
            raise InvalidArgumentError.for_field(section_name, "must be a mapping")
        for key in ("port", "metrics_port"):
            if section.get(key) is not None:
                _port(section[key], f"{section_name}.{key}")
        grace = section.get("shutdown_grace_s")
        if grace is not None:
            try:
                seconds = float(grace) if isinstance(grace, (int, float, str)) and not isinstance(grace, bool) else -1.0
            except ValueError:
                seconds = -1.0
            if not 0 <= seconds < float("inf"):
                raise InvalidArgumentError.for_field(f"{section_name}.shutdown_grace_s",
                                                     f"must be a number of seconds >= 0, not {grace!r}")
    for name in ("PORT", "METRICS_PORT"):
        if env.get(name):
            _port(env[name], name)


@dataclass(frozen=True)
class Config:
    """The merged configuration. Immutable; `with_overrides` returns a changed copy."""

    raw: Mapping[str, Any] = field(default_factory=_defaults)
    path: Path | None = None

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> "Config":
        """Load defaults, the YAML file (if any) and the environment."""
        env = os.environ if env is None else env
        merged = _defaults()
        file_path = path or env.get("AGENT_CANVAS_CONFIG") or None
        resolved: Path | None = None
        if file_path:
            resolved = Path(file_path).expanduser()
            try:
                with resolved.open("rb") as handle:  # bounded: /dev/zero or a stray huge file must not hang us
                    data = handle.read(MAX_CONFIG_BYTES + 1)
                if len(data) > MAX_CONFIG_BYTES:
                    raise InvalidArgumentError.for_field(
                        "config", f"{resolved} is larger than {MAX_CONFIG_BYTES >> 20} MiB; is it really the config file?")
                loaded = yaml.safe_load(data.decode("utf-8")) or {}
            except FileNotFoundError:
                raise InvalidArgumentError.for_field("config", f"config file {resolved} does not exist") from None
            except IsADirectoryError:
                raise InvalidArgumentError.for_field("config", f"{resolved} is a directory, not a file") from None
            except PermissionError:
                raise InvalidArgumentError.for_field("config", f"{resolved} cannot be read (permission denied)") from None
            except UnicodeDecodeError as exc:
                raise InvalidArgumentError.for_field("config", f"{resolved} is not UTF-8 text (byte {exc.start})") from None
            except OSError as exc:
                raise InvalidArgumentError.for_field("config", f"{resolved} cannot be read ({exc.strerror or exc})") from None
            except yaml.YAMLError as exc:
                raise InvalidArgumentError.for_field("config", f"{resolved} is not valid YAML: {_one_line(exc)}") from None
            if not isinstance(loaded, Mapping):
                raise InvalidArgumentError.for_field("config", f"{resolved} must hold a mapping at the top level")
            _deep_merge(merged, loaded)
        for name, key_path in _NAMED_ENV.items():
            if env.get(name):
                _set_path(merged, key_path, env[name])
        for name, value in env.items():
            if name.startswith(_GENERIC_PREFIX) and len(name) > len(_GENERIC_PREFIX):
                key_path = tuple(part.lower() for part in name[len(_GENERIC_PREFIX) :].split("__"))
                try:
                    parsed = yaml.safe_load(value) if value else value
                except yaml.YAMLError as exc:
                    raise InvalidArgumentError.for_field(name, f"is not a valid YAML value: {_one_line(exc)}") from None
                _set_path(merged, key_path, parsed)
        _check(merged, env)
        return cls(raw=merged, path=resolved)

    def with_overrides(self, overrides: Mapping[str, Any]) -> "Config":
        return Config(raw=_deep_merge(copy.deepcopy(dict(self.raw)), overrides), path=self.path)

    def section(self, name: str) -> dict[str, Any]:
        value = self.raw.get(name) or {}
        if not isinstance(value, Mapping):
            raise InvalidArgumentError.for_field(name, "must be a mapping")
        return copy.deepcopy(dict(value))

    @property
    def data_dir(self) -> Path:
        return Path(str(self.raw["data_dir"])).expanduser()

    def address(self, service: str) -> str:
        """host:port where `service` (one of SERVICES) is reached."""
        return str(self.raw["addresses"][service])

    def port(self, service: str, env: Mapping[str, str] | None = None) -> int:
        """Port a service listens on: PORT env (as in Kubernetes), the section's `port`, then the default."""
        env = os.environ if env is None else env
        if env.get("PORT"):
            return _port(env["PORT"], "PORT")
        name = SECTION_BY_SERVICE[service]
        section = self.section(name)
        if section.get("port") is not None:
            return _port(section["port"], f"{name}.port")
        address = self.address(service)
        return int(address.rsplit(":", 1)[1]) if ":" in address else DEFAULT_PORTS[service]
