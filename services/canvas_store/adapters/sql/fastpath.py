"""DBAPI-level fast paths for the hottest statements: point reads (a canvas, a tenant role) and a
conditional point update.

Why below SQLAlchemy Core here: a GetCanvas or a simple UpdateCanvas is one indexed statement, and
SQLAlchemy's per-execution work (connection wrapper, event dispatch, result metadata, row processors)
costs about as much CPU as the statement itself. The statement is still built and compiled by
SQLAlchemy, once per dialect, so quoting and parameter style stay the dialect's; only the execution
uses a bare DBAPI cursor, and rows are decoded here (JSON text on SQLite and MySQL, 0/1 booleans)
instead of by result processors. The cursor is the thread's held connection's
(`Database.held_connection`), or, for a call run on the event loop (loop_io.py), one of the loop's
PostgreSQL connections (`Database.loop_connections`).

Transactions: each operation is one statement in autocommit mode (SQLite: the connection already runs
in autocommit, PostgreSQL: psycopg's autocommit flag is toggled locally, without a round trip), which is
atomic by itself. The exception is MySQL/MariaDB, which lacks UPDATE ... RETURNING: there the update and
the read-back of the row share a transaction.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc

from services.canvas_store.adapters.sql import loop_io
from services.canvas_store.adapters.sql.engine import Database, translate_db_errors
from services.canvas_store.adapters.sql.loop_connections import LoopConnection, LoopConnections
from services.common.structs import StoredJson


class _Compiled:
    """A statement compiled once for the database's dialect, with its parameter order."""

    def __init__(self, db: Database, statement: Any):
        compiled = statement.compile(dialect=db.engine.dialect)
        self.sql = compiled.string
        self._positional = db.engine.dialect.positional
        self._order = tuple(compiled.positiontup or ()) if self._positional else ()
        # Literal values in the statement (e.g. `delete_time = 0`) are bound parameters too.
        self._literals = {name: value for name, value in compiled.params.items() if value is not None}

    def params(self, values: dict[str, Any]) -> Any:
        merged = {**self._literals, **values} if self._literals else values
        return tuple(merged[name] for name in self._order) if self._positional else merged


class RowDecoder:
    """Turns a DBAPI row tuple of `columns` into a {name: value} dict like SQLAlchemy's result would.

    JSON columns named in `stored_json` that arrive as text stay text, as `StoredJson` (parsed on first use).
    """

    def __init__(self, columns: Sequence[sa.Column], *, stored_json: Collection[str] = ()):
        self.names = [column.name for column in columns]
        json_columns = [index for index, column in enumerate(columns) if isinstance(column.type, sa.JSON)]
        self._json = [index for index in json_columns if self.names[index] not in stored_json]
        self._stored = [index for index in json_columns if self.names[index] in stored_json]
        self._bool = [index for index, column in enumerate(columns) if isinstance(column.type, sa.Boolean)]

    def __call__(self, row: Sequence[Any]) -> dict[str, Any]:
        values = list(row)
        for index in self._json:
            value = values[index]
            if isinstance(value, (str, bytes)):  # SA's psycopg adapters parse JSON; SQLite, PyMySQL and the loop give text
                values[index] = json.loads(value)
        for index in self._stored:
            value = values[index]
            if isinstance(value, (str, bytes)):
                values[index] = StoredJson(value if isinstance(value, str) else value.decode())
        for index in self._bool:
            values[index] = bool(values[index])
        return dict(zip(self.names, values))


def _dbapi(db: Database, *, autocommit: bool) -> contextlib.AbstractContextManager[Any]:
    """A DBAPI connection for one fast-path operation: on the event loop (code run by `loop_io.run`) one of
    the loop's PostgreSQL connections, elsewhere this thread's held connection. In autocommit mode each
    statement commits alone; otherwise the caller commits or rolls back.

    Driver exceptions are re-raised as SQLAlchemy's wrappers so `translate_db_errors` maps them as it
    does for Core; a lost connection is invalidated and dropped instead of being used again.
    """
    if db.loop_connections is not None and loop_io.on_loop():
        assert autocommit, "the loop's connections serve single autocommit statements (PostgreSQL needs no more)"
        return _loop_dbapi(db, db.loop_connections)
    return _held_dbapi(db, autocommit=autocommit)


def _wrap(db: Database, error: Exception, driver: Any) -> tuple[bool, exc.DBAPIError]:
    """(lost, the SQLAlchemy wrapper of a driver error): `lost` when the connection is gone."""
    dialect = db.engine.dialect
    lost = dialect.is_disconnect(error, driver, None)
    return lost, exc.DBAPIError.instance(None, None, error, dialect.loaded_dbapi.Error, dialect=dialect,
                                         connection_invalidated=lost)


@contextlib.contextmanager
def _held_dbapi(db: Database, *, autocommit: bool) -> Iterator[Any]:
    """This thread's held DBAPI connection; in autocommit mode on PostgreSQL for the duration (SQLite always is)."""
    proxied = db.held_connection()
    driver = proxied.driver_connection
    toggle = autocommit and db.backend == "postgresql"
    if toggle:
        driver.autocommit = True
    try:
        yield proxied
    except db.engine.dialect.loaded_dbapi.Error as error:
        lost, wrapped = _wrap(db, error, driver)
        if lost:
            db.drop_held(error)
            toggle = False
        raise wrapped from error
    finally:
        if toggle:
            driver.autocommit = False


@contextlib.contextmanager
def _loop_dbapi(db: Database, pool: LoopConnections) -> Iterator[Any]:
    """One of the loop's connections (autocommit) for the duration. The pool keeps it only if it is idle
    afterwards (not so after a statement psycopg could not cancel when the call was cancelled), and not at
    all when it was lost."""
    try:
        driver = loop_io.wait(pool.acquire())
    except db.engine.dialect.loaded_dbapi.Error as error:  # could not connect: UNAVAILABLE, like a pool checkout
        raise _wrap(db, error, None)[1] from error
    lost = False
    try:
        yield LoopConnection(pool, driver)
    except db.engine.dialect.loaded_dbapi.Error as error:
        lost, wrapped = _wrap(db, error, driver)
        raise wrapped from error
    finally:
        pool.release(driver, reusable=not lost, lost=lost)


class PointRead:
    """`SELECT <columns> FROM <table> WHERE <key> = :b_0 [AND <key2> = :b_1 ...]` on a bare DBAPI cursor; one
    dict or None."""

    def __init__(self, db: Database, columns: Sequence[sa.Column], *keys: sa.Column,
                 stored_json: Collection[str] = ()):
        self._db = db
        self.columns = list(columns)
        self._names = tuple(f"b_{index}" for index in range(len(keys)))
        self._statement = _Compiled(db, sa.select(*columns).where(
            *(key == sa.bindparam(name) for key, name in zip(keys, self._names))))
        self.decode = RowDecoder(columns, stored_json=stored_json)

    def __call__(self, *key: Any) -> dict[str, Any] | None:
        with translate_db_errors():
            try:
                return self._read(key)
            except exc.DBAPIError as error:
                if not error.connection_invalidated:
                    raise
            # The connection had died (a database restart or failover): a read is safe to repeat once, on a
            # fresh connection (checked out with the engine's pre-ping, or newly opened on the loop).
            return self._read(key)

    def _read(self, key: tuple[Any, ...]) -> dict[str, Any] | None:
        with _dbapi(self._db, autocommit=self._db.backend != "mysql") as conn:
            cursor = conn.cursor()
            try:
                return self.on(cursor, *key)
            finally:
                cursor.close()
                if self._db.backend == "mysql":  # PyMySQL runs without autocommit: end the implicit transaction
                    conn.rollback()

    def on(self, cursor: Any, *key: Any) -> dict[str, Any] | None:
        """The same read on a cursor the caller already holds (inside its transaction)."""
        cursor.execute(self._statement.sql, self._statement.params(dict(zip(self._names, key))))
        rows = cursor.fetchall()
        return self.decode(rows[0]) if rows else None


class ConditionalUpdate:
    """`UPDATE <table> SET <fields> WHERE id = :b_id AND etag = :b_etag [AND extra] [AND (f1 != :v_f1 OR ...)]
    RETURNING <columns>`.

    One compiled statement per set of assigned columns. It returns the columns of `read`, the table's
    point read by id; where the database lacks UPDATE ... RETURNING (MariaDB/MySQL), `read` itself reads
    the row back in the same transaction.
    """

    def __init__(self, db: Database, table: sa.Table, read: PointRead, *,
                 where: Callable[[sa.Table], Any] | None = None, changing: Collection[str] = ()):
        """`changing`: columns of which at least one assigned must differ from its value for the row to match."""
        self._db = db
        self._changing = frozenset(changing)
        self._table = table
        self._columns = read.columns
        self._where = where
        self._returning = db.engine.dialect.update_returning
        self._lock = db.write_lock or contextlib.nullcontext()
        self._read = read
        self._compiled: dict[frozenset[str], _Compiled] = {}

    def _statement(self, fields: frozenset[str]) -> _Compiled:
        compiled = self._compiled.get(fields)
        if compiled is None:
            table = self._table
            statement = sa.update(table).where(table.c.id == sa.bindparam("b_id"), table.c.etag == sa.bindparam("b_etag"))
            if self._where is not None:
                statement = statement.where(self._where(table))
            watched = sorted(fields & self._changing)
            if watched:
                statement = statement.where(sa.or_(*(table.c[name] != sa.bindparam(f"v_{name}") for name in watched)))
            statement = statement.values({name: sa.bindparam(f"v_{name}") for name in sorted(fields)})
            if self._returning:
                statement = statement.returning(*self._columns)
            compiled = self._compiled[fields] = _Compiled(self._db, statement)
        return compiled

    def __call__(self, key: str, etag: str, values: dict[str, Any]) -> dict[str, Any] | None:
        """Apply `values` if the row still has `etag`; the updated row, or None when no row matched.

        One statement in autocommit mode; on MySQL/MariaDB the UPDATE and the read-back share a transaction.
        """
        statement = self._statement(frozenset(values))
        params = statement.params({"b_id": key, "b_etag": etag, **{f"v_{k}": v for k, v in values.items()}})
        with self._lock, translate_db_errors(), _dbapi(self._db, autocommit=self._returning) as conn:
            cursor = conn.cursor()
            try:
                cursor.execute(statement.sql, params)
                if self._returning:
                    rows = cursor.fetchall()  # drain: SQLite ends the statement (and its implicit transaction) here
                    return self._read.decode(rows[0]) if rows else None
                try:
                    updated = self._read.on(cursor, key) if cursor.rowcount == 1 else None
                except BaseException:
                    _quiet_rollback(conn)
                    raise
                conn.commit()
                return updated
            finally:
                cursor.close()


def _quiet_rollback(conn: Any) -> None:
    """Roll back without masking the error being handled (a dead connection cannot roll back either)."""
    with contextlib.suppress(Exception):
        conn.rollback()
