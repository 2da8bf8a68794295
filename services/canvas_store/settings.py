"""Typed settings of the canvas store, parsed from the `store` section of the config file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.common.errors import InvalidArgumentError
from services.common.settings import Config

DEFAULT_MAX_DSL_BYTES = 8 << 20


@dataclass(frozen=True)
class StoreSettings:
    database_url: str
    """SQLAlchemy URL. Default sqlite:///<data_dir>/store.db; postgresql+psycopg://..., mysql+pymysql://..."""
    keep_draft_revisions: int = 20
    """Unpublished revisions kept per canvas besides released, head and session-pinned ones."""
    session_history_max: int = 50
    """Messages kept in a session's history; older ones are dropped on append."""
    session_history_max_bytes: int = 4 << 20
    """Canonical JSON bytes of a session's history; older messages are dropped past it (never the turn being
    appended, which session_turn_max_bytes bounds)."""
    session_turn_max_bytes: int = 1 << 20
    """Canonical JSON bytes of one AppendSessionTurn's messages (each message, and all of them together)."""
    max_dsl_bytes: int = DEFAULT_MAX_DSL_BYTES
    """Largest accepted DSL (canonical JSON bytes)."""
    page_token_secret: str = ""
    """HMAC key for page tokens; empty = a random key generated once and kept in the database."""
    page_token_ttl_s: int = 3 * 24 * 3600
    db_pool_size: int = 8
    """Threads doing blocking DB work, and connections in the pool."""
    watch_poll_interval_ms: int = 200
    """How often WatchRunEvents polls the DB for events written by other store processes."""
    idempotency_ttl_s: int = 24 * 3600
    """request_id keys are kept at least this long (AIP-155 asks for 60 minutes or more)."""
    default_lease_ttl_ms: int = 15_000
    max_lease_ttl_ms: int = 600_000
    deleted_retention_s: int = 30 * 24 * 3600
    """How long a soft-deleted canvas can be undeleted before the purge removes it (expire_time)."""
    purge_interval_s: int = 3600
    """How often the background purge hard-deletes expired canvases; 0 turns the background purge off."""
    sqlite_inline: bool = True
    """On SQLite, run statements on the gRPC event loop's thread instead of the DB pool (see app.StoreApp)."""
    postgres_loop: bool = True
    """On PostgreSQL, run GetCanvas and description/avatar updates on the event loop with psycopg's asyncio
    API (adapters/sql/loop_io.py) instead of the DB pool."""
    auto_migrate: bool = True
    """Apply Alembic migrations at start-up."""
    seed_templates: bool = True
    """Load the bundled RAGFlow templates at start-up (idempotent)."""

    @classmethod
    def from_config(cls, config: Config) -> "StoreSettings":
        section: dict[str, Any] = config.section("store")
        url = str(section.get("database_url") or f"sqlite:///{config.data_dir / 'store.db'}")

        def positive(key: str, default: int, minimum: int = 1) -> int:
            value = section.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise InvalidArgumentError.for_field(f"store.{key}", f"must be an integer >= {minimum}")
            return value

        return cls(
            database_url=url,
            keep_draft_revisions=positive("keep_draft_revisions", 20),
            session_history_max=positive("session_history_max", 50),
            session_history_max_bytes=positive("session_history_max_bytes", 4 << 20, minimum=1024),
            session_turn_max_bytes=positive("session_turn_max_bytes", 1 << 20, minimum=1024),
            max_dsl_bytes=positive("max_dsl_bytes", DEFAULT_MAX_DSL_BYTES),
            page_token_secret=str(section.get("page_token_secret") or ""),
            page_token_ttl_s=positive("page_token_ttl_s", 3 * 24 * 3600),
            db_pool_size=positive("db_pool_size", 8),
            watch_poll_interval_ms=positive("watch_poll_interval_ms", 200, minimum=10),
            idempotency_ttl_s=positive("idempotency_ttl_s", 24 * 3600, minimum=3600),
            default_lease_ttl_ms=positive("default_lease_ttl_ms", 15_000, minimum=100),
            max_lease_ttl_ms=positive("max_lease_ttl_ms", 600_000, minimum=100),
            deleted_retention_s=positive("deleted_retention_s", 30 * 24 * 3600, minimum=0),
            purge_interval_s=positive("purge_interval_s", 3600, minimum=0),
            sqlite_inline=bool(section.get("sqlite_inline", True)),
            postgres_loop=bool(section.get("postgres_loop", True)),
            auto_migrate=bool(section.get("auto_migrate", True)),
            seed_templates=bool(section.get("seed_templates", True)),
        )
