"""SQLAlchemy 2 models of the canvas store.

The migrations under migrations/versions/ create exactly these tables; tests compare the two.

Portable choices (SQLite, PostgreSQL, MariaDB/MySQL):
- Times are BIGINT milliseconds since the epoch: no time-zone or fractional-second differences between
  backends, and lease arithmetic stays integer.
- JSON columns use the database's JSON type (PostgreSQL json, MySQL JSON, MariaDB JSON = LONGTEXT with
  a validity check, SQLite JSON affinity). PostgreSQL `json` (not `jsonb`) keeps the key order of DSLs.
- Long text and binary use LONGTEXT/LONGBLOB on MySQL, whose plain TEXT/BLOB stop at 64 KiB.
- Identifier columns are VARCHAR(128) so that composite unique keys fit InnoDB's 3072-byte limit.
- Text compares exactly on every backend. SQLite (BINARY) and PostgreSQL (deterministic collations) do so
  anyway; on MariaDB every table uses utf8mb4_nopad_bin (TABLE_OPTIONS; migration 0006 converts existing
  tables, MySQL 8 gets utf8mb4_0900_bin there), because the server default utf8mb4_*_ci collations are
  case-, accent- and trailing-space-insensitive: tenant "ACME" would match "acme", request id "a" match "A "
  and "a". A migration that creates a table passes **TABLE_OPTIONS to op.create_table.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

ID_LEN = 32
NAME_LEN = 128

LongText = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")
LongBlob = sa.LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb")
Json = sa.JSON().with_variant(mysql.JSON(), "mysql", "mariadb")


BINARY_COLLATION = "utf8mb4_nopad_bin"
"""MariaDB's binary, NO PAD utf8mb4 collation (utf8mb4_bin is PAD SPACE: "a" = "a ")."""
TABLE_OPTIONS = {"mysql_charset": "utf8mb4", "mysql_collate": BINARY_COLLATION,
                 "mariadb_charset": "utf8mb4", "mariadb_collate": BINARY_COLLATION}
"""Table options of every store table (ignored by SQLite and PostgreSQL)."""


class Base(DeclarativeBase):
    pass


class StoreMeta(Base):
    """Store-wide key/value settings, e.g. the generated page-token secret."""

    __tablename__ = "store_meta"
    __table_args__ = TABLE_OPTIONS
    key: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    value: Mapped[str] = mapped_column(sa.Text, nullable=False)


class TenantRow(Base):
    """One row per tenant the store has seen; the primary key makes "first user becomes owner" race-free."""

    __tablename__ = "tenants"
    __table_args__ = TABLE_OPTIONS
    id: Mapped[str] = mapped_column(sa.String(NAME_LEN), primary_key=True)
    owner_id: Mapped[str] = mapped_column(sa.String(NAME_LEN), nullable=False)
    create_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)


class TenantMemberRow(Base):
    __tablename__ = "tenant_members"
    __table_args__ = TABLE_OPTIONS
    tenant_id: Mapped[str] = mapped_column(sa.String(NAME_LEN), primary_key=True)
    user_id: Mapped[str] = mapped_column(sa.String(NAME_LEN), primary_key=True)
    role: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    create_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)


class CanvasRow(Base):
    __tablename__ = "canvases"
    id: Mapped[str] = mapped_column(sa.String(ID_LEN), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(sa.String(NAME_LEN), nullable=False)
    owner_id: Mapped[str] = mapped_column(sa.String(NAME_LEN), nullable=False)
    title: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    # Lower-cased title: case-insensitive uniqueness and substring search on every backend.
    title_key: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    description: Mapped[str] = mapped_column(LongText, nullable=False, default="")
    avatar: Mapped[str] = mapped_column(LongText, nullable=False, default="")
    permission: Mapped[str] = mapped_column(sa.String(8), nullable=False)
    release: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=False)
    category: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    tags: Mapped[list] = mapped_column(Json, nullable=False)
    dsl: Mapped[dict] = mapped_column(Json, nullable=False)
    etag: Mapped[str] = mapped_column(sa.String(32), nullable=False)
    head_revision_id: Mapped[str] = mapped_column(sa.String(ID_LEN), nullable=False, default="")
    published_revision_id: Mapped[str] = mapped_column(sa.String(ID_LEN), nullable=False, default="")
    revision_counter: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, default=0)
    create_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    update_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    # Soft delete (AIP-164, 0004): 0 while live; expire_time is when the purge removes the row for good.
    delete_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, default=0, server_default="0")
    expire_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, default=0, server_default="0")

    __table_args__ = (
        # Deleted canvases keep their title reserved, so an undelete never collides.
        sa.UniqueConstraint("tenant_id", "owner_id", "category", "title_key", name="uq_canvases_owner_title"),
        # Cover the visibility and deleted checks too, so keyset pages can be found from the index alone
        # (0003, delete_time since 0004).
        sa.Index("ix_canvases_list_update", "tenant_id", "update_time", "id", "owner_id", "permission", "delete_time"),
        sa.Index("ix_canvases_list_title", "tenant_id", "title", "id", "owner_id", "permission", "delete_time"),
        sa.Index("ix_canvases_expire", "expire_time"),
        TABLE_OPTIONS,
    )


class CanvasTagRow(Base):
    """Tags again, one row each, so tag filters are indexed joins instead of JSON functions."""

    __tablename__ = "canvas_tags"
    canvas_id: Mapped[str] = mapped_column(
        sa.String(ID_LEN), sa.ForeignKey("canvases.id", ondelete="CASCADE"), primary_key=True
    )
    tag: Mapped[str] = mapped_column(sa.String(64), primary_key=True)

    __table_args__ = (sa.Index("ix_canvas_tags_tag", "tag", "canvas_id"), TABLE_OPTIONS)


class RevisionRow(Base):
    __tablename__ = "canvas_revisions"
    id: Mapped[str] = mapped_column(sa.String(ID_LEN), primary_key=True)
    canvas_id: Mapped[str] = mapped_column(
        sa.String(ID_LEN), sa.ForeignKey("canvases.id", ondelete="CASCADE"), nullable=False
    )
    tenant_id: Mapped[str] = mapped_column(sa.String(NAME_LEN), nullable=False)
    seq: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    content_hash: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    dsl: Mapped[dict] = mapped_column(Json, nullable=False)
    released: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=False)
    author_id: Mapped[str] = mapped_column(sa.String(NAME_LEN), nullable=False, default="")
    description: Mapped[str] = mapped_column(sa.Text, nullable=False, default="")
    create_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)

    __table_args__ = (
        sa.UniqueConstraint("canvas_id", "seq", name="uq_revisions_canvas_seq"),
        sa.Index("ix_revisions_canvas_hash", "canvas_id", "content_hash"),
        TABLE_OPTIONS,
    )


class TemplateRow(Base):
    __tablename__ = "canvas_templates"
    __table_args__ = TABLE_OPTIONS
    id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    title: Mapped[dict] = mapped_column(Json, nullable=False)
    description: Mapped[dict] = mapped_column(Json, nullable=False)
    canvas_type: Mapped[str] = mapped_column(sa.String(64), nullable=False, default="")
    category: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    avatar: Mapped[str] = mapped_column(LongText, nullable=False, default="")
    dsl: Mapped[dict] = mapped_column(Json, nullable=False)
    content_hash: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    create_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)


class SessionRow(Base):
    __tablename__ = "sessions"
    id: Mapped[str] = mapped_column(sa.String(ID_LEN), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(sa.String(NAME_LEN), nullable=False)
    canvas_id: Mapped[str] = mapped_column(
        sa.String(ID_LEN), sa.ForeignKey("canvases.id", ondelete="CASCADE"), nullable=False
    )
    revision_id: Mapped[str] = mapped_column(sa.String(ID_LEN), nullable=False)
    user_id: Mapped[str] = mapped_column(sa.String(255), nullable=False, default="")
    creator_id: Mapped[str] = mapped_column(sa.String(NAME_LEN), nullable=False)
    conversation_turns: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, default=0)
    history: Mapped[list] = mapped_column(Json, nullable=False)
    state: Mapped[dict] = mapped_column(Json, nullable=False)
    etag: Mapped[str] = mapped_column(sa.String(32), nullable=False)
    create_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    update_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)

    __table_args__ = (
        sa.Index("ix_sessions_canvas", "canvas_id", "create_time", "id"),
        sa.Index("ix_sessions_user", "tenant_id", "user_id", "create_time", "id"),
        sa.Index("ix_sessions_revision", "revision_id"),
        TABLE_OPTIONS,
    )


class IdempotencyKeyRow(Base):
    """request_id -> created resource, per tenant, user and scope ("canvas", "run"). Pruned after a TTL.

    The user is part of the key (0006): another user of the tenant who sends the same request_id makes a
    request of their own instead of getting (and, for runs, leasing) someone else's resource back.
    """

    __tablename__ = "idempotency_keys"
    tenant_id: Mapped[str] = mapped_column(sa.String(NAME_LEN), primary_key=True)
    # The caller's user id (canvas owner, run creator); '' for keys from before 0006 whose resource was gone.
    user_id: Mapped[str] = mapped_column(sa.String(NAME_LEN), primary_key=True, server_default="")
    scope: Mapped[str] = mapped_column(sa.String(16), primary_key=True)
    request_id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    resource_id: Mapped[str] = mapped_column(sa.String(ID_LEN), nullable=False)
    create_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    # SHA-256 of the request's payload (0005): a reused request_id with another payload is refused.
    # Empty for keys written before 0005, which are trusted as before.
    fingerprint: Mapped[str] = mapped_column(sa.String(64), nullable=False, default="", server_default="")

    __table_args__ = (sa.Index("ix_idempotency_create_time", "create_time"), TABLE_OPTIONS)


class RunRow(Base):
    """A run plus its lease (holder, fencing token, expiry) and cancel flag, so one row lock fences a commit."""

    __tablename__ = "runs"
    id: Mapped[str] = mapped_column(sa.String(ID_LEN), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(sa.String(NAME_LEN), nullable=False)
    creator_id: Mapped[str] = mapped_column(sa.String(NAME_LEN), nullable=False)
    canvas_id: Mapped[str] = mapped_column(sa.String(ID_LEN), nullable=False, default="")
    revision_id: Mapped[str] = mapped_column(sa.String(ID_LEN), nullable=False, default="")
    session_id: Mapped[str] = mapped_column(sa.String(ID_LEN), nullable=False, default="")
    status: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    spec: Mapped[dict] = mapped_column(Json, nullable=False)
    outputs: Mapped[dict | None] = mapped_column(Json, nullable=True)
    error: Mapped[dict | None] = mapped_column(Json, nullable=True)
    usage: Mapped[dict | None] = mapped_column(Json, nullable=True)
    last_seq: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, default=0)
    step_count: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, default=0)
    cancel_requested: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=False)
    lease_holder: Mapped[str] = mapped_column(sa.String(255), nullable=False, default="")
    lease_token: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, default=0)
    lease_expire_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, default=0)
    create_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    update_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)

    __table_args__ = (
        sa.Index("ix_runs_status_lease", "status", "lease_expire_time"),
        sa.Index("ix_runs_tenant_create", "tenant_id", "create_time", "id"),
        sa.Index("ix_runs_session", "session_id", "create_time"),
        TABLE_OPTIONS,
    )


class RunStepRow(Base):
    """The checkpoint journal: one row per committed node completion."""

    __tablename__ = "run_steps"
    __table_args__ = TABLE_OPTIONS
    run_id: Mapped[str] = mapped_column(sa.String(ID_LEN), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    step_index: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)
    node_id: Mapped[str] = mapped_column(sa.String(255), nullable=False, default="")
    attempt: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    state: Mapped[dict] = mapped_column(Json, nullable=False)
    create_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)


class RunEventRow(Base):
    """Persisted events; (run_id, seq) is the primary key, so a seq can never be written twice."""

    __tablename__ = "run_events"
    __table_args__ = TABLE_OPTIONS
    run_id: Mapped[str] = mapped_column(sa.String(ID_LEN), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)
    event_type: Mapped[str] = mapped_column(sa.String(64), nullable=False, default="")
    payload: Mapped[bytes] = mapped_column(LongBlob, nullable=False)
    terminal: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=False)
    create_time: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)


canvases = CanvasRow.__table__
canvas_tags = CanvasTagRow.__table__
revisions = RevisionRow.__table__
templates = TemplateRow.__table__
sessions = SessionRow.__table__
tenants = TenantRow.__table__
members = TenantMemberRow.__table__
idempotency_keys = IdempotencyKeyRow.__table__
store_meta = StoreMeta.__table__
runs = RunRow.__table__
run_steps = RunStepRow.__table__
run_events = RunEventRow.__table__
