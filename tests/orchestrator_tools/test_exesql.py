"""ExeSQL against real SQLite, PostgreSQL and MariaDB, with both read-only layers exercised."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pymysql
import pytest

from services.orchestrator.tools.errors import ToolExecutionError, ToolInputError, ToolPermissionError
from services.orchestrator.tools.exesql import ExeSQL, Target, run_statements, target_for
from services.orchestrator.tools.runtime import ToolRuntime
from services.orchestrator.tools.sql_guard import SqlSyntaxError, split_statements
from tests.orchestrator_tools.conftest import make_settings

ROWS = [(i, f"item-{i}", i * 1.5) for i in range(1, 31)]


def test_guard_splits_and_classifies():
    stmts = split_statements("SELECT 1; select ';' as x -- ; DROP TABLE t\n; /* ; */ WITH a AS (SELECT 2) SELECT * FROM a;")
    assert [s.first_keyword for s in stmts] == ["SELECT", "SELECT", "WITH"]
    assert all(s.write_keyword() is None for s in stmts)
    writes = {
        "DELETE FROM t": "DELETE",
        "  insert into t values (1)": "INSERT",
        "WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x": "DELETE",
        "EXPLAIN ANALYZE DELETE FROM t": "ANALYZE",
        "SELECT * INTO newtab FROM t": "INTO",
        "SELECT * FROM t FOR UPDATE": "UPDATE",
        "/* SELECT */ DROP TABLE t": "DROP",
        "PRAGMA writable_schema=1": "PRAGMA",
        "SET ROLE admin": "SET",
    }
    for sql, word in writes.items():
        (stmt,) = split_statements(sql)
        assert stmt.write_keyword() == word, sql
    # Keywords inside literals and quoted identifiers do not count, and cannot hide a ';'.
    (quoted,) = split_statements("SELECT 'DELETE FROM t; DROP', \"update\", $tag$ ; INSERT $tag$ FROM t")
    assert quoted.write_keyword() is None
    # Standard SQL: a backslash does not escape a quote, so this is two statements, one a write.
    pg = split_statements("SELECT '\\'; DELETE FROM t; --'")
    assert [s.write_keyword() for s in pg] == [None, "DELETE"]
    mysql = split_statements("SELECT 'it\\'s'; # DROP TABLE t\n SELECT 2", mysql=True)
    assert [s.write_keyword() for s in mysql] == [None, None]
    with pytest.raises(SqlSyntaxError):
        split_statements("SELECT 'open")


@dataclass
class Db:
    kind: str
    url: str
    dsl: dict


def _sqlite_db(tmp_path: Path) -> Db:
    path = tmp_path / f"shop-{uuid.uuid4().hex[:8]}.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price REAL)")
    conn.executemany("INSERT INTO items VALUES (?, ?, ?)", ROWS)
    conn.commit()
    conn.close()
    return Db("sqlite", f"sqlite:///{path}", {"db_type": "sqlite", "database": str(path)})


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def db(request, tmp_path: Path) -> Iterator[Db]:
    name = f"exesql_{uuid.uuid4().hex[:12]}"
    if request.param == "sqlite":
        yield _sqlite_db(tmp_path)
        return
    if request.param == "postgres":
        with psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        try:
            with psycopg.connect(f"host=127.0.0.1 port=5432 user=postgres dbname={name}", autocommit=True) as conn:
                conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price DOUBLE PRECISION)")
                with conn.cursor() as cur:
                    cur.executemany("INSERT INTO items VALUES (%s, %s, %s)", ROWS)
                conn.execute("CREATE SEQUENCE counter")
            yield Db("postgres", f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}",
                     {"db_type": "postgres", "host": "127.0.0.1", "port": 5432, "username": "postgres", "database": name})
        finally:
            with psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres", autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        return
    admin = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}`")
            cur.execute(f"CREATE TABLE `{name}`.items (id INT PRIMARY KEY, name TEXT, price DOUBLE)")
            cur.executemany(f"INSERT INTO `{name}`.items VALUES (%s, %s, %s)", ROWS)
        yield Db("mariadb", f"mysql+pymysql://root@127.0.0.1:3306/{name}",
                 {"db_type": "mariadb", "host": "127.0.0.1", "port": 3306, "username": "root", "database": name})
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


@pytest.fixture
async def sql_runtime(tmp_path: Path, db: Db) -> AsyncIterator[ToolRuntime]:
    section = {"exesql": {"max_records": 20, "databases": {"shop": {"url": db.url}, "shop_rw": {"url": db.url, "allow_writes": True}}}}
    runtime = ToolRuntime(make_settings(section, tmp_path))
    yield runtime
    await runtime.aclose()


def _count(db: Db) -> int:
    if db.kind == "sqlite":
        conn = sqlite3.connect(db.dsl["database"])
        try:
            return conn.execute("SELECT count(*) FROM items").fetchone()[0]
        finally:
            conn.close()
    if db.kind == "postgres":
        with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={db.dsl['database']}") as conn:
            return conn.execute("SELECT count(*) FROM items").fetchone()[0]
    conn = pymysql.connect(host="127.0.0.1", user="root", database=db.dsl["database"])
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM items")
            return cur.fetchone()[0]
    finally:
        conn.close()


async def test_select_returns_markdown_and_rows(sql_runtime: ToolRuntime, db: Db):
    tool = ExeSQL()
    for params in ({"database": "shop"}, db.dsl):  # configured alias, and RAGFlow's connection params
        result = await tool.invoke(
            {"sql": "SELECT id, name, '100%' AS pct FROM items WHERE id <= 2 ORDER BY id; SELECT count(*) AS n FROM items"},
            params=params,
            context=sql_runtime.context(),
        )
        assert result.ok, result.error
        first, second = result.outputs["json"]
        assert first["columns"] == ["id", "name", "pct"]
        assert first["rows"] == [{"id": 1, "name": "item-1", "pct": "100%"}, {"id": 2, "name": "item-2", "pct": "100%"}]
        assert second["rows"] == [{"n": 30}]
        assert result.content.startswith("| id | name | pct |\n|---|---|---|\n| 1 | item-1 | 100% |")
        assert "| n |" in result.content and "| 30 |" in result.content


async def test_rows_are_limited(sql_runtime: ToolRuntime, db: Db):
    tool = ExeSQL()
    limited = await tool.invoke({"sql": "SELECT * FROM items ORDER BY id"}, params={"database": "shop", "max_records": 5}, context=sql_runtime.context())
    assert limited.ok, limited.error
    (table,) = limited.outputs["json"]
    assert [r["id"] for r in table["rows"]] == [1, 2, 3, 4, 5] and table["truncated"] is True
    assert "first 5 rows shown" in limited.content
    # The config cap (20) wins over a larger DSL value.
    capped = await tool.invoke({"sql": "SELECT * FROM items"}, params={"database": "shop", "max_records": 1000}, context=sql_runtime.context())
    assert len(capped.outputs["json"][0]["rows"]) == 20


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM items",
        "SELECT 1; DROP TABLE items",
        "/* harmless */ INSERT INTO items VALUES (99, 'x', 1)",
        "UPDATE items SET price = 0",
        "CREATE TABLE evil (x INT)",
        "WITH gone AS (DELETE FROM items RETURNING id) SELECT * FROM gone",
    ],
)
async def test_writes_are_refused_by_the_statement_check(sql_runtime: ToolRuntime, db: Db, sql: str):
    result = await ExeSQL().invoke({"sql": sql}, params={"database": "shop"}, context=sql_runtime.context())
    assert isinstance(result.error, ToolPermissionError), result.error
    assert "writes are disabled" in result.error.message
    assert _count(db) == 30


async def test_writes_are_refused_by_the_database_too(sql_runtime: ToolRuntime, db: Db):
    """Bypass the statement check: the read-only transaction alone must stop the write."""
    target = target_for({"database": "shop"}, sql_runtime.context())
    assert target.allow_writes is False
    with pytest.raises(ToolPermissionError):
        run_statements(target, ["INSERT INTO items VALUES (99, 'x', 1.0)"], max_records=10, timeout_s=10)
    assert _count(db) == 30
    if db.kind == "postgres":  # a "SELECT" with a side effect, which a keyword check alone would pass
        with pytest.raises(ToolPermissionError):
            run_statements(target, ["SELECT nextval('counter')"], max_records=10, timeout_s=10)


async def test_writes_when_enabled(sql_runtime: ToolRuntime, db: Db):
    result = await ExeSQL().invoke(
        {"sql": "INSERT INTO items VALUES (100, 'new', 2.5); SELECT name FROM items WHERE id = 100"},
        params={"database": "shop_rw"},
        context=sql_runtime.context(),
    )
    assert result.ok, result.error
    assert "1 row(s) affected." in result.content
    assert result.outputs["json"][1]["rows"] == [{"name": "new"}]
    assert _count(db) == 31


async def test_sql_errors_are_typed(sql_runtime: ToolRuntime, db: Db):
    tool = ExeSQL()
    bad = await tool.invoke({"sql": "SELECT nope FROM items"}, params={"database": "shop"}, context=sql_runtime.context())
    assert isinstance(bad.error, ToolExecutionError) and "SQL error" in bad.error.message
    empty = await tool.invoke({"sql": "  -- only a comment"}, params={"database": "shop"}, context=sql_runtime.context())
    assert isinstance(empty.error, ToolInputError)


async def test_connection_params_are_validated(tmp_path: Path):
    runtime = ToolRuntime(make_settings({"exesql": {"databases": {"main": "sqlite:///x.db"}}}, tmp_path))
    try:
        tool = ExeSQL()
        context = runtime.context()
        # The exesql example template: RAGFlow's connection params with an empty password are accepted.
        assert tool.validate({"database": "rag_flow", "username": "root", "host": "mysql", "port": 3306}, context) == []
        problems = tool.validate({"db_type": "mysql"}, context)
        assert [p.field for p in problems] == ["database", "username", "host"]
        assert tool.validate({"database": "main"}, context) == []
        assert [p.field for p in tool.validate({"db_type": "mssql", "database": "x"}, context)] == ["db_type"]
        missing = await tool.invoke({"sql": "SELECT 1"}, params={"db_type": "sqlite", "database": str(tmp_path / "none.db")}, context=context)
        assert isinstance(missing.error, ToolInputError) and missing.error.field == "database"
        # A canvas cannot point ExeSQL at SQLite files outside tools.exesql.sqlite_dirs (default: the data dir).
        outside = await tool.invoke({"sql": "SELECT 1"}, params={"db_type": "sqlite", "database": "/etc/../etc/passwd"}, context=context)
        assert isinstance(outside.error, ToolPermissionError) and "sqlite_dirs" in outside.error.message
        assert isinstance(Target, type)
    finally:
        await runtime.aclose()


@pytest.mark.parametrize("db_type", ["postgres", "mysql"])
async def test_unreachable_database_is_a_typed_error(tmp_path: Path, db_type: str):
    import socket

    from services.orchestrator.tools.errors import ToolUpstreamError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    runtime = ToolRuntime(make_settings({"exesql": {"timeout_s": 5}}, tmp_path))
    try:
        params = {"db_type": db_type, "host": "127.0.0.1", "port": port, "username": "u", "password": "p4ssw0rd", "database": "d"}
        result = await ExeSQL().invoke({"sql": "SELECT 1"}, params=params, context=runtime.context())
    finally:
        await runtime.aclose()
    assert isinstance(result.error, ToolUpstreamError), result.error
    assert "cannot connect" in result.error.message and "p4ssw0rd" not in result.error.message
