"""Migrations: upgrade from empty and from the previous revision, on every backend; models match."""

from __future__ import annotations

import subprocess
import sys

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from services.canvas_store.adapters.sql import engine as sql_engine
from services.canvas_store.adapters.sql.models import Base, canvases, idempotency_keys, templates
from services.common.errors import UnavailableError
from tests.support.databases import temporary_database

HEAD = "0005_request_fingerprint"


def _tables(db) -> set[str]:
    return set(sa.inspect(db.engine).get_table_names())


def test_upgrade_from_empty(backend, tmp_path):
    with temporary_database(backend, str(tmp_path)) as url:
        db = sql_engine.open_database(url, pool_size=1)
        try:
            assert sql_engine.current_revision(db.engine) is None
            sql_engine.upgrade(db.engine)
            assert sql_engine.current_revision(db.engine) == HEAD == sql_engine.head_revision()
            assert {"canvases", "canvas_revisions", "sessions", "runs", "run_steps", "run_events"} <= _tables(db)
            sql_engine.upgrade(db.engine)  # idempotent
            with db.engine.connect() as conn:
                diff = compare_metadata(MigrationContext.configure(conn, opts={"version_table": sql_engine.VERSION_TABLE}), Base.metadata)
            # Only type-rendering noise may differ; no table, column or index is missing on either side.
            structural = [d for d in diff if isinstance(d, tuple) and d[0] in
                          ("add_table", "remove_table", "add_column", "remove_column", "add_index", "remove_index")]
            assert structural == []
        finally:
            db.dispose()


# The canvases columns as 0001 created them (0004 added delete_time and expire_time).
_CANVASES_0001 = sa.table("canvases", *(sa.column(c.name, c.type) for c in canvases.c
                                        if c.name not in ("delete_time", "expire_time")))
_KEYS_0001 = sa.table("idempotency_keys", *(sa.column(name) for name in
                                            ("tenant_id", "scope", "request_id", "resource_id", "create_time")))


@pytest.mark.parametrize("start", ["0001_canvases", "0002_durable_runs", "0003_covering_list_indexes",
                                   "0004_soft_delete"])
def test_upgrade_from_previous_revisions_keeps_data(backend, tmp_path, start):
    with temporary_database(backend, str(tmp_path)) as url:
        db = sql_engine.open_database(url, pool_size=1)
        try:
            sql_engine.upgrade(db.engine, start)
            assert sql_engine.current_revision(db.engine) == start
            assert ("runs" in _tables(db)) == (start != "0001_canvases")
            with db.engine.begin() as conn:
                conn.execute(sa.insert(_KEYS_0001).values(tenant_id="t", scope="canvas", request_id="r",
                                                          resource_id="c" * 32, create_time=1))
                conn.execute(sa.insert(_CANVASES_0001).values(
                    id="c" * 32, tenant_id="t", owner_id="u", title="Old", title_key="old", description="", avatar="",
                    permission="ME", release=False, category="AGENT", tags=[], dsl={"components": {}}, etag="e",
                    head_revision_id="", published_revision_id="", revision_counter=0, create_time=1, update_time=1))
            sql_engine.upgrade(db.engine)
            assert sql_engine.current_revision(db.engine) == HEAD
            assert {"runs", "run_steps", "run_events"} <= _tables(db)
            indexes = {ix["name"] for ix in sa.inspect(db.engine).get_indexes("canvases")}
            assert {"ix_canvases_list_update", "ix_canvases_list_title"} <= indexes
            assert "ix_canvases_tenant_update" not in indexes
            with db.engine.connect() as conn:
                row = conn.execute(sa.select(canvases.c.title, canvases.c.dsl, canvases.c.delete_time,
                                             canvases.c.expire_time).where(canvases.c.id == "c" * 32)).one()
                key = conn.execute(sa.select(idempotency_keys.c.resource_id, idempotency_keys.c.fingerprint)).one()
            assert (row.title, row.dsl, row.delete_time, row.expire_time) == ("Old", {"components": {}}, 0, 0)
            assert tuple(key) == ("c" * 32, "")  # keys from before 0005 carry no fingerprint
        finally:
            db.dispose()


def test_cli_entry_points_migrate_and_seed(backend, tmp_path):
    from services.canvas_store.app import migrate, seed_templates
    from tests.canvas_store.conftest import store_config

    with temporary_database(backend, str(tmp_path)) as url:
        config = store_config(str(tmp_path), url)
        assert migrate(config) == HEAD
        assert seed_templates(config) == 15
        assert seed_templates(config) == 0  # idempotent


# One store start-up as its own process: imports, says "ready", opens the store when told "go" on stdin, prints
# the page-token secret it ended up with.
_START_UP = """
import sys
from services.canvas_store.app import StoreApp
from services.canvas_store.settings import StoreSettings
from services.common.settings import Config
app = StoreApp(StoreSettings.from_config(Config({"data_dir": sys.argv[1], "store": {"database_url": sys.argv[2]}})))
print("ready", flush=True)
sys.stdin.readline()
try:
    app.open()
    print(app.tenants.page_token_secret().hex(), flush=True)
finally:
    app.close()
"""


def test_store_processes_starting_together_all_come_up(backend, tmp_path):
    """Replicas of a first deploy open one empty database at the same moment: every one of them migrates, seeds
    the templates and reads the page-token secret without failing, and the result is one schema, one set of
    templates and one secret. (Processes, as replicas are: alembic keeps its migration context in a global.)"""
    with temporary_database(backend, str(tmp_path)) as url:
        starts = [subprocess.Popen([sys.executable, "-c", _START_UP, str(tmp_path), url], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
        try:
            for start in starts:
                assert start.stdout.readline().strip() == "ready"
            for start in starts:  # released together, once every one is ready
                start.stdin.write("go\n")
                start.stdin.flush()
            outcomes = [start.communicate(timeout=120) for start in starts]
        finally:
            for start in starts:
                start.kill()
        for start, (_out, err) in zip(starts, outcomes):
            assert start.returncode == 0, err[-3000:]
        assert len({out.strip() for out, _err in outcomes}) == 1
        db = sql_engine.open_database(url, pool_size=1)
        try:
            assert sql_engine.current_revision(db.engine) == HEAD
            with db.engine.connect() as conn:
                assert conn.execute(sa.select(sa.func.count()).select_from(templates)).scalar() == 15
        finally:
            db.dispose()


def test_a_start_up_waits_for_the_migration_lock_then_gives_up_unavailable(backend, tmp_path):
    """While another store holds the migration lock, upgrade waits for it; past its timeout it fails with
    UnavailableError (MIGRATION_LOCK_HELD) instead of migrating alongside, and migrates once the lock is free."""
    with temporary_database(backend, str(tmp_path)) as url:
        db = sql_engine.open_database(url, pool_size=1)
        other = sql_engine.open_database(url, pool_size=1)  # another store process's engine
        try:
            with sql_engine.migration_lock(other.engine, timeout_s=5):
                with pytest.raises(UnavailableError) as refused:
                    sql_engine.upgrade(db.engine, lock_timeout_s=0.2)
                assert refused.value.reason == "MIGRATION_LOCK_HELD"
                assert sql_engine.current_revision(db.engine) is None  # nothing was migrated
                if backend == "postgresql":  # the short wait did not stay on the pooled connection
                    with db.engine.connect() as conn:
                        assert conn.exec_driver_sql("SHOW lock_timeout").scalar() == "0"
            sql_engine.upgrade(db.engine, lock_timeout_s=5)  # released: the next start-up migrates
            assert sql_engine.current_revision(db.engine) == HEAD
        finally:
            db.dispose()
            other.dispose()
