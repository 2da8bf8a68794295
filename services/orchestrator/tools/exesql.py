"""ExeSQL (RAGFlow class `ExeSQL`, function `execute_sql`) on SQLite, PostgreSQL and MySQL/MariaDB.

Connection: the DSL's `database` may name a database configured under `tools.exesql.databases`
(recommended: credentials stay out of canvases); otherwise RAGFlow's params build the URL
(`db_type` mysql | mariadb | oceanbase | postgres | postgresql | sqlite, `host`, `port`, `username`,
`password`, `database`; for sqlite `database` is the file path, which must lie inside
`tools.exesql.sqlite_dirs` so a canvas cannot read arbitrary files).

Read-only unless writes are enabled in config (`tools.exesql.allow_writes`, or per database). Two
layers: every statement must pass sql_guard's read-only check, and the statements run inside a
read-only transaction (`SET TRANSACTION READ ONLY` on PostgreSQL, `START TRANSACTION READ ONLY` on
MySQL/MariaDB, `PRAGMA query_only` on a read-only-opened SQLite file) that is rolled back.

Each statement's rows are capped at `max_records` (the smaller of the DSL's and the config's), and
come back as a markdown table (`formalized_content`) plus structured rows (`json`).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import create_engine, exc as sa_exc
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.pool import NullPool

from services.orchestrator.tools.base import ParamProblem, Tool, ToolResult
from services.orchestrator.tools.errors import (
    ToolConfigError,
    ToolExecutionError,
    ToolInputError,
    ToolPermissionError,
    ToolTimeoutError,
    ToolUpstreamError,
)
from services.orchestrator.tools.runtime import ToolContext
from services.orchestrator.tools.sql_guard import SqlSyntaxError, split_statements

logger = logging.getLogger(__name__)

TOOL = "ExeSQL"
_MYSQL_TYPES = {"mysql", "mariadb", "oceanbase"}
_PG_TYPES = {"postgres", "postgresql"}
_READ_ONLY_ERRORS = ("25006", 1792, "readonly database", "read-only", "query_only", "attempt to write")


@dataclass(frozen=True)
class Target:
    """Where to run: a SQLAlchemy URL plus whether writes are allowed there."""

    url: URL
    allow_writes: bool

    @property
    def kind(self) -> str:
        backend = self.url.get_backend_name()
        return "mysql" if backend in ("mysql", "mariadb") else backend


def target_for(params: Mapping[str, Any], context: ToolContext) -> Target:
    settings = context.settings.exesql
    name = str(params.get("database") or "").strip()
    if name in settings.databases:
        db = settings.databases[name]
        try:
            url = make_url(db.url)
        except sa_exc.ArgumentError:
            raise ToolConfigError(TOOL, f"tools.exesql.databases.{name}.url", "is not a database URL") from None
        return Target(url, settings.allow_writes or db.allow_writes)
    db_type = str(params.get("db_type") or "mysql").strip().lower()
    if db_type == "sqlite":
        if not name:
            raise ToolInputError(TOOL, "database", "sqlite needs 'database' (the file path)")
        path = Path(name).expanduser().resolve()
        if not any(path.is_relative_to(d) for d in settings.sqlite_dirs):
            raise ToolPermissionError(TOOL, f"SQLite files named by a canvas must be under tools.exesql.sqlite_dirs ({name} is not)")
        if not path.is_file():
            raise ToolInputError(TOOL, "database", f"no SQLite database file at {name}")
        return Target(URL.create("sqlite", database=str(path)), settings.allow_writes)
    if db_type not in _MYSQL_TYPES | _PG_TYPES:
        raise ToolConfigError(TOOL, "db_type", f"db_type '{db_type}' is not supported (sqlite, postgres, mysql, mariadb)")
    missing = [key for key in ("database", "username", "host") if not str(params.get(key) or "").strip()]
    if missing:
        raise ToolInputError(TOOL, missing[0], f"missing connection setting(s): {', '.join(missing)}")
    try:
        port = int(params.get("port") or (5432 if db_type in _PG_TYPES else 3306))
    except (TypeError, ValueError):
        raise ToolInputError(TOOL, "port", "'port' must be an integer") from None
    driver = "postgresql+psycopg" if db_type in _PG_TYPES else "mysql+pymysql"
    url = URL.create(
        driver,
        username=str(params["username"]),
        password=str(params.get("password") or "") or None,
        host=str(params["host"]),
        port=port,
        database=name,
    )
    return Target(url, settings.allow_writes)


def _engine(target: Target, timeout_s: float) -> Engine:
    seconds = max(1, int(timeout_s))
    if target.kind == "sqlite":
        database = target.url.database or ""
        if target.allow_writes:
            return create_engine(target.url, poolclass=NullPool, connect_args={"timeout": seconds})
        # Opened read-only at the file level as well; uri=true makes sqlite3 parse the file: URL.
        ro = f"sqlite:///file:{quote(database)}?mode=ro&uri=true"
        return create_engine(ro, poolclass=NullPool, connect_args={"timeout": seconds})
    if target.kind == "postgresql":
        return create_engine(
            target.url,
            poolclass=NullPool,
            connect_args={"connect_timeout": seconds, "options": f"-c statement_timeout={seconds * 1000}"},
        )
    return create_engine(
        target.url, poolclass=NullPool, connect_args={"connect_timeout": seconds, "read_timeout": seconds, "write_timeout": seconds}
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() and abs(value) < 2**53 else float(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>")


def markdown_table(columns: list[str], rows: list[list[Any]]) -> str:
    head = "| " + " | ".join(_cell(c) for c in columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join([head, rule, *body])


def _db_error(orig: BaseException, *, connecting: bool = False) -> Exception:
    message = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    code = getattr(orig, "sqlstate", None) or (orig.args[0] if orig.args else None)
    lowered = message.lower()
    if code in _READ_ONLY_ERRORS or any(m in lowered for m in _READ_ONLY_ERRORS if isinstance(m, str)):
        return ToolPermissionError(TOOL, f"the database refused a write in a read-only transaction: {message}")
    if code == "57014" or code in (2013, 3024):
        return ToolTimeoutError(TOOL, f"the query was cancelled by the statement timeout: {message}")
    if connecting:
        return ToolUpstreamError(TOOL, f"cannot connect to the database: {message}")
    return ToolExecutionError(TOOL, f"SQL error: {message}")


def run_statements(target: Target, statements: list[str], *, max_records: int, timeout_s: float) -> list[dict[str, Any]]:
    """Run statements in one transaction (read-only unless the target allows writes). Blocking.

    Uses the driver's cursor directly, without parameters, so a literal `%` is never taken for a
    placeholder.
    """
    engine = _engine(target, timeout_s)
    dbapi_error: type[BaseException] = engine.dialect.loaded_dbapi.Error
    results: list[dict[str, Any]] = []
    try:
        try:
            raw = engine.raw_connection()
        except sa_exc.DBAPIError as error:
            raise _db_error(error.orig or error, connecting=True) from None
        except dbapi_error as error:  # some dialects let the driver's own error through on connect
            raise _db_error(error, connecting=True) from None
        try:
            cursor = raw.cursor()
            if not target.allow_writes:
                if target.kind == "sqlite":
                    cursor.execute("PRAGMA query_only = ON")
                elif target.kind == "postgresql":
                    cursor.execute("SET TRANSACTION READ ONLY")
                else:
                    cursor.execute("START TRANSACTION READ ONLY")
            for sql in statements:
                cursor.execute(sql)
                if cursor.description is not None:
                    columns = [str(d[0]) for d in cursor.description]
                    fetched = cursor.fetchmany(max_records + 1)
                    rows = [[_jsonable(v) for v in row] for row in fetched[:max_records]]
                    results.append({"sql": sql, "columns": columns, "rows": rows, "truncated": len(fetched) > max_records})
                else:
                    results.append({"sql": sql, "columns": [], "rows": [], "truncated": False, "rowcount": cursor.rowcount})
            cursor.close()
            if target.allow_writes:
                raw.commit()
            else:
                raw.rollback()
        except dbapi_error as error:
            raise _db_error(error) from None
        finally:
            raw.close()
    finally:
        engine.dispose()
    return results


class ExeSQL(Tool):
    component_name = "ExeSQL"
    function_name = "execute_sql"
    description = (
        "Run SQL against the configured database and return the result rows as a table. "
        "Only read-only statements (SELECT, WITH, SHOW, EXPLAIN) are allowed unless writes are enabled."
    )
    arguments_schema = {
        "type": "object",
        "properties": {"sql": {"type": "string", "description": "The SQL to execute; several statements separated by ';'."}},
        "required": ["sql"],
    }
    params_schema = {
        "type": "object",
        "properties": {
            "sql": {"type": "string", "default": "{sys.query}"},
            "db_type": {"type": "string", "enum": ["mysql", "mariadb", "oceanbase", "postgres", "postgresql", "sqlite"], "default": "mysql"},
            "database": {"type": "string", "default": ""},
            "username": {"type": "string", "default": ""},
            "host": {"type": "string", "default": ""},
            "port": {"type": "integer", "default": 3306},
            "password": {"type": "string", "default": ""},
            "max_records": {"type": "integer", "minimum": 1, "default": 1024},
        },
    }
    argument_defaults = {"sql": "{sys.query}"}

    def validate(self, params: Mapping[str, Any] | None, context: ToolContext) -> list[ParamProblem]:
        """RAGFlow requires the connection fields at load; a configured database name is enough here."""
        params = self.merged_params(params)
        name = str(params.get("database") or "").strip()
        if name in context.settings.exesql.databases:
            return []
        db_type = str(params.get("db_type") or "mysql").lower()
        if db_type == "sqlite":
            return [] if name else [ParamProblem("database", "sqlite needs 'database' (the file path)")]
        if db_type not in _MYSQL_TYPES | _PG_TYPES:
            return [ParamProblem("db_type", f"db_type '{db_type}' is not supported (sqlite, postgres, mysql, mariadb)")]
        return [
            ParamProblem(key, f"'{key}' is required (or name a database configured under tools.exesql.databases)")
            for key in ("database", "username", "host")
            if not str(params.get(key) or "").strip()
        ]

    async def run(self, args: dict[str, Any], params: dict[str, Any], context: ToolContext) -> ToolResult:
        sql = args.get("sql")
        if not isinstance(sql, str) or not sql.strip():
            raise ToolInputError(TOOL, "sql", "no SQL to execute")
        sql = sql.strip().strip("`")
        if sql.lower().startswith("sql\n"):  # a fenced ```sql block from a model
            sql = sql[4:]
        target = target_for(params, context)
        try:
            statements = split_statements(sql, mysql=target.kind == "mysql")
        except SqlSyntaxError as exc:
            raise ToolInputError(TOOL, "sql", str(exc)) from None
        if not statements:
            raise ToolInputError(TOOL, "sql", "no SQL statement found")
        if not target.allow_writes:
            for position, statement in enumerate(statements, start=1):
                word = statement.write_keyword()
                if word is not None:
                    raise ToolPermissionError(
                        TOOL,
                        f"statement {position} is not read-only ({word}); writes are disabled (tools.exesql.allow_writes)",
                    )
        try:
            limit = min(int(params.get("max_records") or 1024), context.settings.exesql.max_records)
        except (TypeError, ValueError):
            raise ToolInputError(TOOL, "max_records", "'max_records' must be an integer") from None
        if limit < 1:
            raise ToolInputError(TOOL, "max_records", "'max_records' must be positive")
        results = await context.run_blocking(
            run_statements, target, [s.text for s in statements], max_records=limit, timeout_s=context.settings.exesql.timeout_s
        )
        parts = []
        for result in results:
            if result["columns"]:
                table = markdown_table(result["columns"], result["rows"])
                if result["truncated"]:
                    table += f"\n\n(first {limit} rows shown; more rows were cut)"
                parts.append(table if result["rows"] else table + "\n\n(no rows)")
            else:
                parts.append(f"{result['rowcount']} row(s) affected.")
        formalized = "\n\n".join(parts)
        rows = [
            {"sql": r["sql"], "columns": r["columns"], "rows": [dict(zip(r["columns"], row)) for row in r["rows"]], "truncated": r["truncated"]}
            for r in results
        ]
        return ToolResult(content=formalized, outputs={"formalized_content": formalized, "json": rows})
