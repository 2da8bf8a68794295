"""Engine creation, migrations and transaction helpers shared by the SQL repositories.

Why synchronous SQLAlchemy on a bounded thread pool rather than SQLAlchemy's asyncio extension: the
three drivers we support (pysqlite, psycopg 3, PyMySQL) are all mature in sync mode, SQLite has no truly
asynchronous driver anyway (aiosqlite is a thread per connection), the CLI and migrations call the same
code without an event loop. The pool size caps concurrent DB work; the connection pool matches it, with
twice as many in overflow: each DB thread keeps one connection for the fast paths
(`Database.held_connection`), and a policy check may read tenant membership while its thread holds a
write transaction. The one exception is PostgreSQL's hottest calls, whose fast-path statements run on the
event loop through psycopg's asyncio API (`loop_connections`; see loop_io.py for why and how), while
every other statement stays on the pool; `read_tx`, `write_tx` and `held_connection` refuse to run there.

SQLite specifics: WAL journal, synchronous=NORMAL (durable across process crashes; a power loss may
drop the last commits), foreign keys on, and write transactions start with BEGIN IMMEDIATE so that two
writers never both read and then fail to upgrade their lock. Inside one process a lock serialises writers
instead of letting them spin in SQLite's busy handler; other processes wait up to busy_timeout.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import event, exc
from sqlalchemy.engine import Connection, Engine

from services.canvas_store.adapters.sql import loop_io
from services.canvas_store.adapters.sql.loop_connections import LoopConnections
from services.common import telemetry
from services.common.errors import AbortedError, InvalidArgumentError, ResourceExhaustedError, UnavailableError

logger = logging.getLogger(__name__)

VERSION_TABLE = "alembic_version_canvas_store"
MIGRATION_LOCK_NAME = "agentcanvas.canvas_store.migrations"
"""The MySQL/MariaDB named lock (GET_LOCK) that store processes take to migrate."""
_PG_MIGRATION_LOCK_KEY = int.from_bytes(hashlib.sha256(MIGRATION_LOCK_NAME.encode()).digest()[:8], "big", signed=True)
"""The same lock as a PostgreSQL advisory lock key (a signed 64-bit number)."""
_PG_LOCK_NOT_AVAILABLE = "55P03"
"""SQLSTATE of a lock wait that ran past lock_timeout."""
MIGRATION_LOCK_TIMEOUT_S = 300.0
"""How long a starting store waits for another one's migrations before it gives up (UNAVAILABLE)."""
_WRITE = "canvas_store_write"
_TX_LATENCY = telemetry.histogram(
    "store_db_transaction_seconds", "Database transaction latency (connection wait included), by kind and outcome",
    ("kind", "outcome"), buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))


def normalise_url(url: str) -> str:
    """Pick our drivers for bare scheme names and make MySQL speak utf8mb4."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    elif url.startswith("mysql://") or url.startswith("mariadb://"):
        url = "mysql+pymysql://" + url.split("://", 1)[1]
    if url.startswith(("mysql+pymysql://", "mariadb+pymysql://")) and "charset=" not in url:
        url += ("&" if "?" in url else "?") + "charset=utf8mb4"
    return url


@dataclass
class Database:
    """An engine plus the in-process writer lock used on SQLite, the DBAPI connections that threads
    hold for the fast paths (`held_connection`) and, on PostgreSQL, the event loop's own connections for
    the fast paths of calls run there (`loop_connections`, see loop_io.py)."""

    engine: Engine
    write_lock: threading.Lock | None = None
    loop_connections: LoopConnections | None = None
    _held: threading.local = field(default_factory=threading.local, repr=False)
    _all_held: list[Any] = field(default_factory=list, repr=False)
    _held_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def held_connection(self) -> Any:
        """This thread's own pooled DBAPI connection, checked out once and kept.

        Why: a checkout per statement costs a pool round (and on PostgreSQL/MariaDB a pre-ping, i.e. a
        second round trip to the server) for a statement that is itself one round trip. The store's threads
        are few and long-lived (the DB pool, the event loop on SQLite), so each keeps one connection; the
        engine's overflow leaves room for them next to the Core transactions. A connection that turns out
        dead is invalidated and dropped (`drop_held`), so the next call checks out a fresh one.
        """
        loop_io.refuse_blocking_io()
        proxied = getattr(self._held, "connection", None)
        if proxied is not None and not proxied.is_valid:  # invalidated elsewhere: give back the pool slot
            self.drop_held()
            proxied = None
        if proxied is None:
            proxied = self.engine.raw_connection()
            self._held.connection = proxied
            with self._held_lock:
                self._all_held.append(proxied)
        return proxied

    def drop_held(self, error: BaseException | None = None) -> None:
        proxied = getattr(self._held, "connection", None)
        self._held.connection = None
        if proxied is not None:
            with self._held_lock:
                if proxied in self._all_held:
                    self._all_held.remove(proxied)
            with contextlib.suppress(Exception):
                proxied.invalidate(error)
            with contextlib.suppress(Exception):
                proxied.close()  # return the (now empty) slot to the pool

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    def read(self) -> contextlib.AbstractContextManager[Connection]:
        return read_tx(self)

    def write(self) -> contextlib.AbstractContextManager[Connection]:
        return write_tx(self)

    def dispose(self) -> None:
        with self._held_lock:
            held, self._all_held[:] = list(self._all_held), []
        for proxied in held:  # checked-out connections are not closed by dispose(): give them back first
            with contextlib.suppress(Exception):
                proxied.close()
        self.engine.dispose()


def json_text(value: Any) -> str:
    """How JSON columns are written: compact UTF-8 text, as `dsl.canonical_json` measures it (key order kept).

    SQLAlchemy's default (`json.dumps`) escapes every non-ASCII character (6 bytes for a CJK character, 12 for
    an emoji) and adds a space after each separator, so an 8 MiB DSL of Chinese prompts became a ~17 MiB
    statement, which MariaDB's default max_allowed_packet (16 MiB) refused.
    """
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def max_packet_bytes(engine: Engine) -> int | None:
    """MariaDB/MySQL's max_allowed_packet (the largest statement it accepts); None on other backends."""
    if engine.dialect.name != "mysql":
        return None
    with engine.connect() as connection:
        return int(connection.execute(sa.text("SELECT @@max_allowed_packet")).scalar_one())


def open_database(url: str, *, pool_size: int = 8, loop_statements: bool = False) -> Database:
    """Create an engine tuned for the backend named by `url`.

    `loop_statements` (PostgreSQL only) adds `loop_connections`, as many as `pool_size`, for fast-path
    statements of calls run on the event loop (`loop_io.run`).
    """
    url = normalise_url(url)
    backend = sa.engine.make_url(url).get_backend_name()
    loop_connections = None
    if backend == "sqlite":
        database = sa.engine.make_url(url).database
        if database and database != ":memory:":
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=pool_size,
            max_overflow=2 * pool_size,
            json_serializer=json_text,
        )
        _install_sqlite_hooks(engine)
    elif backend == "postgresql":
        engine = sa.create_engine(url, pool_size=pool_size, max_overflow=2 * pool_size, pool_pre_ping=True,
                                  json_serializer=json_text)
        if loop_statements:
            loop_connections = LoopConnections.for_engine(engine, pool_size)
    elif backend in ("mysql", "mariadb"):
        engine = sa.create_engine(
            url, pool_size=pool_size, max_overflow=2 * pool_size, pool_pre_ping=True, pool_recycle=3600,
            isolation_level="READ COMMITTED", json_serializer=json_text,
        )
    else:
        raise InvalidArgumentError.for_field("store.database_url", f"unsupported database backend {backend!r}")
    return Database(engine, threading.Lock() if backend == "sqlite" else None, loop_connections)


def _install_sqlite_hooks(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        # Take transaction control away from the sqlite3 module so BEGIN IMMEDIATE is ours to emit.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        options = connection.get_execution_options()
        if options.get("isolation_level") == "AUTOCOMMIT":  # each statement is its own transaction
            return
        immediate = options.get(_WRITE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


class translate_db_errors:  # noqa: N801 - used like the function-style context managers around it
    """Turn driver conflicts into AbortedError and lost connections into UnavailableError.

    A class rather than a generator-based context manager: it wraps every fast-path statement, and a
    generator's set-up and tear-down cost several times more than two method calls.
    """

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _tb: Any) -> None:
        if isinstance(error, exc.IntegrityError):
            raise AbortedError("the write conflicted with a concurrent change; re-read and retry",
                               reason="CONCURRENT_MODIFICATION") from error
        if isinstance(error, exc.OperationalError):
            text = str(error.orig).lower()
            if "max_allowed_packet" in text:  # MariaDB/MySQL 1153: the same statement would fail again
                raise ResourceExhaustedError(
                    "the statement is larger than the database's max_allowed_packet; raise it on the server "
                    "(see the canvas_store README, Databases)", reason="DATABASE_PACKET_TOO_LARGE") from error
            if "deadlock" in text or "serializ" in text or "lock wait timeout" in text or "database is locked" in text:
                raise AbortedError("the write conflicted with a concurrent transaction; retry",
                                   reason="CONCURRENT_MODIFICATION") from error
            raise UnavailableError("the database is unavailable", reason="DATABASE_UNAVAILABLE") from error


@contextlib.contextmanager
def _timed(kind: str) -> Iterator[None]:
    """Observe a transaction's latency (including waiting for a pooled connection) and its outcome."""
    started = time.perf_counter()
    outcome = "error"
    try:
        yield
        outcome = "ok"
    finally:
        _TX_LATENCY.labels(kind, outcome).observe(time.perf_counter() - started)


@contextlib.contextmanager
def read_tx(db: Database) -> Iterator[Connection]:
    """A read transaction (plain BEGIN on SQLite)."""
    loop_io.refuse_blocking_io()
    with _timed("read"), translate_db_errors(), db.engine.connect() as connection, connection.begin():
        yield connection


@contextlib.contextmanager
def write_tx(db: Database) -> Iterator[Connection]:
    """A write transaction: BEGIN IMMEDIATE plus an in-process writer lock on SQLite."""
    loop_io.refuse_blocking_io()
    with _timed("write"), translate_db_errors(), contextlib.ExitStack() as stack:
        if db.write_lock is not None:
            stack.enter_context(db.write_lock)
        connection = stack.enter_context(db.engine.connect())
        connection.execution_options(**{_WRITE: True})
        stack.enter_context(connection.begin())
        yield connection


def _alembic_config(connection: Connection) -> AlembicConfig:
    config = AlembicConfig()
    location = resources.files("services.canvas_store.adapters.sql") / "migrations"
    config.set_main_option("script_location", str(location))
    config.attributes["connection"] = connection
    return config


def upgrade(engine: Engine, revision: str = "head", lock_timeout_s: float = MIGRATION_LOCK_TIMEOUT_S) -> None:
    """Apply migrations up to `revision` (idempotent). Safe to call at every start-up, from any number of store
    processes at once: they take turns (`migration_lock`), and each finds the schema where the previous left it."""
    with migration_lock(engine, lock_timeout_s) as connection:
        apply_migrations(connection, revision)


def apply_migrations(connection: Connection, revision: str = "head") -> None:
    """Apply migrations up to `revision` on a connection that holds `migration_lock`."""
    command.upgrade(_alembic_config(connection), revision)
    connection.commit()
    logger.info("canvas_store schema at %s", current_revision(connection.engine))


@contextlib.contextmanager
def migration_lock(engine: Engine, timeout_s: float = MIGRATION_LOCK_TIMEOUT_S) -> Iterator[Connection]:
    """A connection of `engine` that holds the database-wide migration lock until the block ends. Start-up's
    other one-time writes (the bundled templates) belong under it too, for the same reason.

    Why: replicas that start together (a first deploy, a scale-up) would otherwise all find the schema empty and
    all create it; every one but the first then fails on a table that already exists. PostgreSQL and MariaDB
    have session locks for this. SQLite has none, and alembic does not run its DDL in one transaction there
    (nor can the first connections to a new file all switch it to WAL at once), so its store processes take
    turns on a lock file beside the database, taken before the first connection. Waiting longer than
    `timeout_s` is UnavailableError (MIGRATION_LOCK_HELD).
    """
    if is_sqlite(engine):
        with _sqlite_lock_file(engine.url.database, timeout_s), engine.connect() as connection:
            yield connection.execution_options(**{_WRITE: True})
        return
    postgres = engine.dialect.name == "postgresql"
    with engine.connect() as connection:
        if postgres:
            # LOCAL: the timeout ends with this transaction, the (session) advisory lock does not.
            connection.exec_driver_sql(f"SET LOCAL lock_timeout = {max(1, int(timeout_s * 1000))}")
            try:
                connection.execute(sa.text("SELECT pg_advisory_lock(:key)"), {"key": _PG_MIGRATION_LOCK_KEY})
            except exc.OperationalError as error:
                if getattr(error.orig, "sqlstate", None) == _PG_LOCK_NOT_AVAILABLE:
                    raise _migration_lock_held(timeout_s) from error
                raise
        elif connection.execute(sa.text("SELECT GET_LOCK(:name, :wait)"),
                                {"name": MIGRATION_LOCK_NAME, "wait": timeout_s}).scalar() != 1:
            raise _migration_lock_held(timeout_s)  # MySQL/MariaDB: 0 when the wait timed out
        connection.commit()  # end the transaction the lock statement began; the migrations begin their own
        try:
            yield connection
        finally:
            connection.rollback()  # a failed migration leaves its transaction open; end it so the release can run
            if postgres:
                connection.execute(sa.text("SELECT pg_advisory_unlock(:key)"), {"key": _PG_MIGRATION_LOCK_KEY})
            else:
                connection.execute(sa.text("SELECT RELEASE_LOCK(:name)"), {"name": MIGRATION_LOCK_NAME})
            connection.commit()


@contextlib.contextmanager
def _sqlite_lock_file(database: str | None, timeout_s: float) -> Iterator[None]:
    """An exclusive flock on `<database>-migrations.lock`; nothing for an in-memory database (one process)."""
    if not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    deadline = time.monotonic() + timeout_s
    with open(f"{database}-migrations.lock", "a") as lock_file:
        while True:
            try:
                fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise _migration_lock_held(timeout_s) from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def _migration_lock_held(timeout_s: float) -> UnavailableError:
    return UnavailableError(f"another store process has held the migration lock for {timeout_s:.0f} s; retry when "
                            "its migrations are done", reason="MIGRATION_LOCK_HELD")


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).get_current_revision()


def head_revision() -> str:
    with contextlib.closing(sa.create_engine("sqlite://").connect()) as connection:
        head = ScriptDirectory.from_config(_alembic_config(connection)).get_current_head()
    assert head is not None
    return head
