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
| STORE_DATABASE_URL   | store.database_url         |
| AGENT_CANVAS_TOKEN   | client token used by the CLI and by services calling peers |

Each service reads its own section (`config.section("gateway")`) into its own typed settings; this
module knows no service's keys beyond addresses, ports and the data directory.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from services.common.errors import InvalidArgumentError

SERVICES = ("canvas_store", "orchestrator", "llm_gateway", "sandbox")

DEFAULT_PORTS = {"canvas_store": 50051, "orchestrator": 50052, "llm_gateway": 50053, "sandbox": 50054}

# Config section that holds each service's own keys (short names, as users write them).
SECTION_BY_SERVICE = {"canvas_store": "store", "orchestrator": "orchestrator", "llm_gateway": "gateway", "sandbox": "sandbox"}

SERVER_KEYS = frozenset({"port", "shutdown_grace_s", "metrics_port", "event_loop"})
"""Keys of every service's section that the shared bootstrap reads (a service's own settings accept them)."""

_NAMED_ENV = {
    "AGENT_CANVAS_DATA_DIR": ("data_dir",),
    "CANVAS_STORE_ADDR": ("addresses", "canvas_store"),
    "ORCHESTRATOR_ADDR": ("addresses", "orchestrator"),
    "LLM_GATEWAY_ADDR": ("addresses", "llm_gateway"),
    "SANDBOX_ADDR": ("addresses", "sandbox"),
    "STORE_DATABASE_URL": ("store", "database_url"),
}
_GENERIC_PREFIX = "AGENT_CANVAS__"


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
                loaded = yaml.safe_load(resolved.read_text()) or {}
            except FileNotFoundError:
                raise InvalidArgumentError.for_field("config", f"config file {resolved} does not exist") from None
            except yaml.YAMLError as exc:
                raise InvalidArgumentError.for_field("config", f"{resolved} is not valid YAML: {exc}") from None
            if not isinstance(loaded, Mapping):
                raise InvalidArgumentError.for_field("config", f"{resolved} must hold a mapping at the top level")
            _deep_merge(merged, loaded)
        for name, key_path in _NAMED_ENV.items():
            if env.get(name):
                _set_path(merged, key_path, env[name])
        for name, value in env.items():
            if name.startswith(_GENERIC_PREFIX) and len(name) > len(_GENERIC_PREFIX):
                key_path = tuple(part.lower() for part in name[len(_GENERIC_PREFIX) :].split("__"))
                _set_path(merged, key_path, yaml.safe_load(value) if value else value)
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
            return int(env["PORT"])
        section = self.section(SECTION_BY_SERVICE[service])
        if "port" in section:
            return int(section["port"])
        address = self.address(service)
        return int(address.rsplit(":", 1)[1]) if ":" in address else DEFAULT_PORTS[service]
