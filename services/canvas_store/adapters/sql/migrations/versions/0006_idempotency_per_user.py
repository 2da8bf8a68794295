"""Idempotency keys per user, and exact (binary, NO PAD) text comparison on MariaDB/MySQL.

1. `idempotency_keys` gains `user_id`, part of the primary key (tenant_id, user_id, scope, request_id): a
   request_id was unique per tenant, so another user of the tenant who sent the same one got the first
   user's canvas or run back (and could lease that run). Existing keys take the user who made the request:
   the canvas's owner_id or the run's creator_id; '' when that resource is gone (such a key matches nobody).
2. MariaDB/MySQL only: every store table (and the alembic version table) is converted to utf8mb4 with a
   binary NO PAD collation (MariaDB utf8mb4_nopad_bin, MySQL 8 utf8mb4_0900_bin; utf8mb4_bin where neither
   exists). The server's default utf8mb4_*_ci collations compare case-, accent- and trailing-space-
   insensitively, so tenant "ACME" matched "acme" and request ids, member ids, titles and tags collided.
   MariaDB refuses to change the collation of columns in a foreign key, so the foreign keys are dropped for
   the conversion and recreated exactly (same name, columns, ON DELETE) afterwards.

MariaDB has no transactional DDL: every step checks whether it is still needed, so a migration that failed
half-way can simply run again.

Downgrade restores the old key (keeping one row of keys that now differ only by user) and drops user_id; the
collation is left binary (converting back could make distinct identities collide in unique keys).

Revision ID: 0006_idempotency_per_user
Revises: 0005_request_fingerprint
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_idempotency_per_user"
down_revision = "0005_request_fingerprint"
branch_labels = None
depends_on = None

NAME = 128
KEYS = "idempotency_keys"
NEW_KEY = ["tenant_id", "user_id", "scope", "request_id"]
OLD_KEY = ["tenant_id", "scope", "request_id"]
VERSION_TABLE = "alembic_version_canvas_store"
STORE_TABLES = ("store_meta", "tenants", "tenant_members", "canvases", "canvas_tags", "canvas_revisions",
                "canvas_templates", "sessions", KEYS, "runs", "run_steps", "run_events")
# The store's foreign keys (table, column, referred table): recreated under MariaDB's default name if an earlier,
# interrupted run of this migration dropped them before it could recreate them.
KNOWN_FOREIGN_KEYS = (("canvas_tags", "canvas_id", "canvases"), ("canvas_revisions", "canvas_id", "canvases"),
                      ("sessions", "canvas_id", "canvases"), ("run_steps", "run_id", "runs"),
                      ("run_events", "run_id", "runs"))
NO_PAD_BINARY = ("utf8mb4_nopad_bin", "utf8mb4_0900_bin")
"""Preferred collations, first available wins (MariaDB, MySQL 8)."""


def upgrade() -> None:
    bind = op.get_bind()
    if "user_id" not in {c["name"] for c in sa.inspect(bind).get_columns(KEYS)}:
        op.add_column(KEYS, sa.Column("user_id", sa.String(NAME), nullable=False, server_default=""))
    _backfill_user_ids()
    _set_primary_key(bind, NEW_KEY)
    if bind.dialect.name in ("mysql", "mariadb"):
        _convert_to_binary(bind)


def downgrade() -> None:
    bind = op.get_bind()
    _drop_rows_differing_only_by_user(bind)
    _set_primary_key(bind, OLD_KEY)
    with op.batch_alter_table(KEYS) as batch:
        batch.drop_column("user_id")


# ---- idempotency keys ----------------------------------------------------------------------------


def _backfill_user_ids() -> None:
    keys = sa.table(KEYS, sa.column("user_id"), sa.column("scope"), sa.column("resource_id"))
    for scope, table, column in (("canvas", "canvases", "owner_id"), ("run", "runs", "creator_id")):
        source = sa.table(table, sa.column("id"), sa.column(column))
        who = sa.select(source.c[column]).where(source.c.id == keys.c.resource_id).scalar_subquery()
        op.execute(keys.update().where(keys.c.scope == scope, keys.c.user_id == "")
                   .values(user_id=sa.func.coalesce(who, "")))


def _keys_table(primary_key: list[str], *, with_user: bool) -> sa.Table:
    """idempotency_keys as it is after 0005 (plus user_id), with `primary_key`: batch mode's copy_from on SQLite."""
    columns = [sa.Column("tenant_id", sa.String(NAME), nullable=False)]
    if with_user:
        columns.append(sa.Column("user_id", sa.String(NAME), nullable=False, server_default=""))
    columns += [
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("request_id", sa.String(64), nullable=False),
        sa.Column("resource_id", sa.String(32), nullable=False),
        sa.Column("create_time", sa.BigInteger, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False, server_default=""),
    ]
    return sa.Table(KEYS, sa.MetaData(), *columns, sa.PrimaryKeyConstraint(*primary_key),
                    sa.Index("ix_idempotency_create_time", "create_time"))


def _set_primary_key(bind: sa.engine.Connection, columns: list[str]) -> None:
    current = sa.inspect(bind).get_pk_constraint(KEYS)
    if list(current["constrained_columns"]) == columns:
        return
    dialect = bind.dialect.name
    if dialect == "sqlite":  # no ALTER for keys: rebuild the table around the new key
        with_user = "user_id" in {c["name"] for c in sa.inspect(bind).get_columns(KEYS)}
        with op.batch_alter_table(KEYS, recreate="always", copy_from=_keys_table(columns, with_user=with_user)):
            pass
    elif dialect == "postgresql":  # one transaction (PostgreSQL's DDL is transactional)
        op.drop_constraint(current["name"] or f"{KEYS}_pkey", KEYS, type_="primary")
        op.create_primary_key(f"{KEYS}_pkey", KEYS, columns)
    else:  # MySQL/MariaDB: one statement, so the table is never without a key
        op.execute(f"ALTER TABLE {KEYS} DROP PRIMARY KEY, ADD PRIMARY KEY ({', '.join(columns)})")


def _drop_rows_differing_only_by_user(bind: sa.engine.Connection) -> None:
    """Before the old key comes back: of keys that differ only in user_id, keep the one of the smallest user."""
    keys = sa.table(KEYS, *(sa.column(name) for name in NEW_KEY))
    groups = bind.execute(sa.select(keys.c.tenant_id, keys.c.scope, keys.c.request_id, sa.func.min(keys.c.user_id))
                          .group_by(keys.c.tenant_id, keys.c.scope, keys.c.request_id)
                          .having(sa.func.count() > 1)).all()
    for tenant_id, scope, request_id, keep in groups:
        bind.execute(keys.delete().where(keys.c.tenant_id == tenant_id, keys.c.scope == scope,
                                         keys.c.request_id == request_id, keys.c.user_id != keep))


# ---- MariaDB/MySQL: binary, NO PAD collation ---------------------------------------------------------


def binary_collation(bind: sa.engine.Connection) -> str:
    """The server's binary NO PAD utf8mb4 collation (utf8mb4_bin, which pads, only if there is none)."""
    available = set(bind.execute(sa.text(
        "SELECT COLLATION_NAME FROM information_schema.COLLATIONS WHERE CHARACTER_SET_NAME = 'utf8mb4'")).scalars())
    return next((name for name in NO_PAD_BINARY if name in available), "utf8mb4_bin")


def _convert_to_binary(bind: sa.engine.Connection) -> None:
    collation = binary_collation(bind)
    inspector = sa.inspect(bind)
    present = set(inspector.get_table_names())
    tables = [name for name in (*STORE_TABLES, VERSION_TABLE) if name in present]
    foreign_keys = {name: inspector.get_foreign_keys(name) for name in tables}
    for table, keys in foreign_keys.items():
        for fk in keys:
            op.execute(f"ALTER TABLE `{table}` DROP FOREIGN KEY `{fk['name']}`")
    for table in tables:
        op.execute(f"ALTER TABLE `{table}` CONVERT TO CHARACTER SET utf8mb4 COLLATE {collation}")
    for table, keys in foreign_keys.items():
        for fk in keys:
            options = fk.get("options") or {}
            op.create_foreign_key(fk["name"], table, fk["referred_table"], fk["constrained_columns"],
                                  fk["referred_columns"], ondelete=options.get("ondelete"),
                                  onupdate=options.get("onupdate"))
    for table, column, referred in KNOWN_FOREIGN_KEYS:
        if table in present and not any(fk["constrained_columns"] == [column] for fk in foreign_keys[table]):
            op.create_foreign_key(f"{table}_ibfk_1", table, referred, [column], ["id"], ondelete="CASCADE")
