"""SQL repository for tenants, members, templates and store metadata."""

from __future__ import annotations

import secrets
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc

from services.canvas_store.adapters.sql.engine import Database
from services.canvas_store.adapters.sql.fastpath import PointRead
from services.canvas_store.adapters.sql.models import members, store_meta, templates, tenants
from services.canvas_store.core.dsl import content_hash
from services.canvas_store.core.ids import now_ms
from services.canvas_store.core.types import Category, Template, TenantMember, TenantRole
from services.common.errors import AbortedError

_TEMPLATE_SUMMARY = [c for c in templates.c if c.name not in ("dsl", "content_hash", "create_time")]


def template_from_row(row: Any) -> Template:
    m = row._mapping
    return Template(id=m["id"], title=dict(m["title"] or {}), description=dict(m["description"] or {}),
                    canvas_type=m["canvas_type"], category=Category(m["category"]), avatar=m["avatar"],
                    dsl=m.get("dsl"))


class TenantRepository:
    def __init__(self, db: Database):
        self._db = db
        # Every policy decision that involves a team reads this: one statement on the DBAPI fast path.
        self._role = PointRead(db, [members.c.role], members.c.tenant_id, members.c.user_id)

    def ensure_tenant(self, tenant_id: str, user_id: str) -> None:
        """Record the tenant on first sight: the first user becomes its owner, and so does a user whose id
        equals the tenant id. The tenants primary key decides races between first users."""
        with self._db.read() as conn:
            known = conn.execute(sa.select(tenants.c.owner_id).where(tenants.c.id == tenant_id)).scalar()
            if known is not None and (user_id != tenant_id or known == user_id):
                return
            if known is not None:
                has_row = conn.execute(sa.select(members.c.role).where(
                    members.c.tenant_id == tenant_id, members.c.user_id == user_id)).scalar()
                if has_row == TenantRole.OWNER.value:
                    return
        now = now_ms()
        try:
            with self._db.write() as conn:
                if known is None:
                    conn.execute(sa.insert(tenants).values(id=tenant_id, owner_id=user_id, create_time=now))
                    conn.execute(sa.insert(members).values(tenant_id=tenant_id, user_id=user_id,
                                                           role=TenantRole.OWNER.value, create_time=now))
                else:
                    updated = conn.execute(sa.update(members).where(
                        members.c.tenant_id == tenant_id, members.c.user_id == user_id).values(role=TenantRole.OWNER.value))
                    if updated.rowcount == 0:
                        conn.execute(sa.insert(members).values(tenant_id=tenant_id, user_id=user_id,
                                                               role=TenantRole.OWNER.value, create_time=now))
        except AbortedError as error:  # only the losing side of a first-user race lands here
            if not isinstance(error.__cause__, exc.IntegrityError):
                raise

    def role(self, tenant_id: str, user_id: str) -> TenantRole | None:
        found = self._role(tenant_id, user_id)
        return TenantRole(found["role"]) if found else None

    def add_member(self, tenant_id: str, user_id: str) -> TenantMember:
        """Idempotent: an existing member (or owner) is returned unchanged."""
        existing = self.role(tenant_id, user_id)
        if existing is not None:
            return TenantMember(tenant_id, user_id, existing)
        try:
            with self._db.write() as conn:
                conn.execute(sa.insert(members).values(tenant_id=tenant_id, user_id=user_id,
                                                       role=TenantRole.MEMBER.value, create_time=now_ms()))
        except AbortedError as error:  # a concurrent add of the same user
            if not isinstance(error.__cause__, exc.IntegrityError):
                raise
        return TenantMember(tenant_id, user_id, self.role(tenant_id, user_id) or TenantRole.MEMBER)

    def list_members(self, tenant_id: str) -> list[TenantMember]:
        with self._db.read() as conn:
            rows = conn.execute(sa.select(members.c.user_id, members.c.role).where(members.c.tenant_id == tenant_id)
                                .order_by(members.c.create_time, members.c.user_id)).all()
        return [TenantMember(tenant_id, row.user_id, TenantRole(row.role)) for row in rows]

    # ---- templates -------------------------------------------------------------------------------

    def seed_templates(self, bundled: list[Template]) -> int:
        """Insert new templates and refresh changed ones (by content hash). Returns how many were written.
        Store processes that start together must take turns (engine.migration_lock): the read-then-insert
        would race otherwise."""
        written = 0
        with self._db.write() as conn:
            stored = dict(conn.execute(sa.select(templates.c.id, templates.c.content_hash)).all())
            for template in bundled:
                digest = content_hash({"dsl": template.dsl, "title": template.title, "description": template.description,
                                       "canvas_type": template.canvas_type, "category": template.category.value,
                                       "avatar": template.avatar})
                values = dict(title=template.title, description=template.description, canvas_type=template.canvas_type,
                              category=template.category.value, avatar=template.avatar, dsl=template.dsl,
                              content_hash=digest)
                if template.id not in stored:
                    conn.execute(sa.insert(templates).values(id=template.id, create_time=now_ms(), **values))
                    written += 1
                elif stored[template.id] != digest:
                    conn.execute(sa.update(templates).where(templates.c.id == template.id).values(**values))
                    written += 1
        return written

    def list_templates(self, after_id: str | None, limit: int) -> list[Template]:
        query = sa.select(*_TEMPLATE_SUMMARY)
        if after_id is not None:
            query = query.where(templates.c.id > after_id)
        with self._db.read() as conn:
            rows = conn.execute(query.order_by(templates.c.id).limit(limit + 1)).all()
        return [template_from_row(row) for row in rows]

    def get_template(self, template_id: str) -> Template | None:
        with self._db.read() as conn:
            row = conn.execute(sa.select(templates).where(templates.c.id == template_id)).first()
        return template_from_row(row) if row else None

    # ---- metadata --------------------------------------------------------------------------------

    def page_token_secret(self) -> bytes:
        """The per-store HMAC secret, generated once and kept in store_meta (shared by all replicas)."""
        key = "page_token_secret"
        with self._db.read() as conn:
            value = conn.execute(sa.select(store_meta.c.value).where(store_meta.c.key == key)).scalar()
        if value is None:
            try:
                with self._db.write() as conn:
                    conn.execute(sa.insert(store_meta).values(key=key, value=secrets.token_hex(32)))
            except AbortedError as error:  # another replica generated it first
                if not isinstance(error.__cause__, exc.IntegrityError):
                    raise
            with self._db.read() as conn:
                value = conn.execute(sa.select(store_meta.c.value).where(store_meta.c.key == key)).scalar_one()
        return bytes.fromhex(value)
