"""The event loop's PostgreSQL connections (real server): reuse, what is closed instead, and loop binding."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest
import sqlalchemy as sa

from services.canvas_store.adapters.sql import loop_io
from services.canvas_store.adapters.sql.engine import Database, normalise_url
from services.canvas_store.adapters.sql.fastpath import PointRead
from services.canvas_store.adapters.sql.loop_connections import LoopConnection, LoopConnections
from services.common.errors import UnavailableError
from tests.support.databases import POSTGRES_URL


@pytest.fixture
def pool():
    engine = sa.create_engine(normalise_url(POSTGRES_URL))
    yield LoopConnections.for_engine(engine, 2)
    engine.dispose()


async def test_an_idle_connection_is_reused_and_json_comes_back_as_text(pool):
    first = await pool.acquire()
    rows = await loop_io.run(_rows, pool, first, "SELECT '{\"a\": [1, 2]}'::json, 7")
    assert rows == [('{"a": [1, 2]}', 7)] and pool.statements == 1
    pool.release(first, reusable=True)
    assert await pool.acquire() is first  # idle and outside a transaction: kept
    pool.release(first, reusable=True)
    await pool.aclose()
    assert first.closed


def _rows(pool: LoopConnections, connection, sql: str):
    cursor = LoopConnection(pool, connection).cursor()
    cursor.execute(sql, None)
    assert cursor.rowcount == 1
    return cursor.fetchall()


async def test_a_connection_left_in_a_transaction_is_closed(pool):
    busy = await pool.acquire()
    await busy.execute("BEGIN")
    pool.release(busy, reusable=True)  # still inside a transaction: never handed out again
    replacement = await pool.acquire()
    assert replacement is not busy
    pool.release(replacement, reusable=True)
    await pool.aclose()
    assert busy.closed


async def test_a_lost_connection_closes_the_idle_ones_too(pool):
    idle, lost = await pool.acquire(), await pool.acquire()
    pool.release(idle, reusable=True)
    pool.release(lost, reusable=False, lost=True)  # the server ended it: a restart ends the idle ones as well
    fresh = await pool.acquire()
    assert fresh is not idle and fresh is not lost and not fresh.closed
    pool.release(fresh, reusable=True)
    await pool.aclose()
    assert idle.closed and lost.closed


async def test_connections_belong_to_the_loop_that_opened_them(pool):
    connection = await pool.acquire()
    pool.release(connection, reusable=True)
    refused: list[BaseException] = []

    def other_loop() -> None:
        try:
            asyncio.run(pool.acquire())
        except BaseException as error:  # noqa: BLE001 - inspected below
            refused.append(error)

    thread = threading.Thread(target=other_loop)
    thread.start()
    thread.join()
    assert len(refused) == 1 and isinstance(refused[0], loop_io.NeedsPool)  # the caller falls back to the DB pool
    await pool.aclose()


async def test_a_database_that_cannot_be_reached_is_unavailable_not_an_internal_error():
    engine = sa.create_engine(normalise_url(POSTGRES_URL))
    unreachable = sa.engine.make_url(normalise_url(POSTGRES_URL)).set(host="127.0.0.1", port=_closed_port())
    database = Database(engine, loop_connections=LoopConnections.for_engine(sa.create_engine(unreachable), 1))
    read = PointRead(database, [sa.literal_column("1").label("one")], sa.literal_column("1"))
    try:
        with pytest.raises(UnavailableError):
            await loop_io.run(read, 1)
    finally:
        engine.dispose()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket is closed
