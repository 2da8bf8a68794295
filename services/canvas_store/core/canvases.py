"""Use cases for canvases, revisions and templates. Synchronous: the server runs them on the DB thread pool."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from services.canvas_store.core import validation
from services.canvas_store.core.dsl import canonical_json, content_hash, detect_category, validate_dsl
from services.canvas_store.core.filters import parse_filter, parse_order_by
from services.canvas_store.core.ids import new_etag, new_id, now_ms
from services.canvas_store.core.page_tokens import PageTokenCodec
from services.canvas_store.core.policy import Action, Caller, Kind, Target, authorize, permits
from services.canvas_store.core.types import (
    Canvas, Category, DslChange, JsonObject, Page, Permission, Revision, Template,
)
from services.common.errors import (
    AbortedError, AlreadyExistsError, FailedPreconditionError, InvalidArgumentError, NotFoundError, PermissionDeniedError,
)
from services.common.lru import LRU

logger = logging.getLogger(__name__)

LATEST = "latest"
PUBLISHED = "published"
QUICK_PATHS = frozenset({"description", "avatar"})
"""Update masks within these take the single-statement path (`_quick_update`)."""


def is_quick_mask(paths: Iterable[str]) -> bool:
    """Whether an update mask names fields and only QUICK_PATHS ones (the server runs those calls loop-first)."""
    named = frozenset(paths)
    return bool(named) and named <= QUICK_PATHS

_FACTS_MAX = 4096


@dataclass
class CanvasInput:
    """The client-settable fields of a canvas; None means "not given"."""

    title: str = ""
    description: str = ""
    avatar: str = ""
    permission: Permission | None = None
    release: bool = False
    category: Category | None = None
    tags: list[str] = field(default_factory=list)
    dsl: JsonObject | None = None
    etag: str = ""


def canvas_target(canvas: Canvas) -> Target:
    return Target(Kind.CANVAS, canvas.tenant_id, canvas.id, owner_id=canvas.owner_id, permission=canvas.permission)


def request_fingerprint(data: CanvasInput, template_id: str) -> str:
    """SHA-256 of a CreateCanvas payload as sent (before defaults), stored next to its request_id."""
    payload = {
        "title": data.title, "description": data.description, "avatar": data.avatar,
        "permission": data.permission.value if data.permission else "", "release": data.release,
        "category": data.category.value if data.category else "", "tags": list(data.tags), "dsl": data.dsl,
        "template_id": template_id,
    }
    return hashlib.sha256(canonical_json(payload)).hexdigest()


def idempotent_resource_gone(kind: str) -> AbortedError:
    """A replayed request_id whose resource is gone, or that the caller may no longer see: the same answer for
    both, so a replay never tells more than a Get would."""
    return AbortedError(f"the {kind} created by this request_id is gone; use a new request_id",
                        reason="IDEMPOTENT_RESOURCE_GONE")


def ensure_live(canvas: Canvas) -> None:
    """Writes, new sessions and new runs need a canvas that is not soft-deleted (reads are fine: AIP-164)."""
    if canvas.deleted:
        raise FailedPreconditionError(f"canvas {canvas.id!r} is deleted; undelete it first", reason="CANVAS_DELETED")


class CanvasService:
    def __init__(self, canvases: Any, tenants: Any, tokens: PageTokenCodec, *, max_dsl_bytes: int,
                 deleted_retention_s: int = 30 * 24 * 3600):
        self._canvases = canvases
        self._tenants = tenants
        self._tokens = tokens
        self._max_dsl_bytes = max_dsl_bytes
        self._retention_ms = deleted_retention_s * 1000
        # canvas id -> (etag, policy target) as last read or written here. A write conditional on that
        # etag can only apply while the row still has it, so the facts are exact for such a write; any
        # other write to the row (permission change, delete, another replica) changes the etag.
        self._facts: LRU[str, tuple[str, Target]] = LRU(_FACTS_MAX)  # exactness never depends on it
        self._facts_lock = threading.Lock()

    # ---- canvases --------------------------------------------------------------------------------

    def create(self, caller: Caller, data: CanvasInput, *, template_id: str = "", request_id: str = "",
               validate_only: bool = False) -> Canvas:
        validation.request_id(request_id)
        fingerprint = request_fingerprint(data, template_id) if request_id else ""
        # Idempotency keys are per (tenant, user): another user's identical request_id is another request.
        # A replay returns the recorded canvas only if the caller could Get it now (IDEMPOTENT_RESOURCE_GONE
        # otherwise, exactly as for a canvas that no longer exists).
        def replayable(found: Canvas) -> bool:
            return permits(caller, Action.READ, canvas_target(found))

        if request_id and not validate_only:
            existing = self._canvases.find_idempotent(caller.tenant_id, caller.user_id, "canvas", request_id)
            if existing:
                validation.same_request(existing[1], fingerprint)
                canvas = self._canvases.get_canvas(existing[0])
                if canvas is None or not replayable(canvas):
                    raise idempotent_resource_gone("canvas")
                return canvas
        dsl = data.dsl
        title_text = data.title
        category = data.category
        if template_id:
            template = self._canvases_template(template_id)
            if dsl is None:
                dsl = template.dsl
            title_text = title_text or template.title.get("en") or next(iter(template.title.values()), template.id)
            category = category or template.category
        if dsl is None:
            raise InvalidArgumentError.for_field("canvas.dsl", "is required (or set template_id)")
        title = validation.title(title_text)
        validate_dsl(dsl, field="canvas.dsl", max_bytes=self._max_dsl_bytes)
        canvas = Canvas(
            id=new_id(), tenant_id=caller.tenant_id, owner_id=caller.user_id, title=title,
            description=validation.text(data.description, "canvas.description", validation.MAX_DESCRIPTION),
            avatar=validation.text(data.avatar, "canvas.avatar", validation.MAX_AVATAR),
            permission=data.permission or Permission.ME, release=data.release,
            category=category or detect_category(dsl), tags=validation.tags(data.tags), dsl=dsl, etag=new_etag(),
        )
        if validate_only:
            canvas.id = ""
            canvas.etag = ""
            return canvas
        change = DslChange(dsl=dsl, content_hash=content_hash(dsl), author_id=caller.user_id, description="created")
        return self._canvases.create_canvas(canvas, change, request_id, fingerprint, replayable=replayable)

    def get(self, caller: Caller, canvas_id: str) -> Canvas:
        canvas = self._load(caller, canvas_id, Action.READ)
        self._remember(canvas)
        return canvas

    def update(self, caller: Caller, canvas_id: str, data: CanvasInput, mask_paths: list[str], *,
               validate_only: bool = False) -> Canvas:
        paths = validation.canvas_update_mask(mask_paths) if mask_paths else self._implicit_mask(data)
        if not paths:
            raise InvalidArgumentError.for_field("update_mask", "names no field to change")
        if "dsl" in paths and not data.etag:
            raise InvalidArgumentError.for_field("canvas.etag", "is required when the DSL changes (read the canvas first)")
        changes: dict[str, Any] = {}
        change = None
        if "title" in paths:
            changes["title"] = validation.title(data.title)
        if "description" in paths:
            changes["description"] = validation.text(data.description, "canvas.description", validation.MAX_DESCRIPTION)
        if "avatar" in paths:
            changes["avatar"] = validation.text(data.avatar, "canvas.avatar", validation.MAX_AVATAR)
        if "tags" in paths:
            changes["tags"] = validation.tags(data.tags)
        if "release" in paths:
            changes["release"] = data.release
        if "permission" in paths:
            changes["permission"] = data.permission or Permission.ME
        if "dsl" in paths:
            if data.dsl is None:
                raise InvalidArgumentError.for_field("canvas.dsl", "is required when update_mask names dsl")
            validate_dsl(data.dsl, field="canvas.dsl", max_bytes=self._max_dsl_bytes)
            change = DslChange(dsl=data.dsl, content_hash=content_hash(data.dsl), author_id=caller.user_id)

        def prepare(current: Canvas) -> tuple[dict[str, Any], DslChange | None]:
            """The rules, run by the repository inside the write transaction on the locked row."""
            authorize(caller, Action.EDIT, canvas_target(current))
            ensure_live(current)
            if ("permission" in changes and changes["permission"] is not current.permission) or (
                    "release" in changes and changes["release"] != current.release):
                authorize(caller, Action.MANAGE, canvas_target(current))
            if data.etag and data.etag != current.etag:
                raise AbortedError(f"canvas {canvas_id!r} has changed since etag {data.etag!r} was read; re-read and retry",
                                   reason="ETAG_MISMATCH")
            return changes, change

        validation.resource_id(canvas_id, "id")
        if not validate_only and is_quick_mask(paths):
            quick = self._quick_update(caller, canvas_id, data.etag, changes)
            if quick is not None:
                return quick
        if validate_only:
            current = self._load(caller, canvas_id, Action.EDIT)
            prepare(current)
            preview = Canvas(**{**current.__dict__, **changes})
            if change is not None:
                preview.dsl = change.dsl
            return preview
        updated = self._canvases.update_canvas_locked(canvas_id, prepare)
        if updated is None:
            raise NotFoundError(f"canvas {canvas_id!r} not found", resource_type="canvas", resource_name=canvas_id)
        return updated

    def _quick_update(self, caller: Caller, canvas_id: str, etag: str, changes: dict[str, Any]) -> Canvas | None:
        """Description/avatar changes as one conditional UPDATE ... RETURNING; None = take the regular path.

        The policy decides on the facts (tenant, owner, permission) of the row at the request's etag: the ones
        remembered for exactly that etag, else those of a point read that still shows it. The statement only
        applies while the row has that etag, and every change to those facts changes the etag, so the decision
        holds for the write. A row at another etag, an unknown id, or facts that deny go the regular path,
        which reports ABORTED, NOT_FOUND or PERMISSION_DENIED exactly as before.
        """
        if not etag:
            return None
        known = self._facts.get(canvas_id)
        if known is None or known[0] != etag:
            current = self._canvases.get_canvas(canvas_id)
            if current is None or current.etag != etag:
                return None
            self._remember(current)
            known = (current.etag, canvas_target(current))
        try:
            authorize(caller, Action.EDIT, known[1])
        except (NotFoundError, PermissionDeniedError):
            return None
        updated = self._canvases.update_fields(canvas_id, etag, changes)
        if updated is not None:
            self._remember(updated)
        return updated

    def _remember(self, canvas: Canvas) -> None:
        with self._facts_lock:
            self._facts.keep(canvas.id, (canvas.etag, canvas_target(canvas)))

    def delete(self, caller: Caller, canvas_id: str, etag: str = "") -> Canvas:
        """Soft delete (AIP-164): hidden from List, still readable with Get, restorable until expire_time."""
        current = self._load(caller, canvas_id, Action.MANAGE)
        if current.deleted:
            raise NotFoundError(f"canvas {canvas_id!r} is already deleted", resource_type="canvas",
                                resource_name=canvas_id)
        if etag and etag != current.etag:
            raise AbortedError(f"canvas {canvas_id!r} has changed since etag {etag!r} was read", reason="ETAG_MISMATCH")
        now = now_ms()
        deleted = self._canvases.set_deleted(current, etag or current.etag, now, now + self._retention_ms)
        self._remember(deleted)
        return deleted

    def undelete(self, caller: Caller, canvas_id: str, etag: str = "") -> Canvas:
        """Restore a soft-deleted canvas (owner only, like delete); ALREADY_EXISTS when it is not deleted."""
        current = self._load(caller, canvas_id, Action.MANAGE)
        if not current.deleted:
            raise AlreadyExistsError(f"canvas {canvas_id!r} is not deleted", reason="CANVAS_NOT_DELETED")
        if etag and etag != current.etag:
            raise AbortedError(f"canvas {canvas_id!r} has changed since etag {etag!r} was read", reason="ETAG_MISMATCH")
        restored = self._canvases.set_deleted(current, etag or current.etag, 0, 0)
        self._remember(restored)
        return restored

    def purge_expired(self, now: int | None = None) -> int:
        """Hard-delete every soft-deleted canvas whose expire_time is before `now` (default: the clock)."""
        moment = now_ms() if now is None else now
        total = 0
        while True:
            purged = self._canvases.purge_expired(moment)
            total += purged
            if purged == 0:
                return total

    def list(self, caller: Caller, *, page_size: int, page_token: str, filter_text: str, order_by: str,
             show_deleted: bool = False) -> Page:
        size = validation.page_size(page_size)
        flt = parse_filter(filter_text)
        ordering = parse_order_by(order_by)
        binding = PageTokenCodec.binding("canvases", caller.tenant_id, caller.user_id, flt.fingerprint(),
                                         ordering.fingerprint(), *(["deleted"] if show_deleted else []))
        after = self._tokens.decode(page_token, binding)
        key_type = int if ordering.key == "update_time" else str
        if after is not None and (len(after) not in (2, 3) or not isinstance(after[0], key_type)
                                  or not isinstance(after[1], str) or (len(after) == 3 and not isinstance(after[2], int))):
            raise InvalidArgumentError.for_field("page_token", "is malformed; start again without it")
        # Paging while canvases change (README, Listing): later pages of a walk leave out canvases changed or
        # created in or after the millisecond of its first page, so a canvas moved by an update (to the end
        # in `update_time asc`, elsewhere by a new title) cannot show up twice, and every canvas unchanged
        # since before the walk shows up exactly once. In `update_time desc` the keyset implies the bound (an
        # updated canvas moves ahead of the position). Tokens from before the bound (two elements) page
        # without it.
        snapshot = (after[2] if len(after) == 3 else None) if after is not None else now_ms()
        bounded = snapshot is not None and not (ordering.key == "update_time" and ordering.descending)
        rows, position = self._canvases.list_canvases(tenant_id=caller.tenant_id, user_id=caller.user_id,
                                            is_member=caller.is_member, flt=flt, ordering=ordering,
                                            after=after[:2] if after else None, limit=size, show_deleted=show_deleted,
                                            changed_before=snapshot if bounded and after is not None else None)
        token = ""
        if position is not None:
            token = self._tokens.encode(binding, position + ([snapshot] if snapshot is not None else []))
        return Page(rows, token)

    # ---- revisions -------------------------------------------------------------------------------

    def list_revisions(self, caller: Caller, canvas_id: str, *, page_size: int, page_token: str) -> Page:
        size = validation.page_size(page_size)
        canvas = self._load(caller, canvas_id, Action.READ, with_dsl=False)
        binding = PageTokenCodec.binding("revisions", caller.tenant_id, caller.user_id, canvas_id)
        after = self._tokens.decode(page_token, binding)
        after_seq = after[0] if after else None
        if after is not None and not isinstance(after_seq, int):
            raise InvalidArgumentError.for_field("page_token", "is malformed; start again without it")
        rows = self._canvases.list_revisions(canvas_id, after_seq, size)
        token = ""
        if len(rows) > size:
            rows = rows[:size]
            token = self._tokens.encode(binding, [rows[-1].seq])
        for revision in rows:
            self._annotate(canvas, revision)
        return Page(rows, token)

    def get_revision(self, caller: Caller, canvas_id: str, revision_id: str) -> Revision:
        canvas = self._load(caller, canvas_id, Action.READ, with_dsl=False)
        return self._revision(canvas, revision_id)

    def publish(self, caller: Caller, canvas_id: str, revision_id: str, etag: str) -> Revision:
        canvas = self._load(caller, canvas_id, Action.MANAGE, with_dsl=False)
        ensure_live(canvas)
        if etag and etag != canvas.etag:
            raise AbortedError(f"canvas {canvas_id!r} has changed since etag {etag!r} was read", reason="ETAG_MISMATCH")
        revision = self._revision(canvas, revision_id or LATEST)
        self._canvases.publish(canvas, etag or canvas.etag, revision.id)
        canvas.published_revision_id = revision.id
        revision.released = True
        return self._annotate(canvas, revision)

    def rollback(self, caller: Caller, canvas_id: str, revision_id: str, etag: str) -> Revision:
        if not etag:
            raise InvalidArgumentError.for_field("etag", "is required: a rollback changes the DSL")
        if not revision_id:
            raise InvalidArgumentError.for_field("revision_id", "is required")
        canvas = self._load(caller, canvas_id, Action.EDIT, with_dsl=False)
        ensure_live(canvas)
        if etag != canvas.etag:
            raise AbortedError(f"canvas {canvas_id!r} has changed since etag {etag!r} was read", reason="ETAG_MISMATCH")
        target = self._revision(canvas, revision_id)
        assert target.dsl is not None
        change = DslChange(dsl=target.dsl, content_hash=target.content_hash, author_id=caller.user_id,
                           description=f"rollback of {target.id}")
        updated = self._canvases.update_canvas(canvas, etag, {}, change)
        return self._revision(updated, updated.head_revision_id)

    # ---- templates -------------------------------------------------------------------------------

    def list_templates(self, *, page_size: int, page_token: str) -> Page:
        size = validation.page_size(page_size, default=50)
        binding = PageTokenCodec.binding("templates")
        after = self._tokens.decode(page_token, binding)
        rows = self._tenants.list_templates(str(after[0]) if after else None, size)
        token = ""
        if len(rows) > size:
            rows = rows[:size]
            token = self._tokens.encode(binding, [rows[-1].id])
        return Page(rows, token)

    def get_template(self, template_id: str) -> Template:
        return self._canvases_template(template_id)

    # ---- helpers ---------------------------------------------------------------------------------

    def _canvases_template(self, template_id: str) -> Template:
        if not template_id:
            raise InvalidArgumentError.for_field("id", "is required")
        template = self._tenants.get_template(template_id) if len(template_id) <= 64 else None
        if template is None:
            raise NotFoundError(f"template {template_id!r} not found", resource_type="canvasTemplate",
                                resource_name=template_id)
        return template

    def _load(self, caller: Caller, canvas_id: str, action: Action, *, with_dsl: bool = True) -> Canvas:
        validation.resource_id(canvas_id, "id")
        canvas = self._canvases.get_canvas(canvas_id, with_dsl=with_dsl)
        if canvas is None:
            raise NotFoundError(f"canvas {canvas_id!r} not found", resource_type="canvas", resource_name=canvas_id)
        authorize(caller, action, canvas_target(canvas))
        return canvas

    def _revision(self, canvas: Canvas, revision_id: str) -> Revision:
        if revision_id == LATEST:
            revision_id = canvas.head_revision_id
        elif revision_id == PUBLISHED:
            if not canvas.published_revision_id:
                raise FailedPreconditionError(f"canvas {canvas.id!r} has no published revision", reason="NOT_PUBLISHED")
            revision_id = canvas.published_revision_id
        else:
            validation.resource_id(revision_id, "revision_id")
        revision = self._canvases.get_revision(canvas.id, revision_id)
        if revision is None:
            raise NotFoundError(f"revision {revision_id!r} of canvas {canvas.id!r} not found", resource_type="revision",
                                resource_name=revision_id)
        return self._annotate(canvas, revision)

    @staticmethod
    def _annotate(canvas: Canvas, revision: Revision) -> Revision:
        revision.alternate_ids = [alias for alias, target in ((LATEST, canvas.head_revision_id),
                                                              (PUBLISHED, canvas.published_revision_id))
                                  if target == revision.id]
        return revision

    @staticmethod
    def _implicit_mask(data: CanvasInput) -> list[str]:
        """AIP-134 without a mask: the fields that carry a non-default value."""
        paths = []
        for name in ("title", "description", "avatar", "tags"):
            if getattr(data, name):
                paths.append(name)
        if data.permission is not None:
            paths.append("permission")
        if data.release:
            paths.append("release")
        if data.dsl is not None:
            paths.append("dsl")
        return paths
