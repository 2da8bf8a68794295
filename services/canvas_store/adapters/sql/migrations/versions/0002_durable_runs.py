"""Durable run state: runs (with lease columns and cancel flag), the step journal and persisted events.

Revision ID: 0002_durable_runs
Revises: 0001_canvases
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from services.canvas_store.adapters.sql.models import Json, LongBlob

revision = "0002_durable_runs"
down_revision = "0001_canvases"
branch_labels = None
depends_on = None

ID = 32
NAME = 128


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(ID), primary_key=True),
        sa.Column("tenant_id", sa.String(NAME), nullable=False),
        sa.Column("creator_id", sa.String(NAME), nullable=False),
        sa.Column("canvas_id", sa.String(ID), nullable=False),
        sa.Column("revision_id", sa.String(ID), nullable=False),
        sa.Column("session_id", sa.String(ID), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("spec", Json, nullable=False),
        sa.Column("outputs", Json, nullable=True),
        sa.Column("error", Json, nullable=True),
        sa.Column("usage", Json, nullable=True),
        sa.Column("last_seq", sa.BigInteger, nullable=False),
        sa.Column("step_count", sa.BigInteger, nullable=False),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
        sa.Column("lease_holder", sa.String(255), nullable=False),
        sa.Column("lease_token", sa.BigInteger, nullable=False),
        sa.Column("lease_expire_time", sa.BigInteger, nullable=False),
        sa.Column("create_time", sa.BigInteger, nullable=False),
        sa.Column("update_time", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_runs_status_lease", "runs", ["status", "lease_expire_time"])
    op.create_index("ix_runs_tenant_create", "runs", ["tenant_id", "create_time", "id"])
    op.create_index("ix_runs_session", "runs", ["session_id", "create_time"])
    op.create_table(
        "run_steps",
        sa.Column("run_id", sa.String(ID), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("step_index", sa.BigInteger, primary_key=True),
        sa.Column("node_id", sa.String(255), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("state", Json, nullable=False),
        sa.Column("create_time", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "run_events",
        sa.Column("run_id", sa.String(ID), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.BigInteger, primary_key=True),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("payload", LongBlob, nullable=False),
        sa.Column("terminal", sa.Boolean, nullable=False),
        sa.Column("create_time", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    for table in ("run_events", "run_steps", "runs"):
        op.drop_table(table)
