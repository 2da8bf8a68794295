"""SQL repository for canvases, tags and revisions. Each public method is one transaction.

Concurrency rule: every write to a canvas row is `UPDATE ... WHERE id = :id AND etag = :expected`; a
zero row count means another writer got there first and the whole transaction rolls back (ABORTED).
Nothing is ever read, modified in Python and blindly written back.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection

from services.canvas_store.adapters.sql.engine import Database
from services.canvas_store.adapters.sql.fastpath import ConditionalUpdate, PointRead
from services.canvas_store.adapters.sql.models import canvas_tags, canvases, idempotency_keys, revisions, sessions
from services.canvas_store.core.canvases import QUICK_PATHS, canvas_target, idempotent_resource_gone
from services.canvas_store.core.filters import CanvasFilter, Ordering
from services.canvas_store.core.ids import new_etag, new_id, now_ms
from services.canvas_store.core.policy import Action, Caller, permits
from services.canvas_store.core.validation import case_key, same_request
from services.canvas_store.core.types import Canvas, Category, DslChange, Permission, Revision
from services.common.errors import AbortedError, AlreadyExistsError, with_article
from services.common.lru import LRU

logger = logging.getLogger(__name__)

Prepare = Callable[[Canvas], tuple[dict[str, Any], DslChange | None]]
Replayable = Callable[[Canvas], bool]
"""Whether a replayed request_id may hand back the canvas it recorded: the caller could Get it now."""

_CANVAS_COLUMNS = [c for c in canvases.c if c.name not in ("title_key", "revision_counter")]
_SUMMARY_COLUMNS = [c for c in _CANVAS_COLUMNS if c.name != "dsl"]
QUICK_UPDATE_FIELDS = QUICK_PATHS
"""Fields `update_fields` may set (one set with the core): plain columns, no index/revision/tag side effects."""
_REVISION_SUMMARY = [c for c in revisions.c if c.name != "dsl"]

# Hot-path statements are built once: SQLAlchemy then skips coercion and cache-key work per call.
_GET_FULL = sa.select(canvases).where(canvases.c.id == sa.bindparam("b_id"))
_GET_SUMMARY = sa.select(*_SUMMARY_COLUMNS).where(canvases.c.id == sa.bindparam("b_id"))
_GET_FULL_LOCKED = _GET_FULL.with_for_update()
_COUNTER = sa.select(canvases.c.revision_counter).where(canvases.c.id == sa.bindparam("b_id"))
_HEAD_HASH = sa.select(revisions.c.content_hash).where(revisions.c.id == sa.bindparam("b_id"))
_CONDITIONAL_UPDATE = sa.update(canvases).where(canvases.c.id == sa.bindparam("b_id"),
                                                canvases.c.etag == sa.bindparam("b_etag"))


def canvas_from_row(row: Any) -> Canvas:
    return canvas_from_mapping(row._mapping)


def canvas_from_mapping(mapping: Any) -> Canvas:
    return Canvas(
        id=mapping["id"], tenant_id=mapping["tenant_id"], owner_id=mapping["owner_id"], title=mapping["title"],
        description=mapping["description"], avatar=mapping["avatar"], permission=Permission(mapping["permission"]),
        release=bool(mapping["release"]), category=Category(mapping["category"]), tags=list(mapping["tags"] or []),
        dsl=mapping.get("dsl"), etag=mapping["etag"], create_time_ms=mapping["create_time"],
        update_time_ms=mapping["update_time"], head_revision_id=mapping["head_revision_id"],
        published_revision_id=mapping["published_revision_id"], delete_time_ms=mapping["delete_time"],
        expire_time_ms=mapping["expire_time"],
    )


def revision_from_row(row: Any) -> Revision:
    mapping = row._mapping
    return Revision(
        id=mapping["id"], canvas_id=mapping["canvas_id"], tenant_id=mapping["tenant_id"],
        content_hash=mapping["content_hash"], seq=mapping["seq"], create_time_ms=mapping["create_time"],
        author_id=mapping["author_id"], description=mapping["description"], released=bool(mapping["released"]),
        dsl=mapping.get("dsl"),
    )


class CanvasRepository:
    def __init__(self, db: Database, keep_draft_revisions: int):
        self._db = db
        self._keep_drafts = keep_draft_revisions
        # The DSL a point read returns stays text: GetCanvas only hands it on, keyed by that text (StoredJson).
        self._point_read = PointRead(db, _CANVAS_COLUMNS, canvases.c.id, stored_json=("dsl",))
        # Only a real change matches: a no-op falls to the regular path, which keeps the etag (see _apply).
        self._quick_update = ConditionalUpdate(db, canvases, self._point_read, where=lambda t: t.c.delete_time == 0,
                                               changing=QUICK_UPDATE_FIELDS)
        self._list_statements: LRU[tuple[Any, ...], sa.Select] = LRU(64)
        self._list_lock = threading.Lock()

    # ---- reads -----------------------------------------------------------------------------------

    def get_canvas(self, canvas_id: str, *, with_dsl: bool = True) -> Canvas | None:
        if with_dsl:  # the GetCanvas hot path: one statement on the DBAPI fast path
            found = self._point_read(canvas_id)
            return canvas_from_mapping(found) if found is not None else None
        with self._db.read() as conn:
            row = conn.execute(_GET_SUMMARY, {"b_id": canvas_id}).first()
        return canvas_from_row(row) if row else None

    def find_idempotent(self, tenant_id: str, user_id: str, scope: str, request_id: str) -> tuple[str, str] | None:
        """(resource id, payload fingerprint) recorded for this user's request_id, or None.

        Keys are per (tenant, user): another user's identical request_id is another request."""
        with self._db.read() as conn:
            return self._idempotent(conn, tenant_id, user_id, scope, request_id)

    @staticmethod
    def _idempotent(conn: Connection, tenant_id: str, user_id: str, scope: str,
                    request_id: str) -> tuple[str, str] | None:
        row = conn.execute(
            sa.select(idempotency_keys.c.resource_id, idempotency_keys.c.fingerprint).where(
                idempotency_keys.c.tenant_id == tenant_id, idempotency_keys.c.user_id == user_id,
                idempotency_keys.c.scope == scope, idempotency_keys.c.request_id == request_id)
        ).first()
        return (row.resource_id, row.fingerprint) if row else None

    def _replay(self, conn: Connection, existing: tuple[str, str], fingerprint: str, replayable: Replayable) -> Canvas:
        """The recorded canvas, if the caller could Get it now; gone otherwise (deleted and invisible alike)."""
        same_request(existing[1], fingerprint)
        canvas = self._reload(conn, existing[0])
        if not replayable(canvas):
            raise idempotent_resource_gone("canvas")
        return canvas

    def list_canvases(self, *, tenant_id: str, user_id: str, is_member: bool, flt: CanvasFilter,
                      ordering: Ordering, after: list[Any] | None, limit: int,
                      show_deleted: bool = False,
                      changed_before: int | None = None) -> tuple[list[Canvas], list[Any] | None]:
        """Keyset page of visible canvases: up to `limit` canvases and the keyset position after the last of them
        ([sort key, id]), or None when no more canvases follow.

        On MySQL/MariaDB the page is found as ids first (answered from the covering list index) and the rows
        are fetched by id afterwards: its optimizer otherwise reads every skipped row in full. The position and
        whether more follow come from the first statement: under READ COMMITTED the second one may already see
        a later update_time (or title) of a row, and a position taken from it would skip every canvas in
        between; a row gone in between would have ended the walk early. The statement is
        built once per shape of request (which filters, how many tags, ordering, first page or not) with every
        value bound, and kept (64 shapes, least recently used dropped first). `changed_before`: only canvases
        whose update_time is before this (a walk's later pages, see CanvasService.list).
        """
        deferred = self._db.backend == "mysql"
        shape = (is_member, show_deleted, bool(flt.title), bool(flt.category), bool(flt.permission), bool(flt.owner),
                 tuple(len(group) for group in flt.tags_any), len(flt.tags_all), ordering.key, ordering.descending,
                 after is not None, changed_before is not None)
        with self._list_lock:
            query = self._list_statements.hit(shape)
        if query is None:
            query = _list_statement(deferred, shape)
            with self._list_lock:
                self._list_statements.keep(shape, query)
        params: dict[str, Any] = {"b_tenant": tenant_id, "b_user": user_id, "b_limit": limit + 1}
        if flt.title:
            params["b_title"] = "%" + _escape_like(case_key(flt.title)) + "%"
        if flt.category:
            params["b_category"] = flt.category.value
        if flt.permission:
            params["b_permission"] = flt.permission.value
        if flt.owner:
            params["b_owner"] = flt.owner
        for index, group in enumerate(flt.tags_any):
            params.update({f"b_any_{index}_{n}": case_key(tag) for n, tag in enumerate(group)})
        for index, tag in enumerate(flt.tags_all):
            params[f"b_all_{index}"] = case_key(tag)
        if after is not None:
            params["b_after_key"], params["b_after_id"] = after
        if changed_before is not None:
            params["b_changed_before"] = changed_before
        key = "update_time" if ordering.key == "update_time" else "title"
        with self._db.read() as conn:
            found = conn.execute(query, params).all()
            page = found[:limit]
            position = [page[-1]._mapping[key], page[-1].id] if len(found) > limit else None
            rows = page
            if deferred and page:
                ids = [row.id for row in page]
                by_id = {row.id: row for row in conn.execute(sa.select(*_SUMMARY_COLUMNS).where(canvases.c.id.in_(ids)))}
                rows = [by_id[canvas_id] for canvas_id in ids if canvas_id in by_id]
        return [canvas_from_row(row) for row in rows], position

    def get_revision(self, canvas_id: str, revision_id: str) -> Revision | None:
        with self._db.read() as conn:
            row = conn.execute(
                sa.select(revisions).where(revisions.c.id == revision_id, revisions.c.canvas_id == canvas_id)
            ).first()
        return revision_from_row(row) if row else None

    def list_revisions(self, canvas_id: str, after_seq: int | None, limit: int) -> list[Revision]:
        query = sa.select(*_REVISION_SUMMARY).where(revisions.c.canvas_id == canvas_id)
        if after_seq is not None:
            query = query.where(revisions.c.seq < after_seq)
        with self._db.read() as conn:
            rows = conn.execute(query.order_by(revisions.c.seq.desc()).limit(limit + 1)).all()
        return [revision_from_row(row) for row in rows]

    # ---- writes ----------------------------------------------------------------------------------

    def create_canvas(self, canvas: Canvas, change: DslChange, request_id: str, fingerprint: str = "",
                      replayable: Replayable | None = None) -> Canvas:
        """Insert the canvas, its first revision, tags and idempotency key; a replayed key returns the original.

        The key is (tenant, user = the new canvas's owner, "canvas", request_id). A replay hands back the
        recorded canvas only if `replayable` says the caller could Get it (default: the policy's answer for
        its owner); otherwise, or when it is gone, ABORTED IDEMPOTENT_RESOURCE_GONE, whatever the reason.
        A unique-key race resolves to the winner (same request_id) or ALREADY_EXISTS (same title); a deadlock
        victim (MySQL picks one when two inserts wait on each other) retries.
        """
        if replayable is None:
            owner = Caller(canvas.tenant_id, canvas.owner_id)
            replayable = lambda found: permits(owner, Action.READ, canvas_target(found))  # noqa: E731
        for attempt in range(3):
            try:
                return self._create_once(canvas, change, request_id, fingerprint, replayable)
            except AlreadyExistsError:
                # The title check saw a canvas committed after our key lookup: maybe our own twin request's.
                replayed = self._replay_if_recorded(canvas, request_id, fingerprint, replayable)
                if replayed is not None:
                    return replayed
                raise
            except AbortedError as error:
                replayed = self._replay_if_recorded(canvas, request_id, fingerprint, replayable)
                if replayed is not None:
                    return replayed
                if isinstance(error.__cause__, exc.IntegrityError):
                    raise self._title_taken(canvas) from None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _replay_if_recorded(self, canvas: Canvas, request_id: str, fingerprint: str,
                            replayable: Replayable) -> Canvas | None:
        """The canvas a committed twin of this request created, or None (no request_id, or none recorded)."""
        existing = self.find_idempotent(canvas.tenant_id, canvas.owner_id, "canvas", request_id) if request_id else None
        if existing is None:
            return None
        with self._db.read() as conn:
            return self._replay(conn, existing, fingerprint, replayable)

    def _create_once(self, canvas: Canvas, change: DslChange, request_id: str, fingerprint: str,
                     replayable: Replayable) -> Canvas:
        with self._db.write() as conn:
            if request_id:
                existing = self._idempotent(conn, canvas.tenant_id, canvas.owner_id, "canvas", request_id)
                if existing:
                    return self._replay(conn, existing, fingerprint, replayable)
            self._check_title_free(conn, canvas, exclude_id=None)
            revision_id = new_id()
            now = now_ms()
            conn.execute(sa.insert(canvases).values(
                id=canvas.id, tenant_id=canvas.tenant_id, owner_id=canvas.owner_id, title=canvas.title,
                title_key=case_key(canvas.title), description=canvas.description, avatar=canvas.avatar,
                permission=canvas.permission.value, release=canvas.release, category=canvas.category.value,
                tags=canvas.tags, dsl=change.dsl, etag=canvas.etag, head_revision_id=revision_id,
                published_revision_id="", revision_counter=1, create_time=now, update_time=now))
            conn.execute(sa.insert(revisions).values(
                id=revision_id, canvas_id=canvas.id, tenant_id=canvas.tenant_id, seq=1,
                content_hash=change.content_hash, dsl=change.dsl, released=False, author_id=change.author_id,
                description=change.description, create_time=now))
            self._write_tags(conn, canvas.id, canvas.tags, replace=False)
            if request_id:
                conn.execute(sa.insert(idempotency_keys).values(
                    tenant_id=canvas.tenant_id, user_id=canvas.owner_id, scope="canvas", request_id=request_id,
                    resource_id=canvas.id, create_time=now, fingerprint=fingerprint))
            canvas.head_revision_id = revision_id
            canvas.create_time_ms = canvas.update_time_ms = now
            return canvas

    def update_canvas(self, current: Canvas, expected_etag: str, changes: dict[str, Any],
                      change: DslChange | None) -> Canvas:
        """Apply `changes` (attribute -> value) and an optional DSL change if the etag still matches."""
        with self._db.write() as conn:
            return self._apply(conn, current, expected_etag, changes, change)

    def update_fields(self, canvas_id: str, expected_etag: str, changes: dict[str, Any]) -> Canvas | None:
        """Set plain fields (QUICK_UPDATE_FIELDS) with one conditional UPDATE ... RETURNING on the fast path,
        for callers that decided on facts tied to `expected_etag`. None when no row matched (unknown id, stale
        etag, deleted): the caller finds out which on the regular path."""
        assert changes and frozenset(changes) <= QUICK_UPDATE_FIELDS, changes
        row = self._quick_update(canvas_id, expected_etag, {**changes, "etag": new_etag(), "update_time": now_ms()})
        return canvas_from_mapping(row) if row is not None else None

    def update_canvas_locked(self, canvas_id: str, prepare: Prepare) -> Canvas | None:
        """Read the canvas with its row locked, let `prepare` (the core's rules) decide the change, apply it.

        One transaction: the row cannot change between the policy check and the write. `prepare` returns
        (changes, dsl_change) or raises. Returns None when the canvas does not exist.
        """
        with self._db.write() as conn:
            row = conn.execute(_GET_FULL if conn.dialect.name == "sqlite" else _GET_FULL_LOCKED, {"b_id": canvas_id}).first()
            if row is None:
                return None
            current = canvas_from_row(row)
            changes, change = prepare(current)
            return self._apply(conn, current, current.etag, changes, change)

    def _apply(self, conn: Connection, current: Canvas, expected_etag: str, changes: dict[str, Any],
               change: DslChange | None) -> Canvas:
        """Write the change; one that changes nothing (every field as it is, the head's own DSL) writes nothing
        and keeps the etag, so a client that saves twice, or rolls back to the head, sees no change."""
        new_dsl = change is not None and conn.execute(
            _HEAD_HASH, {"b_id": current.head_revision_id}).scalar() != change.content_hash
        if not new_dsl and all(getattr(current, key) == value for key, value in changes.items()):
            if expected_etag != current.etag:
                raise AbortedError(f"canvas {current.id!r} has changed since etag {expected_etag!r} was read; "
                                   "re-read and retry", reason="ETAG_MISMATCH")
            return dataclasses.replace(current)
        now = now_ms()
        values = {key: value.value if isinstance(value, enum.Enum) else value for key, value in changes.items()}
        etag = new_etag()
        values.update(etag=etag, update_time=now)
        if "title" in values:
            values["title_key"] = case_key(values["title"])
        new_revision_id = ""
        if "title" in values and values["title_key"] != case_key(current.title):
            probe = Canvas(**{**current.__dict__, "title": values["title"]})
            self._check_title_free(conn, probe, exclude_id=current.id)
        if change is not None:
            values["dsl"] = change.dsl
            if new_dsl:
                new_revision_id = new_id()
                values["head_revision_id"] = new_revision_id
                values["revision_counter"] = current_counter = conn.execute(
                    _COUNTER, {"b_id": current.id}).scalar_one() + 1
        result = conn.execute(_CONDITIONAL_UPDATE, {"b_id": current.id, "b_etag": expected_etag, **values})
        if result.rowcount != 1:
            raise AbortedError(f"canvas {current.id!r} was changed concurrently (stale etag); re-read and retry",
                               reason="ETAG_MISMATCH")
        if "tags" in values:
            self._write_tags(conn, current.id, values["tags"], replace=True)
        if new_revision_id and change is not None:
            conn.execute(sa.insert(revisions).values(
                id=new_revision_id, canvas_id=current.id, tenant_id=current.tenant_id, seq=current_counter,
                content_hash=change.content_hash, dsl=change.dsl, released=False, author_id=change.author_id,
                description=change.description, create_time=now))
            self._prune(conn, current.id, new_revision_id, current.published_revision_id)
        updated = Canvas(**{**current.__dict__})
        for key, value in changes.items():
            setattr(updated, key, value)
        if change is not None:
            updated.dsl = change.dsl
        if new_revision_id:
            updated.head_revision_id = new_revision_id
        updated.etag, updated.update_time_ms = etag, now
        return updated

    def publish(self, current: Canvas, expected_etag: str, revision_id: str) -> str:
        """Mark the revision released and make it the published alias; returns the canvas's new etag."""
        etag = new_etag()
        with self._db.write() as conn:
            result = conn.execute(sa.update(canvases).where(
                canvases.c.id == current.id, canvases.c.etag == expected_etag).values(
                published_revision_id=revision_id, release=True, etag=etag, update_time=now_ms()))
            if result.rowcount != 1:
                raise AbortedError(f"canvas {current.id!r} was changed concurrently (stale etag); re-read and retry",
                                   reason="ETAG_MISMATCH")
            conn.execute(sa.update(revisions).where(revisions.c.id == revision_id).values(released=True))
        return etag

    def set_deleted(self, current: Canvas, expected_etag: str, delete_time_ms: int, expire_time_ms: int) -> Canvas:
        """Soft delete (times > 0) or undelete (times 0) if the etag still matches; the changed canvas.

        update_time is left alone: an undeleted canvas comes back where it was in update_time order.
        """
        etag = new_etag()
        with self._db.write() as conn:
            result = conn.execute(sa.update(canvases).where(
                canvases.c.id == current.id, canvases.c.etag == expected_etag).values(
                delete_time=delete_time_ms, expire_time=expire_time_ms, etag=etag))
            if result.rowcount != 1:
                raise AbortedError(f"canvas {current.id!r} was changed concurrently (stale etag); re-read and retry",
                                   reason="ETAG_MISMATCH")
        return dataclasses.replace(current, etag=etag, delete_time_ms=delete_time_ms, expire_time_ms=expire_time_ms)

    def purge_expired(self, now_ms: int, batch: int = 100) -> int:
        """Hard-delete up to `batch` soft-deleted canvases whose expire_time has passed, with their sessions,
        revisions and tags; returns how many went. One transaction per batch. A canvas undeleted meanwhile
        is skipped: the delete re-checks expire_time."""
        with self._db.write() as conn:
            due = sa.select(canvases.c.id).where(canvases.c.expire_time > 0, canvases.c.expire_time <= now_ms)
            if conn.dialect.name != "sqlite":  # lock them: a concurrent undelete waits instead of losing its children
                due = due.with_for_update()
            ids = list(conn.execute(due.order_by(canvases.c.expire_time).limit(batch)).scalars())
            if not ids:
                return 0
            conn.execute(sa.delete(sessions).where(sessions.c.canvas_id.in_(ids)))
            conn.execute(sa.delete(revisions).where(revisions.c.canvas_id.in_(ids)))
            conn.execute(sa.delete(canvas_tags).where(canvas_tags.c.canvas_id.in_(ids)))
            return conn.execute(sa.delete(canvases).where(
                canvases.c.id.in_(ids), canvases.c.expire_time > 0, canvases.c.expire_time <= now_ms)).rowcount

    def prune_idempotency_keys(self, older_than_ms: int) -> int:
        with self._db.write() as conn:
            return conn.execute(sa.delete(idempotency_keys).where(idempotency_keys.c.create_time < older_than_ms)).rowcount

    # ---- helpers ---------------------------------------------------------------------------------

    def _reload(self, conn: Connection, canvas_id: str) -> Canvas:
        row = conn.execute(sa.select(canvases).where(canvases.c.id == canvas_id)).first()
        if row is None:
            raise idempotent_resource_gone("canvas")
        return canvas_from_row(row)

    @staticmethod
    def _title_taken(canvas: Canvas) -> AlreadyExistsError:
        return AlreadyExistsError(
            f"{with_article(canvas.category.value.lower())} canvas titled {canvas.title!r} already exists for this owner",
            reason="CANVAS_TITLE_TAKEN", metadata={"field": "canvas.title"})

    def _check_title_free(self, conn: Connection, canvas: Canvas, exclude_id: str | None) -> None:
        query = sa.select(canvases.c.id).where(
            canvases.c.tenant_id == canvas.tenant_id, canvases.c.owner_id == canvas.owner_id,
            canvases.c.category == canvas.category.value, canvases.c.title_key == case_key(canvas.title))
        if exclude_id:
            query = query.where(canvases.c.id != exclude_id)
        if conn.execute(query.limit(1)).first() is not None:
            raise self._title_taken(canvas)

    @staticmethod
    def _write_tags(conn: Connection, canvas_id: str, tags: list[str], *, replace: bool) -> None:
        if replace:
            conn.execute(sa.delete(canvas_tags).where(canvas_tags.c.canvas_id == canvas_id))
        if tags:
            # The key, not the spelling: `tags:` filters match regardless of case (the canvas row keeps the spelling).
            keys = dict.fromkeys(case_key(tag) for tag in tags)
            conn.execute(sa.insert(canvas_tags), [{"canvas_id": canvas_id, "tag": key} for key in keys])

    def _prune(self, conn: Connection, canvas_id: str, head_id: str, published_id: str) -> None:
        """Retention: keep released revisions, the head, the published one, revisions pinned by sessions,
        and the newest `keep_draft_revisions` drafts; delete older drafts."""
        cutoff = conn.execute(
            sa.select(revisions.c.seq).where(revisions.c.canvas_id == canvas_id, revisions.c.released == sa.false())
            .order_by(revisions.c.seq.desc()).offset(self._keep_drafts - 1).limit(1)
        ).scalar()
        if cutoff is None:
            return
        pinned = sa.select(sessions.c.revision_id).where(sessions.c.canvas_id == canvas_id)
        result = conn.execute(sa.delete(revisions).where(
            revisions.c.canvas_id == canvas_id, revisions.c.released == sa.false(), revisions.c.seq < cutoff,
            revisions.c.id.notin_([head_id, published_id or head_id]), revisions.c.id.notin_(pinned)))
        if result.rowcount:
            logger.debug("pruned %d draft revisions of canvas %s", result.rowcount, canvas_id)


def _list_statement(deferred: bool, shape: tuple[Any, ...]) -> sa.Select:
    """The ListCanvases query for one shape of request, every value a bound parameter (see list_canvases).

    Why cached per shape: building the expression and its cache key costs SQLAlchemy ~0.7 ms per page,
    about as much as the indexed query itself. Names: b_tenant, b_user, b_title, b_category, b_permission,
    b_owner, b_any_<group>_<n>, b_all_<n>, b_after_key, b_after_id, b_changed_before, b_limit.
    """
    (is_member, show_deleted, title, category, permission, owner, any_sizes, all_count, order_key, descending,
     paged, bounded) = shape
    visible = canvases.c.owner_id == sa.bindparam("b_user")
    if is_member:
        visible = sa.or_(visible, canvases.c.permission == Permission.TEAM.value)
    key = canvases.c.update_time if order_key == "update_time" else canvases.c.title
    query = sa.select(*([canvases.c.id, key] if deferred else _SUMMARY_COLUMNS)).where(
        canvases.c.tenant_id == sa.bindparam("b_tenant"), visible)
    if not show_deleted:
        query = query.where(canvases.c.delete_time == 0)
    if title:
        query = query.where(canvases.c.title_key.like(sa.bindparam("b_title"), escape="\\"))
    if category:
        query = query.where(canvases.c.category == sa.bindparam("b_category"))
    if permission:
        query = query.where(canvases.c.permission == sa.bindparam("b_permission"))
    if owner:
        query = query.where(canvases.c.owner_id == sa.bindparam("b_owner"))
    for index, size in enumerate(any_sizes):
        members = [sa.bindparam(f"b_any_{index}_{n}") for n in range(size)]
        query = query.where(sa.exists().where(canvas_tags.c.canvas_id == canvases.c.id, canvas_tags.c.tag.in_(members)))
    for index in range(all_count):
        query = query.where(sa.exists().where(canvas_tags.c.canvas_id == canvases.c.id,
                                              canvas_tags.c.tag == sa.bindparam(f"b_all_{index}")))
    if bounded:
        query = query.where(canvases.c.update_time < sa.bindparam("b_changed_before", type_=canvases.c.update_time.type))
    if paged:
        query = query.where(keyset_after(key, canvases.c.id, [sa.bindparam("b_after_key", type_=key.type),
                                                              sa.bindparam("b_after_id", type_=canvases.c.id.type)],
                                         descending=descending))
    if descending:
        query = query.order_by(key.desc(), canvases.c.id.desc())
    else:
        query = query.order_by(key.asc(), canvases.c.id.asc())
    return query.limit(sa.bindparam("b_limit", type_=sa.Integer))


def keyset_after(key: Any, tiebreak: Any, after: list[Any], *, descending: bool) -> Any:
    """Rows strictly after (key, tiebreak) in the given order.

    The redundant bound on `key` alone lets every backend use the (tenant, key, id) index as a range; the
    OR part then only refines the boundary value (a plain OR would make PostgreSQL scan from the start).
    """
    last_key, last_id = after
    if descending:
        return sa.and_(key <= last_key, sa.or_(key < last_key, tiebreak < last_id))
    return sa.and_(key >= last_key, sa.or_(key > last_key, tiebreak > last_id))


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
