"""`canvas_tags` holds each tag's case-insensitive key, so `tags:` filters match regardless of case.

A canvas's tags are de-duplicated case-insensitively ("AI" and "ai" are one tag), but the filter compared the
spelling exactly, so `tags:"ai"` missed a canvas tagged "AI". The index table now keeps the key (lower case,
one character for one, as the store folds titles); the canvas row keeps the spelling it was given, which is
what clients see. Existing rows are rewritten; a canvas whose tags fold to the same key keeps one row.

Downgrade leaves the keys in place: the spellings are still in `canvases.tags`, and a filter on a lower-case
spelling works as before.

Revision ID: 0007_tag_keys
Revises: 0006_idempotency_per_user
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_tag_keys"
down_revision = "0006_idempotency_per_user"
branch_labels = None
depends_on = None

_TAGS = sa.table("canvas_tags", sa.column("canvas_id", sa.String), sa.column("tag", sa.String))


def _key(tag: str) -> str:
    """The store's case key as of this revision (core.validation.case_key), frozen here."""
    key = tag.lower()
    return key if len(key) == len(tag) else "".join(char.lower()[0] for char in tag)


def upgrade() -> None:
    conn = op.get_bind()
    # Find the canvases to fix while streaming the table, rewrite them after the cursor is closed (writing
    # while it is open is not portable); they are few: only tags that are not already their own key.
    stale: dict[str, None] = {}
    result = conn.execute(sa.select(_TAGS.c.canvas_id, _TAGS.c.tag).execution_options(yield_per=10_000))
    for canvas_id, tag in result:
        if _key(tag) != tag:
            stale[canvas_id] = None
    result.close()
    for canvas_id in stale:
        tags = conn.execute(sa.select(_TAGS.c.tag).where(_TAGS.c.canvas_id == canvas_id)).scalars().all()
        conn.execute(sa.delete(_TAGS).where(_TAGS.c.canvas_id == canvas_id))
        conn.execute(sa.insert(_TAGS), [{"canvas_id": canvas_id, "tag": key}
                                        for key in dict.fromkeys(_key(tag) for tag in tags)])


def downgrade() -> None:
    pass
