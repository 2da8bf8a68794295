"""Typed settings for the tools, parsed from the `tools:` section of the one config file.

Every key is optional; README.md in this package lists them with defaults. Keys are resolved once at
load: `api_key` in the file wins, then the environment variable named by `api_key_env` (each API has
a conventional default name such as TAVILY_API_KEY). A key written in the canvas DSL (RAGFlow stores
`api_key` in tool params) is used only when neither is set; see `WebApiSettings.key_for`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.common.errors import InvalidArgumentError
from services.common.logging import config_secret_values
from services.common.settings import Config

# Section name -> (default base URL, default key env var or "" when the API needs no key).
WEB_API_DEFAULTS: dict[str, tuple[str, str]] = {
    "tavily": ("https://api.tavily.com", "TAVILY_API_KEY"),
    "wikipedia": ("https://{language}.wikipedia.org/w/api.php", ""),
    "duckduckgo": ("https://html.duckduckgo.com", ""),
    "google": ("https://serpapi.com", "SERPAPI_API_KEY"),
    "bing": ("https://api.bing.microsoft.com", "BING_SEARCH_V7_SUBSCRIPTION_KEY"),
    "yahoo_finance": ("https://query1.finance.yahoo.com", ""),
    "ragflow": ("", "RAGFLOW_API_KEY"),
}

DEFAULT_USER_AGENT = "agent-canvas/0.1 (+https://github.com/agent-canvas/agent-canvas)"


def _bad(key: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError.for_field(f"tools.{key}", message)


def _mapping(raw: Any, key: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _bad(key, "must be a mapping")
    return raw


def _number(raw: Mapping[str, Any], name: str, default: float, key: str) -> float:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise _bad(f"{key}.{name}", "must be a non-negative number")
    return float(value)


def _int(raw: Mapping[str, Any], name: str, default: int, key: str, minimum: int = 0) -> int:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _bad(f"{key}.{name}", f"must be an integer >= {minimum}")
    return value


def _looks_like_key(value: Any) -> bool:
    """DSL keys are often placeholders ("YOUR_API_KEY (obtained from ...)"); real keys have no spaces."""
    return isinstance(value, str) and bool(value.strip()) and not any(ch.isspace() for ch in value.strip())


@dataclass(frozen=True)
class WebApiSettings:
    """Where one HTTP API lives and how to call it."""

    section: str
    base_url: str
    api_key: str = field(default="", repr=False)
    api_key_env: str = ""
    timeout_s: float = 15.0
    max_retries: int = 2
    backoff_s: float = 0.2

    @property
    def config_path(self) -> str:
        """Where this API's keys live under `tools:` (RAGFlow's server sits under retrieval)."""
        return "retrieval.ragflow" if self.section == "ragflow" else self.section

    def key_for(self, dsl_params: Mapping[str, Any] | None = None) -> str:
        """The key to send: configured key first, else a real-looking `api_key` from the DSL, else ""."""
        if self.api_key:
            return self.api_key
        candidate = (dsl_params or {}).get("api_key")
        return candidate.strip() if _looks_like_key(candidate) else ""

    @classmethod
    def parse(cls, section: str, raw: Mapping[str, Any], env: Mapping[str, str], http: "HttpDefaults") -> "WebApiSettings":
        default_url, default_env = WEB_API_DEFAULTS[section]
        key_env = str(raw.get("api_key_env", default_env) or "")
        api_key = str(raw.get("api_key") or "") or (env.get(key_env, "") if key_env else "")
        base_url = str(raw.get("base_url", default_url) or "").rstrip("/")
        if base_url and not base_url.startswith(("http://", "https://")):
            raise _bad(f"{section}.base_url", "must start with http:// or https://")
        return cls(
            section=section,
            base_url=base_url,
            api_key=api_key.strip(),
            api_key_env=key_env,
            timeout_s=_number(raw, "timeout_s", http.timeout_s, section),
            max_retries=_int(raw, "max_retries", http.max_retries, section),
            backoff_s=_number(raw, "backoff_s", http.backoff_s, section),
        )


@dataclass(frozen=True)
class HttpDefaults:
    """Defaults every web API inherits unless its own section overrides them."""

    timeout_s: float = 15.0
    max_retries: int = 2
    backoff_s: float = 0.2
    user_agent: str = DEFAULT_USER_AGENT


@dataclass(frozen=True)
class EmbeddedKbSettings:
    """The default retrieval backend: a SQLite FTS5 knowledge base under the data dir."""

    path: Path
    dataset: str = "default"
    chunk_tokens: int = 256
    chunk_overlap: int = 32
    # "all": dataset ids in the DSL that this KB does not hold are ignored and the whole KB is searched
    # (imported canvases name another system's datasets). "requested": unknown ids are an error.
    dataset_scope: str = "all"


@dataclass(frozen=True)
class RetrievalSettings:
    backend: str
    embedded: EmbeddedKbSettings
    ragflow: WebApiSettings
    max_context_chars: int = 12_000


@dataclass(frozen=True)
class DatabaseSettings:
    """One named database ExeSQL may use, referenced from the DSL by `database: <name>`."""

    name: str
    url: str = field(repr=False)
    allow_writes: bool = False


@dataclass(frozen=True)
class ExeSqlSettings:
    allow_writes: bool = False
    max_records: int = 1024
    timeout_s: float = 30.0
    databases: Mapping[str, DatabaseSettings] = field(default_factory=dict)
    # A canvas may name a SQLite file (`db_type: sqlite`) only inside these directories.
    sqlite_dirs: tuple[Path, ...] = ()


@dataclass(frozen=True)
class CodeExecSettings:
    address: str
    timeout_s: float = 60.0
    token: str = field(default="", repr=False)


@dataclass(frozen=True)
class McpServerSettings:
    """An MCP server: either a stdio command or a streamable-HTTP URL."""

    id: str
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str = ""
    timeout_s: float = 10.0
    connect_timeout_s: float = 10.0

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"


@dataclass(frozen=True)
class ToolsSettings:
    """Everything the tools need, parsed and validated once."""

    data_dir: Path
    http: HttpDefaults
    web: Mapping[str, WebApiSettings]
    retrieval: RetrievalSettings
    exesql: ExeSqlSettings
    code_exec: CodeExecSettings
    mcp_servers: Mapping[str, McpServerSettings]

    def web_api(self, section: str) -> WebApiSettings:
        return self.web[section]

    def secret_values(self) -> set[str]:
        """Every credential these settings resolved (keys from the file or the environment, database
        URLs, the sandbox token, MCP headers and environment): what error texts must never show."""
        resolved = {
            "web": [{"api_key": api.api_key} for api in self.web.values()],
            "databases": [db.url for db in self.exesql.databases.values()],  # their passwords
            "code_exec": {"token": self.code_exec.token},
            "mcp": [{"headers": dict(server.headers), "env": dict(server.env)} for server in self.mcp_servers.values()],
        }
        return config_secret_values(resolved, {})

    @classmethod
    def from_config(cls, config: Config, env: Mapping[str, str] | None = None) -> "ToolsSettings":
        return cls.from_mapping(
            config.section("tools"),
            data_dir=config.data_dir,
            sandbox_address=str((config.raw.get("addresses") or {}).get("sandbox") or "127.0.0.1:50054"),
            env=env,
        )

    @classmethod
    def from_mapping(
        cls,
        raw: Mapping[str, Any],
        *,
        data_dir: str | os.PathLike[str],
        sandbox_address: str = "127.0.0.1:50054",
        env: Mapping[str, str] | None = None,
    ) -> "ToolsSettings":
        env = os.environ if env is None else env
        raw = _mapping(raw, "")
        data_dir = Path(data_dir).expanduser()
        http_raw = _mapping(raw.get("http"), "http")
        http = HttpDefaults(
            timeout_s=_number(http_raw, "timeout_s", 15.0, "http"),
            max_retries=_int(http_raw, "max_retries", 2, "http"),
            backoff_s=_number(http_raw, "backoff_s", 0.2, "http"),
            user_agent=str(http_raw.get("user_agent") or DEFAULT_USER_AGENT),
        )
        retrieval_raw = _mapping(raw.get("retrieval"), "retrieval")
        web = {
            name: WebApiSettings.parse(
                name,
                _mapping(retrieval_raw.get("ragflow") if name == "ragflow" else raw.get(name), name),
                env,
                http,
            )
            for name in WEB_API_DEFAULTS
        }
        return cls(
            data_dir=data_dir,
            http=http,
            web=web,
            retrieval=_parse_retrieval(retrieval_raw, data_dir, web["ragflow"]),
            exesql=_parse_exesql(_mapping(raw.get("exesql"), "exesql"), env, data_dir),
            code_exec=_parse_code_exec(_mapping(raw.get("code_exec"), "code_exec"), sandbox_address, env),
            mcp_servers=_parse_mcp(_mapping(raw.get("mcp"), "mcp")),
        )


def _parse_retrieval(raw: Mapping[str, Any], data_dir: Path, ragflow: WebApiSettings) -> RetrievalSettings:
    backend = str(raw.get("backend", "embedded"))
    if backend not in ("embedded", "ragflow"):
        raise _bad("retrieval.backend", "must be 'embedded' or 'ragflow'")
    emb = _mapping(raw.get("embedded"), "retrieval.embedded")
    scope = str(emb.get("dataset_scope", "all"))
    if scope not in ("all", "requested"):
        raise _bad("retrieval.embedded.dataset_scope", "must be 'all' or 'requested'")
    chunk_tokens = _int(emb, "chunk_tokens", 256, "retrieval.embedded", minimum=16)
    overlap = _int(emb, "chunk_overlap", 32, "retrieval.embedded")
    if overlap >= chunk_tokens:
        raise _bad("retrieval.embedded.chunk_overlap", "must be smaller than chunk_tokens")
    path = Path(str(emb.get("path") or data_dir / "kb.sqlite")).expanduser()
    return RetrievalSettings(
        backend=backend,
        embedded=EmbeddedKbSettings(
            path=path,
            dataset=str(emb.get("dataset") or "default"),
            chunk_tokens=chunk_tokens,
            chunk_overlap=overlap,
            dataset_scope=scope,
        ),
        ragflow=ragflow,
        max_context_chars=_int(raw, "max_context_chars", 12_000, "retrieval", minimum=100),
    )


def _secret(raw: Mapping[str, Any], name: str, env: Mapping[str, str]) -> str:
    value = str(raw.get(name) or "")
    env_name = raw.get(f"{name}_env")
    if not value and env_name:
        value = env.get(str(env_name), "")
    return value


def _parse_exesql(raw: Mapping[str, Any], env: Mapping[str, str], data_dir: Path) -> ExeSqlSettings:
    databases: dict[str, DatabaseSettings] = {}
    for name, entry in _mapping(raw.get("databases"), "exesql.databases").items():
        if isinstance(entry, str):
            entry = {"url": entry}
        entry = _mapping(entry, f"exesql.databases.{name}")
        url = _secret(entry, "url", env)
        if not url:
            raise _bad(f"exesql.databases.{name}.url", "is required (or url_env naming an environment variable)")
        databases[str(name)] = DatabaseSettings(name=str(name), url=url, allow_writes=bool(entry.get("allow_writes", False)))
    dirs = raw.get("sqlite_dirs", [str(data_dir)])
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        raise _bad("exesql.sqlite_dirs", "must be a list of directories")
    return ExeSqlSettings(
        sqlite_dirs=tuple(Path(d).expanduser().resolve() for d in dirs),
        allow_writes=bool(raw.get("allow_writes", False)),
        max_records=_int(raw, "max_records", 1024, "exesql", minimum=1),
        timeout_s=_number(raw, "timeout_s", 30.0, "exesql"),
        databases=databases,
    )


def _parse_code_exec(raw: Mapping[str, Any], sandbox_address: str, env: Mapping[str, str]) -> CodeExecSettings:
    token = _secret(raw, "token", env) or env.get("AGENT_CANVAS_TOKEN", "")
    return CodeExecSettings(
        address=str(raw.get("address") or sandbox_address),
        timeout_s=_number(raw, "timeout_s", 60.0, "code_exec"),
        token=token,
    )


def _parse_mcp(raw: Mapping[str, Any]) -> dict[str, McpServerSettings]:
    timeout = _number(raw, "timeout_s", 10.0, "mcp")
    connect_timeout = _number(raw, "connect_timeout_s", 10.0, "mcp")
    servers: dict[str, McpServerSettings] = {}
    for server_id, entry in _mapping(raw.get("servers"), "mcp.servers").items():
        servers[str(server_id)] = parse_mcp_server(str(server_id), _mapping(entry, f"mcp.servers.{server_id}"), timeout, connect_timeout)
    return servers


def parse_mcp_server(
    server_id: str, entry: Mapping[str, Any], timeout_s: float = 10.0, connect_timeout_s: float = 10.0
) -> McpServerSettings:
    """Parse one MCP server entry ({url, headers} or {command, args, env, cwd})."""
    key = f"mcp.servers.{server_id}"
    url = str(entry.get("url") or "")
    command = str(entry.get("command") or "")
    if bool(url) == bool(command):
        raise _bad(key, "needs exactly one of 'url' (streamable HTTP) or 'command' (stdio)")
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
        raise _bad(f"{key}.args", "must be a list of strings")
    return McpServerSettings(
        id=server_id,
        url=url,
        headers={str(k): str(v) for k, v in _mapping(entry.get("headers"), f"{key}.headers").items()},
        command=command,
        args=tuple(str(a) for a in args),
        env={str(k): str(v) for k, v in _mapping(entry.get("env"), f"{key}.env").items()},
        cwd=str(entry.get("cwd") or ""),
        timeout_s=_number(entry, "timeout_s", timeout_s, key),
        connect_timeout_s=_number(entry, "connect_timeout_s", connect_timeout_s, key),
    )
