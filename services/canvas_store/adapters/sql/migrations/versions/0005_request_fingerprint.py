"""A payload fingerprint next to each request_id, so a reused request_id with a different payload is refused
(INVALID_ARGUMENT, REQUEST_ID_REUSED) instead of silently returning the first result. Keys written before
this revision keep an empty fingerprint and are trusted as before.

Revision ID: 0005_request_fingerprint
Revises: 0004_soft_delete
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_request_fingerprint"
down_revision = "0004_soft_delete"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("idempotency_keys", sa.Column("fingerprint", sa.String(64), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("idempotency_keys") as batch:
        batch.drop_column("fingerprint")
