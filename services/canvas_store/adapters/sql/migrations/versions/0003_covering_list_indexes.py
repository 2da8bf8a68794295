"""Listing indexes that also carry owner_id and permission, so the visibility check and keyset paging of
ListCanvases are answered from the index alone (MariaDB otherwise reads every skipped row).

Revision ID: 0003_covering_list_indexes
Revises: 0002_durable_runs
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0003_covering_list_indexes"
down_revision = "0002_durable_runs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_canvases_list_update", "canvases", ["tenant_id", "update_time", "id", "owner_id", "permission"])
    op.create_index("ix_canvases_list_title", "canvases", ["tenant_id", "title", "id", "owner_id", "permission"])
    op.drop_index("ix_canvases_tenant_update", table_name="canvases")
    op.drop_index("ix_canvases_tenant_title", table_name="canvases")


def downgrade() -> None:
    op.create_index("ix_canvases_tenant_update", "canvases", ["tenant_id", "update_time", "id"])
    op.create_index("ix_canvases_tenant_title", "canvases", ["tenant_id", "title", "id"])
    op.drop_index("ix_canvases_list_update", table_name="canvases")
    op.drop_index("ix_canvases_list_title", table_name="canvases")
