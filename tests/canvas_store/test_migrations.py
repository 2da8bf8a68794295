"""Migrations: upgrade from empty and from the previous revision, on every backend; models match."""

from __future__ import annotations

import subprocess
import sys

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from services.canvas_store.adapters.sql import engine as sql_engine
from services.canvas_store.adapters.sql.models import Base, canvas_tags, canvases, idempotency_keys, runs, templates
from services.common.errors import UnavailableError
from tests.support.databases import temporary_database

HEAD = "0007_tag_keys"


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
                                   "0004_soft_delete", "0005_request_fingerprint", "0006_idempotency_per_user"])
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
                key = conn.execute(sa.select(idempotency_keys.c.resource_id, idempotency_keys.c.fingerprint,
                                             idempotency_keys.c.user_id)).one()
            assert (row.title, row.dsl, row.delete_time, row.expire_time) == ("Old", {"components": {}}, 0, 0)
            # Keys from before 0005 carry no fingerprint; 0006 gives each the user who made it (the owner). A key
            # written at 0006 without a user (as this raw insert does) keeps none.
            assert tuple(key) == ("c" * 32, "", "u" if start < "0006" else "")
        finally:
            db.dispose()


_RUNS_0002 = sa.table("runs", *(sa.column(c.name, c.type) for c in runs.c))


def test_0006_keys_idempotency_by_user_and_backfills_existing_keys(backend, tmp_path):
    """From 0005 with data: each key gets the canvas owner or run creator ('' when the resource is gone), the
    primary key becomes (tenant_id, user_id, scope, request_id), and two users may then hold the same request_id."""
    with temporary_database(backend, str(tmp_path)) as url:
        db = sql_engine.open_database(url, pool_size=1)
        try:
            sql_engine.upgrade(db.engine, "0005_request_fingerprint")
            keys_0005 = sa.table("idempotency_keys", *(sa.column(name) for name in (
                "tenant_id", "scope", "request_id", "resource_id", "create_time", "fingerprint")))
            with db.engine.begin() as conn:
                conn.execute(sa.insert(_CANVASES_0001).values(
                    id="c" * 32, tenant_id="t", owner_id="alice", title="Doc", title_key="doc", description="",
                    avatar="", permission="ME", release=False, category="AGENT", tags=[], dsl={}, etag="e",
                    head_revision_id="", published_revision_id="", revision_counter=0, create_time=1, update_time=1))
                conn.execute(sa.insert(_RUNS_0002).values(
                    id="r" * 32, tenant_id="t", creator_id="bob", canvas_id="", revision_id="", session_id="",
                    status="PENDING", spec={}, outputs=None, error=None, usage=None, last_seq=0, step_count=0,
                    cancel_requested=False, lease_holder="", lease_token=0, lease_expire_time=0, create_time=1,
                    update_time=1))
                conn.execute(sa.insert(keys_0005), [
                    dict(tenant_id="t", scope="canvas", request_id="k", resource_id="c" * 32, create_time=1,
                         fingerprint="f"),
                    dict(tenant_id="t", scope="run", request_id="k", resource_id="r" * 32, create_time=1,
                         fingerprint=""),
                    dict(tenant_id="t", scope="canvas", request_id="gone", resource_id="0" * 32, create_time=1,
                         fingerprint="")])
            sql_engine.upgrade(db.engine)
            assert sql_engine.current_revision(db.engine) == HEAD
            key = sa.inspect(db.engine).get_pk_constraint("idempotency_keys")["constrained_columns"]
            assert key == ["tenant_id", "user_id", "scope", "request_id"]
            k = idempotency_keys.c
            with db.engine.begin() as conn:
                rows = conn.execute(sa.select(k.scope, k.request_id, k.user_id, k.resource_id, k.fingerprint)
                                    .order_by(k.scope, k.request_id)).all()
                assert [tuple(r) for r in rows] == [("canvas", "gone", "", "0" * 32, ""),
                                                    ("canvas", "k", "alice", "c" * 32, "f"),
                                                    ("run", "k", "bob", "r" * 32, "")]
                # Another user of the tenant may now use the same request_id for a resource of their own.
                conn.execute(sa.insert(idempotency_keys).values(tenant_id="t", user_id="carol", scope="canvas",
                                                                request_id="k", resource_id="d" * 32, create_time=2))
            assert len(rows) + 1 == _count(db, idempotency_keys)
            # The canvas and run came through untouched; foreign keys still cascade.
            with db.engine.connect() as conn:
                assert conn.execute(sa.select(canvases.c.title).where(canvases.c.id == "c" * 32)).scalar() == "Doc"
                assert conn.execute(sa.select(runs.c.creator_id).where(runs.c.id == "r" * 32)).scalar() == "bob"
            _assert_foreign_keys(db)
        finally:
            db.dispose()


def test_0007_keeps_tag_keys_so_filters_ignore_case(backend, tmp_path):
    """From 0006 with data: tag rows become their case keys (one row per key), the canvas keeps its spellings."""
    with temporary_database(backend, str(tmp_path)) as url:
        db = sql_engine.open_database(url, pool_size=1)
        try:
            sql_engine.upgrade(db.engine, "0006_idempotency_per_user")
            spellings = ["AI", "ai", "Ünïcode", "\u0130stanbul", "plain"]
            with db.engine.begin() as conn:
                for cid, tags in (("c" * 32, spellings), ("d" * 32, ["plain"])):
                    conn.execute(sa.insert(canvases).values(
                        id=cid, tenant_id="t", owner_id="u", title=cid, title_key=cid, description="", avatar="",
                        permission="ME", release=False, category="AGENT", tags=tags, dsl={}, etag="e",
                        head_revision_id="", published_revision_id="", revision_counter=0, create_time=1,
                        update_time=1))
                    conn.execute(sa.insert(canvas_tags), [{"canvas_id": cid, "tag": tag} for tag in tags])
            sql_engine.upgrade(db.engine)
            assert sql_engine.current_revision(db.engine) == HEAD
            with db.engine.connect() as conn:
                rows = conn.execute(sa.select(canvas_tags.c.canvas_id, canvas_tags.c.tag)).all()
                kept = conn.execute(sa.select(canvases.c.tags).where(canvases.c.id == "c" * 32)).scalar_one()
            assert sorted((cid[0], tag) for cid, tag in rows) == [
                ("c", "ai"), ("c", "istanbul"), ("c", "plain"), ("c", "ünïcode"), ("d", "plain")]
            assert kept == spellings
        finally:
            db.dispose()


def _count(db, table) -> int:
    with db.engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar()


def _assert_foreign_keys(db) -> None:
    """Every foreign key of the models exists in the database with its ON DELETE (0006 recreates them on MariaDB)."""
    inspector = sa.inspect(db.engine)
    for table in Base.metadata.sorted_tables:
        expected = {(tuple(fk.parent.name for fk in c.elements), c.referred_table.name, c.ondelete)
                    for c in table.foreign_key_constraints}
        found = {(tuple(fk["constrained_columns"]), fk["referred_table"], (fk.get("options") or {}).get("ondelete"))
                 for fk in inspector.get_foreign_keys(table.name)}
        assert found == expected, table.name


@pytest.mark.parametrize("start", [None, "0005_request_fingerprint"])
def test_every_text_column_is_binary_no_pad_on_mariadb(tmp_path, start):
    """MariaDB's default collations ignore case, accents and trailing spaces ("ACME" = "acme" = "acme "): every
    store table and every text column must compare exactly (binary, NO PAD), from empty and after an upgrade.
    The test database is created with utf8mb4_unicode_ci (tests/support/databases.py), as a careless operator's
    would be."""
    with temporary_database("mariadb", str(tmp_path)) as url:
        db = sql_engine.open_database(url, pool_size=1)
        try:
            if start:
                sql_engine.upgrade(db.engine, start)
            sql_engine.upgrade(db.engine)
            with db.engine.connect() as conn:
                columns = conn.execute(sa.text(
                    "SELECT TABLE_NAME, COLUMN_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = DATABASE() AND COLLATION_NAME IS NOT NULL")).all()
                tables = conn.execute(sa.text("SELECT TABLE_NAME, TABLE_COLLATION FROM information_schema.TABLES "
                                              "WHERE TABLE_SCHEMA = DATABASE()")).all()
                pad = dict(conn.execute(sa.text("SELECT COLLATION_NAME, PAD_ATTRIBUTE FROM "
                                                "information_schema.COLLATIONS")).all()) if _has_pad(conn) else {}
            assert {name for name, _ in tables} >= set(Base.metadata.tables)
            assert {(table, column) for table, column, _ in columns} >= {
                (t.name, c.name) for t in Base.metadata.sorted_tables for c in t.columns
                if isinstance(c.type, sa.String) and not isinstance(c.type, sa.Enum)} - {
                (t.name, c.name) for t in Base.metadata.sorted_tables for c in t.columns if isinstance(c.type, sa.JSON)}
            loose = [(t, c, coll) for t, c, coll in columns if coll != "utf8mb4_nopad_bin"]
            loose += [(t, "(table)", coll) for t, coll in tables if coll != "utf8mb4_nopad_bin"]
            assert loose == []
            if pad:
                assert pad["utf8mb4_nopad_bin"] == "NO PAD"
            _assert_foreign_keys(db)
            with db.engine.begin() as conn:  # exact comparison, as on SQLite and PostgreSQL
                conn.execute(sa.insert(idempotency_keys), [
                    dict(tenant_id=tenant, user_id="u", scope="canvas", request_id=rid, resource_id="c" * 32,
                         create_time=1) for tenant, rid in (("acme", "r1"), ("ACME", "r1"), ("acme", "R1"),
                                                            ("acme", "r1 "), ("acmé", "r1"))])
                assert conn.execute(sa.select(sa.func.count()).select_from(idempotency_keys)
                                    .where(idempotency_keys.c.tenant_id == "acme",
                                           idempotency_keys.c.request_id == "r1")).scalar() == 1
        finally:
            db.dispose()


def _has_pad(conn) -> bool:
    return conn.execute(sa.text("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                                "'information_schema' AND TABLE_NAME = 'COLLATIONS' AND COLUMN_NAME = "
                                "'PAD_ATTRIBUTE'")).scalar() > 0


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
