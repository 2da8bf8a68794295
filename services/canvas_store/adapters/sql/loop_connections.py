"""PostgreSQL connections of the event loop: psycopg's asyncio API behind the DBAPI face the fast paths use.

`LoopConnections` is a small pool of `psycopg.AsyncConnection`s in autocommit mode, opened on first use
with the same connect arguments (and type adapters) as the engine's. `LoopConnection` gives code run by
`loop_io.run` the synchronous cursor of a DBAPI connection in autocommit mode (the fast paths need no
more: each of their operations is one statement); each statement is one `loop_io.wait` on the loop.

A connection that failed with a lost-connection error, or is not idle when given back (a statement that
psycopg could not cancel when its call was cancelled), is closed rather than reused; after a lost
connection the idle ones are closed too, because a database restart or failover ends them all and a
retried read must not meet another dead one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.adapt import AdaptersMap
from psycopg.pq import TransactionStatus
from psycopg.types.string import TextLoader

from services.canvas_store.adapters.sql import loop_io


class LoopConnections:
    """At most `size` AsyncConnections, idle ones reused newest first; bound to the loop that first uses it."""

    @classmethod
    def for_engine(cls, engine: sa.Engine, size: int) -> LoopConnections:
        """Connections opened with the connect arguments and type adapters of the engine's psycopg dialect,
        except that JSON comes back as text: the fast paths decode it themselves, or keep it as text
        (`RowDecoder`'s stored_json)."""
        cargs, cparams = engine.dialect.create_connect_args(engine.url)
        adapters = AdaptersMap(cparams.get("context") or psycopg.adapters)
        for name in ("json", "jsonb"):
            adapters.register_loader(name, TextLoader)
        cparams = {**cparams, "context": adapters}

        async def connect() -> psycopg.AsyncConnection:
            return await psycopg.AsyncConnection.connect(*cargs, autocommit=True, **cparams)

        return cls(connect, size)

    def __init__(self, connect: Callable[[], Awaitable[psycopg.AsyncConnection]], size: int):
        self._connect = connect
        self._size = size
        self._idle: list[psycopg.AsyncConnection] = []
        # One cursor per connection, reused for every statement: creating one costs ~20 us, a sixth of a statement.
        self._cursors: dict[psycopg.AsyncConnection, psycopg.AsyncCursor] = {}
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: set[asyncio.Task] = set()
        self.statements = 0
        """Statements sent through these connections so far (the tests read it to see which calls ran here)."""

    async def acquire(self) -> psycopg.AsyncConnection:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop, self._slots = loop, asyncio.Semaphore(self._size)
        elif loop is not self._loop:  # these connections cannot serve another loop: the call runs on the DB pool
            raise loop_io.NeedsPool()
        assert self._slots is not None
        await self._slots.acquire()
        try:
            return self._idle.pop() if self._idle else await self._connect()
        except BaseException:
            self._slots.release()
            raise

    def release(self, connection: psycopg.AsyncConnection, *, reusable: bool, lost: bool = False) -> None:
        """Give a connection back: kept when `reusable` and idle outside a transaction, else closed; `lost`
        (the server ended it) closes the idle ones as well."""
        assert self._slots is not None
        if reusable and not connection.closed and connection.info.transaction_status is TransactionStatus.IDLE:
            self._idle.append(connection)
        else:
            self._close_later(connection)
        if lost:
            idle, self._idle = self._idle, []
            for other in idle:
                self._close_later(other)
        self._slots.release()

    async def fetch(self, connection: psycopg.AsyncConnection, sql: str, params: Any) -> list[tuple[Any, ...]]:
        """Run one statement that returns rows (a SELECT, or an UPDATE ... RETURNING) on `connection`, through
        its reused cursor; it commits alone. Every row."""
        self.statements += 1
        cursor = self._cursors.get(connection)
        if cursor is None:
            cursor = self._cursors[connection] = connection.cursor()
        await cursor.execute(sql, params)
        return await cursor.fetchall()

    def _close_later(self, connection: psycopg.AsyncConnection) -> None:
        self._cursors.pop(connection, None)
        task = asyncio.get_running_loop().create_task(connection.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Close every idle connection (on the loop that owns them); connections in use close when released."""
        idle, self._idle = self._idle, []
        for connection in idle:
            self._cursors.pop(connection, None)
            with contextlib.suppress(Exception):
                await connection.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


class LoopConnection:
    """The one DBAPI call the fast paths make on a connection in autocommit mode: `cursor`."""

    def __init__(self, pool: LoopConnections, connection: psycopg.AsyncConnection):
        self._pool = pool
        self._connection = connection

    def cursor(self) -> LoopCursor:
        return LoopCursor(self._pool, self._connection)


class LoopCursor:
    """A DBAPI cursor whose `execute` awaits `LoopConnections.fetch` on the loop (`loop_io.wait`): rows are
    fetched as the statement completes. Only for statements that return rows, so the row count is the number
    of rows (psycopg builds column descriptions to answer `description` or `rowcount`: work not needed here)."""

    def __init__(self, pool: LoopConnections, connection: psycopg.AsyncConnection):
        self._pool = pool
        self._connection = connection
        self._rows: Sequence[tuple[Any, ...]] = ()

    @property
    def rowcount(self) -> int:
        return len(self._rows)

    def execute(self, sql: str, params: Any) -> None:
        self._rows = loop_io.wait(self._pool.fetch(self._connection, sql, params))

    def fetchall(self) -> Sequence[tuple[Any, ...]]:
        rows, self._rows = self._rows, ()
        return rows

    def close(self) -> None:
        self._rows = ()
