"""Uniquely named, throwaway databases on the local PostgreSQL and MariaDB servers (SQLite: a file)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

import sqlalchemy as sa

POSTGRES_URL = os.environ.get("STORE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
MYSQL_URL = os.environ.get("STORE_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/")


@contextlib.contextmanager
def temporary_database(backend: str, tmp_dir: str = "", prefix: str = "ac_test") -> Iterator[str]:
    """Create a database on `backend` (sqlite | postgresql | mariadb) and yield its URL; drop it afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    if backend == "sqlite":
        yield f"sqlite:///{tmp_dir}/{name}.db"
        return
    server_url = POSTGRES_URL if backend == "postgresql" else MYSQL_URL
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if backend == "postgresql":
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        else:
            conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    try:
        yield sa.engine.make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            if backend == "postgresql":
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            else:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        admin.dispose()
