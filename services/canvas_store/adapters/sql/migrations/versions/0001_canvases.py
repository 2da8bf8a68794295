"""Canvases, tags, revisions, templates, sessions, tenancy, idempotency keys, store metadata.

Revision ID: 0001_canvases
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from services.canvas_store.adapters.sql.models import Json, LongText

revision = "0001_canvases"
down_revision = None
branch_labels = None
depends_on = None

ID = 32
NAME = 128


def upgrade() -> None:
    op.create_table(
        "store_meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.create_table(
        "tenants",
        sa.Column("id", sa.String(NAME), primary_key=True),
        sa.Column("owner_id", sa.String(NAME), nullable=False),
        sa.Column("create_time", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "tenant_members",
        sa.Column("tenant_id", sa.String(NAME), primary_key=True),
        sa.Column("user_id", sa.String(NAME), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("create_time", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "canvases",
        sa.Column("id", sa.String(ID), primary_key=True),
        sa.Column("tenant_id", sa.String(NAME), nullable=False),
        sa.Column("owner_id", sa.String(NAME), nullable=False),
        sa.Column("title", sa.String(255), nullable=False),
        sa.Column("title_key", sa.String(255), nullable=False),
        sa.Column("description", LongText, nullable=False),
        sa.Column("avatar", LongText, nullable=False),
        sa.Column("permission", sa.String(8), nullable=False),
        sa.Column("release", sa.Boolean, nullable=False),
        sa.Column("category", sa.String(16), nullable=False),
        sa.Column("tags", Json, nullable=False),
        sa.Column("dsl", Json, nullable=False),
        sa.Column("etag", sa.String(32), nullable=False),
        sa.Column("head_revision_id", sa.String(ID), nullable=False),
        sa.Column("published_revision_id", sa.String(ID), nullable=False),
        sa.Column("revision_counter", sa.BigInteger, nullable=False),
        sa.Column("create_time", sa.BigInteger, nullable=False),
        sa.Column("update_time", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("tenant_id", "owner_id", "category", "title_key", name="uq_canvases_owner_title"),
    )
    op.create_index("ix_canvases_tenant_update", "canvases", ["tenant_id", "update_time", "id"])
    op.create_index("ix_canvases_tenant_title", "canvases", ["tenant_id", "title", "id"])
    op.create_table(
        "canvas_tags",
        sa.Column("canvas_id", sa.String(ID), sa.ForeignKey("canvases.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("tag", sa.String(64), primary_key=True),
    )
    op.create_index("ix_canvas_tags_tag", "canvas_tags", ["tag", "canvas_id"])
    op.create_table(
        "canvas_revisions",
        sa.Column("id", sa.String(ID), primary_key=True),
        sa.Column("canvas_id", sa.String(ID), sa.ForeignKey("canvases.id", ondelete="CASCADE"), nullable=False),
        sa.Column("tenant_id", sa.String(NAME), nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("dsl", Json, nullable=False),
        sa.Column("released", sa.Boolean, nullable=False),
        sa.Column("author_id", sa.String(NAME), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("create_time", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("canvas_id", "seq", name="uq_revisions_canvas_seq"),
    )
    op.create_index("ix_revisions_canvas_hash", "canvas_revisions", ["canvas_id", "content_hash"])
    op.create_table(
        "canvas_templates",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("title", Json, nullable=False),
        sa.Column("description", Json, nullable=False),
        sa.Column("canvas_type", sa.String(64), nullable=False),
        sa.Column("category", sa.String(16), nullable=False),
        sa.Column("avatar", LongText, nullable=False),
        sa.Column("dsl", Json, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("create_time", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(ID), primary_key=True),
        sa.Column("tenant_id", sa.String(NAME), nullable=False),
        sa.Column("canvas_id", sa.String(ID), sa.ForeignKey("canvases.id", ondelete="CASCADE"), nullable=False),
        sa.Column("revision_id", sa.String(ID), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("creator_id", sa.String(NAME), nullable=False),
        sa.Column("conversation_turns", sa.BigInteger, nullable=False),
        sa.Column("history", Json, nullable=False),
        sa.Column("state", Json, nullable=False),
        sa.Column("etag", sa.String(32), nullable=False),
        sa.Column("create_time", sa.BigInteger, nullable=False),
        sa.Column("update_time", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_sessions_canvas", "sessions", ["canvas_id", "create_time", "id"])
    op.create_index("ix_sessions_user", "sessions", ["tenant_id", "user_id", "create_time", "id"])
    op.create_index("ix_sessions_revision", "sessions", ["revision_id"])
    op.create_table(
        "idempotency_keys",
        sa.Column("tenant_id", sa.String(NAME), primary_key=True),
        sa.Column("scope", sa.String(16), primary_key=True),
        sa.Column("request_id", sa.String(64), primary_key=True),
        sa.Column("resource_id", sa.String(ID), nullable=False),
        sa.Column("create_time", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_idempotency_create_time", "idempotency_keys", ["create_time"])


def downgrade() -> None:
    for table in ("idempotency_keys", "sessions", "canvas_templates", "canvas_revisions", "canvas_tags",
                  "canvases", "tenant_members", "tenants", "store_meta"):
        op.drop_table(table)
