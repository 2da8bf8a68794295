"""Wiring: settings -> database -> repositories -> core services -> gRPC definition.

Also the entry points the CLI calls without a server: `migrate(config)`, `seed_templates(config)` and
`bundled_templates()`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any, TypeVar

from agentcanvas.v1 import canvas_store_pb2_grpc

from services.canvas_store.adapters.sql import engine as sql_engine
from services.canvas_store.adapters.sql import loop_io
from services.canvas_store.adapters.sql.canvas_repo import CanvasRepository
from services.canvas_store.adapters.sql.run_repo import RunRepository
from services.canvas_store.adapters.sql.session_repo import SessionRepository
from services.canvas_store.adapters.sql.tenant_repo import TenantRepository
from services.canvas_store.core import validation
from services.canvas_store.core.canvases import CanvasService
from services.canvas_store.core.dsl import template_from_file
from services.canvas_store.core.ids import now_ms
from services.canvas_store.core.page_tokens import PageTokenCodec
from services.canvas_store.core.policy import Caller
from services.canvas_store.core.runs import RunNotifier, RunService
from services.canvas_store.core.sessions import SessionService
from services.canvas_store.core.types import Template
from services.canvas_store.settings import StoreSettings
from services.common.bootstrap import ServiceDefinition
from services.common.context import Identity, current_identity
from services.common.errors import UnauthenticatedError, UnavailableError
from services.common.settings import Config

logger = logging.getLogger(__name__)

T = TypeVar("T")
PROTO_SERVICE = "agentcanvas.v1.CanvasStore"


def bundled_templates() -> list[Template]:
    """The RAGFlow templates shipped in services/canvas_store/templates/ (package data)."""
    folder = resources.files("services.canvas_store") / "templates"
    found = []
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if entry.name.endswith(".json"):
            found.append(template_from_file(entry.name[: -len(".json")], json.loads(entry.read_text("utf-8"))))
    return found


def migrate(config: Config, revision: str = "head") -> str | None:
    """Apply the store's migrations to the configured database; returns the resulting revision."""
    settings = StoreSettings.from_config(config)
    db = sql_engine.open_database(settings.database_url, pool_size=1)
    try:
        sql_engine.upgrade(db.engine, revision)
        return sql_engine.current_revision(db.engine)
    finally:
        db.dispose()


def seed_templates(config: Config) -> int:
    """Load the bundled templates into the configured database (migrating first); idempotent."""
    settings = StoreSettings.from_config(config)
    db = sql_engine.open_database(settings.database_url, pool_size=1)
    try:
        return prepare_database(db, TenantRepository(db), migrate=True, seed=True)
    finally:
        db.dispose()


def prepare_database(db: sql_engine.Database, tenants: TenantRepository, *, migrate: bool, seed: bool) -> int:
    """Start-up's one-time writes, under the database's migration lock so that store processes starting together
    take turns: the migrations, then the bundled templates. Returns how many templates were written."""
    if not (migrate or seed):
        return 0
    with sql_engine.migration_lock(db.engine) as connection:
        if migrate:
            sql_engine.apply_migrations(connection)
        return tenants.seed_templates(bundled_templates()) if seed else 0


class StoreApp:
    """The running store: one database, the core services and the bounded pool for blocking DB work."""

    def __init__(self, settings: StoreSettings):
        self.settings = settings
        self.db = sql_engine.open_database(settings.database_url, pool_size=settings.db_pool_size,
                                           loop_statements=settings.postgres_loop)
        self.pool = ThreadPoolExecutor(max_workers=settings.db_pool_size, thread_name_prefix="canvas-store-db")
        # SQLite statements take tens of microseconds and hold the GIL for most of it, so the hop to a pool
        # thread (and the GIL contention between pool threads) costs more than the statement: run them on
        # the event loop's thread instead. The price: a write waiting for another process's SQLite lock
        # blocks this process's loop for up to busy_timeout.
        self.inline = settings.sqlite_inline and self.db.backend == "sqlite"
        self.notifier = RunNotifier()
        self.closing = asyncio.Event()
        self._known_users: set[tuple[str, str]] = set()
        self._known_lock = threading.Lock()
        self._closed = False
        self.tenants = TenantRepository(self.db)
        self.canvas_repo = CanvasRepository(self.db, settings.keep_draft_revisions)
        self.session_repo = SessionRepository(self.db, settings.session_history_max, settings.session_history_max_bytes)
        self.run_repo = RunRepository(self.db)
        self.canvases: CanvasService
        self.sessions: SessionService
        self.runs: RunService

    def open(self) -> None:
        """Blocking start-up: migrate, seed templates, load the page-token secret, build the services."""
        written = prepare_database(self.db, self.tenants, migrate=self.settings.auto_migrate,
                                   seed=self.settings.seed_templates)
        if written:
            logger.info("seeded %d canvas templates", written)
        self._check_packet_size()
        self.canvas_repo.prune_idempotency_keys(now_ms() - self.settings.idempotency_ttl_s * 1000)
        secret = (self.settings.page_token_secret.encode() if self.settings.page_token_secret
                  else self.tenants.page_token_secret())
        tokens = PageTokenCodec(secret, self.settings.page_token_ttl_s)
        self.canvases = CanvasService(self.canvas_repo, self.tenants, tokens, max_dsl_bytes=self.settings.max_dsl_bytes,
                                      deleted_retention_s=self.settings.deleted_retention_s)
        self.sessions = SessionService(self.canvas_repo, self.session_repo, self.tenants, tokens,
                                       max_state_bytes=self.settings.max_dsl_bytes,
                                       max_turn_bytes=self.settings.session_turn_max_bytes)
        self.runs = RunService(self.run_repo, self.canvas_repo, self.session_repo, tokens,
                               default_ttl_ms=self.settings.default_lease_ttl_ms,
                               max_ttl_ms=self.settings.max_lease_ttl_ms,
                               max_spec_bytes=self.settings.max_dsl_bytes + (1 << 20))

    def _check_packet_size(self) -> None:
        """Warn when MariaDB/MySQL's max_allowed_packet is too small for the largest canvas write the limits allow.

        A canvas row carries the DSL (up to max_dsl_bytes) and the avatar (4 MiB) and description, and the driver
        escapes quotes and backslashes inside the JSON text, so a write can take twice their size."""
        packet = sql_engine.max_packet_bytes(self.db.engine)
        needed = 2 * (self.settings.max_dsl_bytes + validation.MAX_AVATAR + validation.MAX_DESCRIPTION) + (1 << 20)
        if packet is not None and packet < needed:
            logger.warning("MariaDB/MySQL max_allowed_packet is %d bytes; canvases near the size limits need up to "
                           "%d (set max_allowed_packet=%dM on the server), larger writes fail with RESOURCE_EXHAUSTED",
                           packet, needed, -(-needed // (1 << 20)))

    async def purge_periodically(self) -> None:
        """Every `purge_interval_s`, hard-delete the soft-deleted canvases whose expire_time has passed.

        Each store replica runs it; the row locks (and SQLite's writer lock) make concurrent purges harmless.
        """
        interval = self.settings.purge_interval_s
        while not self.closing.is_set():
            try:
                await asyncio.wait_for(self.closing.wait(), timeout=interval)
                return
            except TimeoutError:
                pass
            try:
                # On the pool even on SQLite: a purge is many batches, and inline it would stall every RPC
                # for all of them (the writer lock interleaves it with inline writes batch by batch).
                purged = await self.blocking(self.canvases.purge_expired, pooled=True)
                if purged:
                    logger.info("purged %d expired soft-deleted canvases", purged)
            except UnavailableError:
                return
            except Exception:  # keep purging later; one failed round must not stop the loop
                logger.exception("purging expired canvases failed")

    def close(self) -> None:
        self._closed = True
        self.pool.shutdown(wait=True)
        self.db.dispose()

    def _is_known(self, identity: Identity) -> bool:
        """Whether `caller` needs no database write for this identity (it was recorded before)."""
        return (identity.tenant_id, identity.user_id) in self._known_users

    def caller(self, identity: Identity) -> Caller:
        """Build the policy's Caller; records the tenant/user on first sight (first user = owner)."""
        key = (identity.tenant_id, identity.user_id)
        if key not in self._known_users:
            validation.caller_ids(*key)
            self.tenants.ensure_tenant(*key)
            with self._known_lock:
                self._known_users.add(key)
        return Caller(identity.tenant_id, identity.user_id, is_service=identity.is_service,
                      role_lookup=lambda: self.tenants.role(*key))

    async def call(self, function: Callable[..., T], *args: Any, loop_first: bool = False, **kwargs: Any) -> T:
        """Run `function(caller, *args)` on the DB pool for the identity of the current RPC.

        `loop_first`: where the database has loop connections (PostgreSQL), first run it on the event loop
        (`loop_io.run`); if it reaches database I/O that has no asyncio form, that I/O raises NeedsPool
        before it starts and the call runs again on the pool. Only for use cases whose single write is their
        last I/O (GetCanvas, UpdateCanvas), so that nothing can have been written when it starts over.
        """
        identity = current_identity()
        if identity is None:
            raise UnauthenticatedError("no identity on this request")
        if loop_first and self.db.loop_connections is not None and self._is_known(identity):
            try:
                return await loop_io.run(function, self.caller(identity), *args, **kwargs)
            except loop_io.NeedsPool:
                pass
        return await self.blocking(lambda: function(self.caller(identity), *args, **kwargs))

    async def blocking(self, function: Callable[..., T], *args: Any, pooled: bool = False) -> T:
        """Run a blocking function on the DB pool (inline on SQLite, see `inline`, unless `pooled`) without a
        caller. `pooled` is for long background work that must not hold the event loop."""
        if self.inline and not pooled:
            if self._closed:
                raise UnavailableError("the store is shutting down; retry", reason="SHUTTING_DOWN")
            return function(*args)
        try:
            future = asyncio.get_running_loop().run_in_executor(self.pool, lambda: function(*args))
        except RuntimeError:  # the pool is shut down: we are draining
            raise UnavailableError("the store is shutting down; retry", reason="SHUTTING_DOWN") from None
        return await future


def build_definition(config: Config) -> ServiceDefinition:
    """The ServiceDefinition for bootstrap (what every service's app module offers)."""
    return build_service(config)[0]


def build_service(config: Config) -> tuple[ServiceDefinition, StoreApp]:
    """The ServiceDefinition plus the app itself (tests and benchmarks reach into it)."""
    from services.canvas_store.server import CanvasStoreServicer  # noqa: PLC0415 - server imports app types

    app = StoreApp(StoreSettings.from_config(config))
    servicer = CanvasStoreServicer(app)

    purger: list[asyncio.Task] = []

    async def start() -> None:
        await app.blocking(app.open)
        if app.settings.purge_interval_s > 0:
            purger.append(asyncio.create_task(app.purge_periodically(), name="canvas-store-purge"))

    async def stop(_grace: float) -> None:
        app.closing.set()  # watchers end with UNAVAILABLE and clients reattach elsewhere; the purge loop ends
        for task in purger:
            await task
        if app.db.loop_connections is not None:
            await app.db.loop_connections.aclose()
        await asyncio.get_running_loop().run_in_executor(None, app.close)

    definition = ServiceDefinition(
        name="canvas_store",
        proto_services=[PROTO_SERVICE],
        register=lambda server: canvas_store_pb2_grpc.add_CanvasStoreServicer_to_server(servicer, server),
        start=start,
        stop=stop,
        event_loop="auto",  # uvloop: the store starts no child processes (see services/common/event_loops.py)
    )
    return definition, app
