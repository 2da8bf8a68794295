"""Use cases for conversation sessions and tenant membership."""

from __future__ import annotations

from typing import Any

from services.canvas_store.core import validation
from services.canvas_store.core.canvases import LATEST, PUBLISHED, canvas_target, ensure_live
from services.canvas_store.core.dsl import canonical_json
from services.canvas_store.core.ids import new_id
from services.canvas_store.core.page_tokens import PageTokenCodec
from services.canvas_store.core.policy import Action, Caller, Kind, Target, authorize
from services.canvas_store.core.types import Canvas, JsonObject, Page, Session, TenantMember
from services.common.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError

MAX_TURN_MESSAGES = 100


def trim_history(history: list[JsonObject], appended: list[JsonObject], max_messages: int,
                 max_bytes: int) -> list[JsonObject]:
    """The history after a turn: the newest `max_messages`, then the oldest dropped while the whole is over
    `max_bytes` of canonical JSON. The turn's own messages always stay (their size is checked on the way in),
    so a long conversation cannot grow a session row without bound, and an answer is never lost."""
    kept = (history + appended)[-max_messages:] if max_messages else []
    if len(canonical_json(kept)) <= max_bytes:  # the common case: one dump, nothing dropped
        return kept
    sizes = [len(canonical_json(message)) + 1 for message in kept]  # + its comma
    total, start, floor = sum(sizes) + 1, 0, min(len(appended), len(kept))
    while total > max_bytes and len(kept) - start > floor:
        total -= sizes[start]
        start += 1
    return kept[start:]


class SessionService:
    def __init__(self, canvases: Any, sessions: Any, tenants: Any, tokens: PageTokenCodec, *, max_state_bytes: int,
                 max_turn_bytes: int = 1 << 20):
        self._canvases = canvases
        self._sessions = sessions
        self._tenants = tenants
        self._tokens = tokens
        self._max_state_bytes = max_state_bytes
        self._max_turn_bytes = max_turn_bytes

    def create(self, caller: Caller, canvas_id: str, revision_id: str, user_id: str) -> Session:
        validation.resource_id(canvas_id, "canvas_id")
        validation.user_id(user_id, "user_id")
        if revision_id not in ("", LATEST, PUBLISHED):
            validation.resource_id(revision_id, "revision_id")
        attempts_left = 3
        while True:
            attempts_left -= 1
            canvas = self._canvases.get_canvas(canvas_id, with_dsl=False)
            if canvas is None:
                raise NotFoundError(f"canvas {canvas_id!r} not found", resource_type="canvas", resource_name=canvas_id)
            authorize(caller, Action.RUN, canvas_target(canvas))
            ensure_live(canvas)
            session = Session(id=new_id(), tenant_id=canvas.tenant_id, canvas_id=canvas_id, user_id=user_id,
                              revision_id=self._pinned_revision(canvas, revision_id), creator_id=caller.user_id,
                              history=[], state={})
            try:
                return self._sessions.insert(session)
            except NotFoundError as gone:
                # The head this call read was replaced and pruned meanwhile (keep_draft_revisions=1): pin the
                # new head. A revision asked for by id is not swapped for another.
                if gone.resource_type != "revision" or revision_id not in ("", LATEST) or not attempts_left:
                    raise

    @staticmethod
    def _pinned_revision(canvas: Canvas, revision_id: str) -> str:
        if not revision_id:
            return canvas.published_revision_id or canvas.head_revision_id
        if revision_id == LATEST:
            return canvas.head_revision_id
        if revision_id == PUBLISHED:
            if not canvas.published_revision_id:
                raise FailedPreconditionError(
                    f"canvas {canvas.id!r} has no published revision to pin; publish one first (PublishCanvas) or "
                    "pin 'latest' or a revision id", reason="NOT_PUBLISHED", metadata={"canvas_id": canvas.id})
            return canvas.published_revision_id
        return revision_id  # an id: the insert checks, in its transaction, that it is a revision of this canvas

    def get(self, caller: Caller, session_id: str) -> Session:
        return self._load(caller, session_id, Action.READ)

    def list(self, caller: Caller, *, canvas_id: str, user_id: str, page_size: int, page_token: str) -> Page:
        size = validation.page_size(page_size)
        if canvas_id:
            self._canvas_for(caller, canvas_id)
        validation.user_id(user_id, "user_id")
        binding = PageTokenCodec.binding("sessions", caller.tenant_id, caller.user_id, canvas_id, user_id)
        after = self._tokens.decode(page_token, binding)
        if after is not None and len(after) != 2:
            raise InvalidArgumentError.for_field("page_token", "is malformed; start again without it")
        rows = self._sessions.list(tenant_id=caller.tenant_id, user_id=caller.user_id, is_member=caller.is_member,
                                   canvas_id=canvas_id, end_user_id=user_id, after=after, limit=size)
        token = ""
        if len(rows) > size:
            rows = rows[:size]
            token = self._tokens.encode(binding, [rows[-1].create_time_ms, rows[-1].id])
        return Page(rows, token)

    def delete(self, caller: Caller, session_id: str) -> None:
        self._load(caller, session_id, Action.DELETE_SESSION, full=False)
        self._sessions.delete(session_id)

    def append_turn(self, caller: Caller, session_id: str, messages: list[JsonObject], state: JsonObject | None,
                    etag: str) -> Session:
        if not messages and state is None:
            raise InvalidArgumentError.for_field("messages", "a turn needs messages, a new state, or both")
        if len(messages) > MAX_TURN_MESSAGES:
            raise InvalidArgumentError.for_field("messages", f"at most {MAX_TURN_MESSAGES} messages per turn")
        for index, message in enumerate(messages):
            role = message.get("role")
            if not isinstance(role, str) or not role.strip():
                raise InvalidArgumentError.for_field(f"messages[{index}].role", "is required (user, assistant, ...)")
            validation.json_depth(message, f"messages[{index}]", validation.MAX_JSON_DEPTH - 1)  # history wraps it
        if state is not None:
            validation.json_depth(state, "state")
        size = len(canonical_json({"messages": messages, "state": state}))
        if size > self._max_state_bytes:
            raise InvalidArgumentError.for_field("state", f"turn and state are {size} bytes; at most {self._max_state_bytes}")
        self._check_turn_size(messages)
        self._load(caller, session_id, Action.RUN, full=False)
        return self._sessions.append_turn(session_id, etag or None, messages, state)

    def _check_turn_size(self, messages: list[JsonObject]) -> None:
        """One turn's messages are bounded as the history is: the history always keeps the turn being
        appended, so an unbounded turn would make the history (and every later turn's write) unbounded."""
        limit = self._max_turn_bytes
        total = 0
        for index, message in enumerate(messages):
            size = len(canonical_json(message))
            if size > limit:
                raise InvalidArgumentError.for_field(
                    f"messages[{index}]", f"is {size} bytes; at most {limit} (store.session_turn_max_bytes)")
            total += size
        if total > limit:
            raise InvalidArgumentError.for_field(
                "messages", f"are {total} bytes together; at most {limit} per turn (store.session_turn_max_bytes)")

    # ---- tenancy ---------------------------------------------------------------------------------

    def add_member(self, caller: Caller, user_id: str) -> TenantMember:
        if not user_id.strip():
            raise InvalidArgumentError.for_field("user_id", "is required and must not be blank")
        validation.user_id(user_id, "user_id")
        authorize(caller, Action.MANAGE_TENANT, Target(Kind.TENANT, caller.tenant_id, caller.tenant_id))
        return self._tenants.add_member(caller.tenant_id, user_id)

    def list_members(self, caller: Caller) -> list[TenantMember]:
        authorize(caller, Action.READ_TENANT, Target(Kind.TENANT, caller.tenant_id, caller.tenant_id))
        return self._tenants.list_members(caller.tenant_id)

    # ---- helpers ---------------------------------------------------------------------------------

    def _canvas_for(self, caller: Caller, canvas_id: str) -> None:
        validation.resource_id(canvas_id, "canvas_id")
        canvas = self._canvases.get_canvas(canvas_id, with_dsl=False)
        if canvas is None:
            raise NotFoundError(f"canvas {canvas_id!r} not found", resource_type="canvas", resource_name=canvas_id)
        authorize(caller, Action.READ, canvas_target(canvas))

    def _load(self, caller: Caller, session_id: str, action: Action, *, full: bool = True) -> Session:
        validation.resource_id(session_id, "id")
        found = self._sessions.get(session_id, full=full)
        if found is None:
            raise NotFoundError(f"session {session_id!r} not found", resource_type="session", resource_name=session_id)
        session, target = found
        authorize(caller, action, target)
        return session
