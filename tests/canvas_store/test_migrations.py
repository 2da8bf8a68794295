"""Migrations: upgrade from empty and from the previous revision, on every backend; models match."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from services.canvas_store.adapters.sql import engine as sql_engine
from services.canvas_store.adapters.sql.models import Base, canvases, idempotency_keys
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
