"""SQL repository for conversation sessions."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from services.canvas_store.adapters.sql.canvas_repo import keyset_after
from services.canvas_store.adapters.sql.engine import Database
from services.canvas_store.adapters.sql.models import canvases, revisions, sessions
from services.canvas_store.core.ids import new_etag, now_ms
from services.canvas_store.core.policy import Kind, Target
from services.canvas_store.core.sessions import trim_history
from services.canvas_store.core.types import JsonObject, Permission, Session
from services.common.errors import AbortedError, NotFoundError

_SUMMARY = [c for c in sessions.c if c.name not in ("history", "state")]
_FACTS = [canvases.c.owner_id.label("canvas_owner_id"), canvases.c.permission.label("canvas_permission")]


def session_from_row(row: Any) -> Session:
    m = row._mapping
    return Session(id=m["id"], tenant_id=m["tenant_id"], canvas_id=m["canvas_id"], revision_id=m["revision_id"],
                   user_id=m["user_id"], creator_id=m["creator_id"], conversation_turns=m["conversation_turns"],
                   history=m.get("history"), state=m.get("state"), etag=m["etag"], create_time_ms=m["create_time"],
                   update_time_ms=m["update_time"])


def session_target(row: Any) -> Target:
    """Policy facts of a session: its tenant and creator plus its canvas's owner and permission."""
    m = row._mapping
    return Target(Kind.SESSION, m["tenant_id"], m["id"], owner_id=m["canvas_owner_id"],
                  permission=Permission(m["canvas_permission"]), creator_id=m["creator_id"])


class SessionRepository:
    def __init__(self, db: Database, history_max: int, history_max_bytes: int):
        self._db = db
        self._history_max = history_max
        self._history_max_bytes = history_max_bytes

    def insert(self, session: Session) -> Session:
        now = now_ms()
        session.create_time_ms = session.update_time_ms = now
        session.etag = new_etag()
        with self._db.write() as conn:
            # The canvas row is share-locked before the revision is checked: retention deletes drafts while
            # its writer holds that row, so the pinned revision cannot be pruned between the check and the
            # insert, and a prune that committed first is seen here (SQLite's write transaction excludes it).
            locking = conn.dialect.name != "sqlite"
            canvas = sa.select(canvases.c.id).where(canvases.c.id == session.canvas_id)
            if conn.execute(canvas.with_for_update(read=True) if locking else canvas).first() is None:
                raise NotFoundError(f"canvas {session.canvas_id!r} not found", resource_type="canvas",
                                    resource_name=session.canvas_id)  # deleted between the policy check and now
            revision = sa.select(revisions.c.id).where(revisions.c.id == session.revision_id,
                                                       revisions.c.canvas_id == session.canvas_id)
            if conn.execute(revision.with_for_update(read=True) if locking else revision).first() is None:
                raise NotFoundError(f"revision {session.revision_id!r} of canvas {session.canvas_id!r} not found "
                                    "(it never existed, or retention removed it as an older draft)",
                                    resource_type="revision", resource_name=session.revision_id)
            conn.execute(sa.insert(sessions).values(
                id=session.id, tenant_id=session.tenant_id, canvas_id=session.canvas_id,
                revision_id=session.revision_id, user_id=session.user_id, creator_id=session.creator_id,
                conversation_turns=0, history=session.history or [], state=session.state or {}, etag=session.etag,
                create_time=now, update_time=now))
        return session

    def get(self, session_id: str, *, full: bool = True) -> tuple[Session, Target] | None:
        columns = list(sessions.c) if full else _SUMMARY
        with self._db.read() as conn:
            row = conn.execute(sa.select(*columns, *_FACTS).join(canvases, canvases.c.id == sessions.c.canvas_id)
                               .where(sessions.c.id == session_id)).first()
        return (session_from_row(row), session_target(row)) if row else None

    def list(self, *, tenant_id: str, user_id: str, is_member: bool, canvas_id: str, end_user_id: str,
             after: list[Any] | None, limit: int) -> list[Session]:
        visible = canvases.c.owner_id == user_id
        if is_member:
            visible = sa.or_(visible, canvases.c.permission == Permission.TEAM.value)
        query = (sa.select(*_SUMMARY).join(canvases, canvases.c.id == sessions.c.canvas_id)
                 .where(sessions.c.tenant_id == tenant_id, visible))
        if canvas_id:
            query = query.where(sessions.c.canvas_id == canvas_id)
        if end_user_id:
            query = query.where(sessions.c.user_id == end_user_id)
        if after is not None:
            query = query.where(keyset_after(sessions.c.create_time, sessions.c.id, after, descending=True))
        query = query.order_by(sessions.c.create_time.desc(), sessions.c.id.desc()).limit(limit + 1)
        with self._db.read() as conn:
            return [session_from_row(row) for row in conn.execute(query).all()]

    def delete(self, session_id: str) -> None:
        with self._db.write() as conn:
            conn.execute(sa.delete(sessions).where(sessions.c.id == session_id))

    def append_turn(self, session_id: str, expected_etag: str | None, messages: list[JsonObject],
                    state: JsonObject | None) -> Session:
        """Append messages (history trimmed by `trim_history`), bump the turn count, maybe replace state.

        The row is locked and re-read in the transaction, so appends without an etag serialise and all land;
        with an etag, a concurrent turn that got there first makes this one ABORTED.
        """
        with self._db.write() as conn:
            query = sa.select(sessions).where(sessions.c.id == session_id)
            if conn.dialect.name != "sqlite":  # SQLite's write transaction already excludes other writers
                query = query.with_for_update()
            row = conn.execute(query).first()
            if row is None:
                raise NotFoundError(f"session {session_id!r} not found", resource_type="session", resource_name=session_id)
            current = session_from_row(row)
            if expected_etag and expected_etag != current.etag:
                raise AbortedError(f"session {session_id!r} changed concurrently (stale etag); re-read and retry",
                                   reason="ETAG_MISMATCH")
            history = trim_history(list(current.history or []), list(messages), self._history_max, self._history_max_bytes)
            values: dict[str, Any] = dict(history=history, conversation_turns=current.conversation_turns + 1,
                                          etag=new_etag(), update_time=now_ms())
            if state is not None:
                values["state"] = state
            result = conn.execute(sa.update(sessions).where(sessions.c.id == session_id,
                                                            sessions.c.etag == current.etag).values(**values))
            if result.rowcount != 1:
                raise AbortedError(f"session {session_id!r} changed concurrently; re-read and retry", reason="ETAG_MISMATCH")
        current.history = history
        current.conversation_turns = values["conversation_turns"]
        current.etag, current.update_time_ms = values["etag"], values["update_time"]
        if state is not None:
            current.state = state
        return current
