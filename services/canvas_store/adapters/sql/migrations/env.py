"""Alembic environment for the canvas store. Always driven programmatically by migrate.upgrade():
the caller passes an open connection in config.attributes["connection"]."""

from __future__ import annotations

from alembic import context

from services.canvas_store.adapters.sql.models import Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    version_table="alembic_version_canvas_store",
)
with context.begin_transaction():
    context.run_migrations()
