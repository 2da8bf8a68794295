"""Soft delete of canvases (AIP-164): delete_time and expire_time (0 = live), an index for the purge, and the
covering list indexes extended by delete_time so hiding deleted canvases needs no row lookups.

Revision ID: 0004_soft_delete
Revises: 0003_covering_list_indexes
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_soft_delete"
down_revision = "0003_covering_list_indexes"
branch_labels = None
depends_on = None

_LIST = {"ix_canvases_list_update": "update_time", "ix_canvases_list_title": "title"}


def upgrade() -> None:
    op.add_column("canvases", sa.Column("delete_time", sa.BigInteger(), nullable=False, server_default="0"))
    op.add_column("canvases", sa.Column("expire_time", sa.BigInteger(), nullable=False, server_default="0"))
    op.create_index("ix_canvases_expire", "canvases", ["expire_time"])
    for name, key in _LIST.items():
        op.drop_index(name, table_name="canvases")
        op.create_index(name, "canvases", ["tenant_id", key, "id", "owner_id", "permission", "delete_time"])


def downgrade() -> None:
    for name, key in _LIST.items():
        op.drop_index(name, table_name="canvases")
        op.create_index(name, "canvases", ["tenant_id", key, "id", "owner_id", "permission"])
    op.drop_index("ix_canvases_expire", table_name="canvases")
    with op.batch_alter_table("canvases") as batch:  # SQLite drops columns by rebuilding the table
        batch.drop_column("expire_time")
        batch.drop_column("delete_time")
