"""DBAPI-level fast paths for the two hottest statements: a point read and a conditional point update.

Why below SQLAlchemy Core here: a GetCanvas or a simple UpdateCanvas is one indexed statement, and
SQLAlchemy's per-execution work (connection wrapper, event dispatch, result metadata, row processors)
costs about as much CPU as the statement itself. The statement is still built and compiled by
SQLAlchemy, once per dialect, so quoting and parameter style stay the dialect's; only the execution
uses the bare DBAPI cursor of the thread's held connection (`Database.held_connection`), and rows are decoded here (JSON text on SQLite and
MySQL, 0/1 booleans) instead of by result processors.

Transactions: a point read is one statement in autocommit mode (SQLite: the connection already runs in
autocommit, PostgreSQL: psycopg's autocommit flag is toggled locally, without a round trip), which
is atomic by itself. A conditional update either runs alone in autocommit (when the caller decided
everything up front) or inside BEGIN ... COMMIT with a `check` on the returned row before the commit.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc

from services.canvas_store.adapters.sql.engine import Database, translate_db_errors


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
    """Turns a DBAPI row tuple of `columns` into a {name: value} dict like SQLAlchemy's result would."""

    def __init__(self, columns: Sequence[sa.Column]):
        self.names = [column.name for column in columns]
        self._json = [index for index, column in enumerate(columns) if isinstance(column.type, sa.JSON)]
        self._bool = [index for index, column in enumerate(columns) if isinstance(column.type, sa.Boolean)]

    def __call__(self, row: Sequence[Any]) -> dict[str, Any]:
        values = list(row)
        for index in self._json:
            value = values[index]
            if isinstance(value, (str, bytes)):  # psycopg already returns parsed JSON; SQLite and PyMySQL give text
                values[index] = json.loads(value)
        for index in self._bool:
            values[index] = bool(values[index])
        return dict(zip(self.names, values))


@contextlib.contextmanager
def _dbapi(db: Database, *, autocommit: bool) -> Iterator[Any]:
    """This thread's held DBAPI connection; in autocommit mode on PostgreSQL for the duration (SQLite always is).

    Driver exceptions are re-raised as SQLAlchemy's wrappers so `translate_db_errors` maps them as it
    does for Core; a lost connection is invalidated and dropped instead of being used again.
    """
    dialect = db.engine.dialect
    proxied = db.held_connection()
    driver = proxied.driver_connection
    toggle = autocommit and db.backend == "postgresql"
    if toggle:
        driver.autocommit = True
    try:
        yield proxied
    except dialect.loaded_dbapi.Error as error:
        lost = dialect.is_disconnect(error, driver, None)
        if lost:
            db.drop_held(error)
            toggle = False
        raise exc.DBAPIError.instance(None, None, error, dialect.loaded_dbapi.Error, dialect=dialect,
                                      connection_invalidated=lost) from error
    finally:
        if toggle:
            driver.autocommit = False


class PointRead:
    """`SELECT <columns> FROM <table> WHERE <key> = :b_id` on a bare DBAPI cursor; one dict or None."""

    def __init__(self, db: Database, columns: Sequence[sa.Column], key: sa.Column):
        self._db = db
        self.columns = list(columns)
        self._statement = _Compiled(db, sa.select(*columns).where(key == sa.bindparam("b_id")))
        self.decode = RowDecoder(columns)

    def __call__(self, key: str) -> dict[str, Any] | None:
        with translate_db_errors():
            try:
                return self._read(key)
            except exc.DBAPIError as error:
                if not error.connection_invalidated:
                    raise
            # The held connection had died (a database restart or failover): a read is safe to repeat once,
            # on a fresh connection (checked out with the engine's pre-ping).
            return self._read(key)

    def _read(self, key: str) -> dict[str, Any] | None:
        with _dbapi(self._db, autocommit=self._db.backend != "mysql") as conn:
            cursor = conn.cursor()
            try:
                return self.on(cursor, key)
            finally:
                cursor.close()
                if self._db.backend == "mysql":  # PyMySQL runs without autocommit: end the implicit transaction
                    conn.rollback()

    def on(self, cursor: Any, key: str) -> dict[str, Any] | None:
        """The same read on a cursor the caller already holds (inside its transaction)."""
        cursor.execute(self._statement.sql, self._statement.params({"b_id": key}))
        rows = cursor.fetchall()
        return self.decode(rows[0]) if rows else None


class ConditionalUpdate:
    """`UPDATE <table> SET <fields> WHERE id = :b_id AND etag = :b_etag [AND extra] RETURNING <columns>`.

    One compiled statement per set of assigned columns. It returns the columns of `read`, the table's
    point read by id; where the database lacks UPDATE ... RETURNING (MariaDB/MySQL), `read` itself reads
    the row back in the same transaction.
    """

    def __init__(self, db: Database, table: sa.Table, read: PointRead, *,
                 where: Callable[[sa.Table], Any] | None = None):
        self._db = db
        self._table = table
        self._columns = read.columns
        self._where = where
        self._returning = db.engine.dialect.update_returning
        self._read = read
        self._compiled: dict[frozenset[str], _Compiled] = {}

    def _statement(self, fields: frozenset[str]) -> _Compiled:
        compiled = self._compiled.get(fields)
        if compiled is None:
            table = self._table
            statement = sa.update(table).where(table.c.id == sa.bindparam("b_id"), table.c.etag == sa.bindparam("b_etag"))
            if self._where is not None:
                statement = statement.where(self._where(table))
            statement = statement.values({name: sa.bindparam(f"v_{name}") for name in sorted(fields)})
            if self._returning:
                statement = statement.returning(*self._columns)
            compiled = self._compiled[fields] = _Compiled(self._db, statement)
        return compiled

    def __call__(self, key: str, etag: str, values: dict[str, Any],
                 check: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any] | None:
        """Apply `values` if the row still has `etag`; the updated row, or None when no row matched.

        Without `check` the statement runs alone in autocommit mode (one round trip). With `check`, it
        runs in a transaction and `check(row)` sees the updated row before the commit: raising rolls the
        update back, so nothing is written for a caller the policy refuses.
        """
        statement = self._statement(frozenset(values))
        params = statement.params({"b_id": key, "b_etag": etag, **{f"v_{k}": v for k, v in values.items()}})
        alone = check is None and self._returning
        with contextlib.ExitStack() as stack:
            if self._db.write_lock is not None:
                stack.enter_context(self._db.write_lock)
            stack.enter_context(translate_db_errors())
            conn = stack.enter_context(_dbapi(self._db, autocommit=alone))
            cursor = conn.cursor()
            stack.callback(cursor.close)
            if alone:
                cursor.execute(statement.sql, params)
                rows = cursor.fetchall()  # drain: SQLite ends the statement (and its implicit transaction) here
                return self._read.decode(rows[0]) if rows else None
            if self._db.backend == "sqlite":
                cursor.execute("BEGIN IMMEDIATE")
            try:
                cursor.execute(statement.sql, params)
                if self._returning:
                    found = cursor.fetchall()
                    updated = self._read.decode(found[0]) if found else None
                else:
                    updated = self._read.on(cursor, key) if cursor.rowcount == 1 else None
                if updated is not None and check is not None:
                    check(updated)
            except BaseException:
                _quiet_rollback(conn)
                raise
            if updated is None:
                _quiet_rollback(conn)
                return None
            conn.commit()  # sqlite3 commits the BEGIN IMMEDIATE too: it sees the open transaction
            return updated


def _quiet_rollback(conn: Any) -> None:
    """Roll back without masking the error being handled (a dead connection cannot roll back either)."""
    with contextlib.suppress(Exception):
        conn.rollback()
