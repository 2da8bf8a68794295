"""Agents and agent sessions: RAGFlow's /agents routes over the store's canvases and sessions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentcanvas.v1 import canvas_store_pb2

from services.common import errors
from services.common.json_text import dump_object, text_or_struct
from services.http_api.core import views
from services.http_api.core.known import SESSION_AGENTS
from services.http_api.core.errors import DENIED, ApiError, RetCode, argument, data_error, from_domain
from services.http_api.core.params import dsl_value, flag, page_params, paginate, sort_rows, text_field, truthy_desc

STORE_PAGE = 100


async def all_pages(fetch, field: str) -> list[Any]:
    """Every item of a paged store listing."""
    items: list[Any] = []
    token = ""
    while True:
        reply = await fetch(token)
        items.extend(getattr(reply, field))
        token = reply.next_page_token
        if not token:
            return items



def _dsl_text(value: Any) -> str:
    """The DSL as JSON text for the store, in the order the client wrote it (a Struct would lose it)."""
    try:
        return dump_object(dsl_value(value))
    except ValueError:  # NaN or an infinity: JSON text cannot hold it
        raise argument("Invalid DSL: numbers must be finite.") from None

class Agents:
    """The use cases of one request; `backend` makes the store calls with the caller's token."""

    def __init__(self, backend):
        self.backend = backend

    async def _canvas(self, agent_id: str, *, not_found: str = "canvas not found.") -> canvas_store_pb2.Canvas:
        try:
            canvas = await self.backend.get_canvas(agent_id)
        except errors.InvalidArgumentError:  # not a 32-hex id: RAGFlow knows no such agent
            raise data_error(not_found) from None
        except errors.AgentCanvasError as exc:
            raise from_domain(exc, not_found=not_found, denied=DENIED) from None
        if canvas.HasField("delete_time"):  # soft-deleted: restorable in the store, gone for RAGFlow's clients
            raise data_error(f"{not_found} (NOT_FOUND: agent {agent_id} is deleted)")
        return canvas

    # agents
    async def list(self, query: Mapping[str, Any]) -> dict[str, Any]:
        page, page_size, orderby, desc = page_params(query, default_order="create_time")
        try:
            canvases = await all_pages(
                lambda token: self.backend.list_canvases(order_by="update_time desc", page_size=STORE_PAGE, page_token=token),
                "canvases")
        except errors.AgentCanvasError as exc:
            raise from_domain(exc) from None
        rows = [views.agent_summary(canvas) for canvas in canvases]
        keywords = str(query.get("keywords") or "").strip().lower()
        if keywords:
            rows = [row for row in rows if keywords in row["title"].lower()]
        category = query.get("canvas_category")
        if category:
            rows = [row for row in rows if row["canvas_category"] == category]
        owners = [owner for owner in str(query.get("owner_ids") or "").split(",") if owner]
        if owners:
            rows = [row for row in rows if row["user_id"] in owners]
        tags = [tag for tag in str(query.get("tags") or "").split(",") if tag]
        if tags:
            rows = [row for row in rows if set(tags) & set(row["tags"])]
        rows = sort_rows(rows, orderby, desc)
        return {"canvas": paginate(rows, page, page_size), "total": len(rows)}

    async def get(self, agent_id: str) -> dict[str, Any]:
        return views.agent_detail(await self._canvas(agent_id))

    async def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        title = body.get("title")
        if not title:
            raise argument("No title in request.")
        if not isinstance(title, str):
            raise argument("`title` must be a string.")
        if body.get("dsl") in (None, "", {}):
            raise argument("No DSL data in request.")
        canvas = canvas_store_pb2.Canvas(title=title, dsl_json=_dsl_text(body["dsl"]),
                                         description=text_field(body, "description") or "",
                                         avatar=text_field(body, "avatar") or "", release=flag(body.get("release")))
        category = body.get("canvas_category")
        if category:
            if not isinstance(category, str) or category not in views.CATEGORY_BY_NAME:
                raise argument(f"`canvas_category` must be one of {', '.join(views.CATEGORY_BY_NAME)}.")
            canvas.category = views.CATEGORY_BY_NAME[category]
        permission = body.get("permission")
        if permission:
            if not isinstance(permission, str) or permission not in views.PERMISSION_BY_NAME:
                raise argument("`permission` must be 'me' or 'team'.")
            canvas.permission = views.PERMISSION_BY_NAME[permission]
        try:
            created = await self.backend.create_canvas(canvas)
        except errors.AlreadyExistsError:
            raise data_error(f"{title} already exists.") from None
        except errors.AgentCanvasError as exc:
            raise from_domain(exc) from None
        return views.agent_detail(created)

    async def update(self, agent_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        current = await self._canvas(agent_id, not_found=DENIED)
        canvas = canvas_store_pb2.Canvas(id=agent_id, etag=current.etag)
        paths: list[str] = []
        for name in ("title", "description", "avatar"):
            value = text_field(body, name)
            if value is not None:
                setattr(canvas, name, value)
                paths.append(name)
        if body.get("dsl") is not None:
            canvas.dsl_json = _dsl_text(body["dsl"])
            paths.append("dsl")
        if body.get("release") is not None:
            canvas.release = flag(body["release"])
            paths.append("release")
        if body.get("permission") is not None:
            if not isinstance(body["permission"], str) or body["permission"] not in views.PERMISSION_BY_NAME:
                raise argument("`permission` must be 'me' or 'team'.")
            canvas.permission = views.PERMISSION_BY_NAME[body["permission"]]
            paths.append("permission")
        if not paths:
            return {"update_time": views.millis(current.update_time)}
        try:
            updated = await self.backend.update_canvas(canvas, paths)
        except errors.AlreadyExistsError:
            raise data_error(f"{canvas.title} already exists.") from None
        except errors.AgentCanvasError as exc:
            raise from_domain(exc, not_found=DENIED, denied=DENIED) from None
        return {"update_time": views.millis(updated.update_time)}

    async def delete(self, agent_id: str) -> bool:
        owner_only = "Only the owner of the agent is authorized for this operation."
        try:
            await self.backend.delete_canvas(agent_id)
        except (errors.NotFoundError, errors.PermissionDeniedError, errors.InvalidArgumentError) as exc:
            raise ApiError(RetCode.OPERATING_ERROR, f"{owner_only} ({exc.reason}: {exc.message})", data=False,
                           reason=exc.reason) from None
        except errors.AgentCanvasError as exc:
            raise from_domain(exc) from None
        return True

    # sessions
    async def _dsl_of(self, session: canvas_store_pb2.Session, cache: dict[str, dict[str, Any]]) -> dict[str, Any]:
        if session.revision_id not in cache:
            try:
                revision = await self.backend.get_revision(session.canvas_id, session.revision_id)
                cache[session.revision_id] = text_or_struct(revision.dsl_json, revision.dsl)
            except errors.AgentCanvasError:
                cache[session.revision_id] = {}
        return cache[session.revision_id]

    async def create_session(self, agent_id: str, body: Mapping[str, Any], query: Mapping[str, Any]) -> dict[str, Any]:
        canvas = await self._canvas(agent_id, not_found="Agent not found.")
        revision = ""
        if flag(body.get("release")):
            if not canvas.published_revision_id:
                raise data_error("No available published version")
            revision = canvas.published_revision_id
        user_id = body.get("user_id") or query.get("user_id") or ""
        if not isinstance(user_id, str):
            raise argument("`user_id` must be a string.")
        try:
            session = await self.backend.create_session(agent_id, revision, user_id)
        except errors.AgentCanvasError as exc:
            raise from_domain(exc, not_found="Agent not found.", denied=DENIED) from None
        SESSION_AGENTS.keep(session.id, session.canvas_id)
        name = body.get("name") if isinstance(body.get("name"), str) else ""
        return views.session_row(session, await self._dsl_of(session, {}), name=name)

    async def _sessions(self, agent_id: str, user_id: str) -> list[canvas_store_pb2.Session]:
        await self._canvas(agent_id, not_found="Agent not found.")
        try:
            return await all_pages(lambda token: self.backend.list_sessions(agent_id, user_id, STORE_PAGE, token), "sessions")
        except errors.AgentCanvasError as exc:
            raise from_domain(exc, denied=DENIED) from None

    async def list_sessions(self, agent_id: str, query: Mapping[str, Any]) -> tuple[list[dict[str, Any]], int]:
        page, page_size, orderby, desc = page_params(query, default_order="update_time")
        sessions = await self._sessions(agent_id, str(query.get("user_id") or ""))
        wanted = query.get("id")
        if wanted:
            sessions = [session for session in sessions if session.id == wanted]
        include_dsl = truthy_desc(query.get("dsl"))
        cache: dict[str, dict[str, Any]] = {}
        rows = [views.session_row(session, await self._dsl_of(session, cache), include_dsl=include_dsl)
                for session in sessions]
        rows = sort_rows(rows, orderby, desc)
        return paginate(rows, page, page_size), len(rows)

    async def get_session(self, agent_id: str, session_id: str) -> dict[str, Any]:
        session = await self._session_of(agent_id, session_id)
        row = views.session_row(session, await self._dsl_of(session, {}))
        row["dialog_id"] = session.canvas_id
        return row

    async def _session_of(self, agent_id: str, session_id: str) -> canvas_store_pb2.Session:
        try:
            session = await self.backend.get_session(session_id)
        except (errors.NotFoundError, errors.InvalidArgumentError):
            raise data_error("Session not found!") from None
        except errors.AgentCanvasError as exc:
            raise from_domain(exc, denied=DENIED) from None
        if session.canvas_id != agent_id:
            raise ApiError(RetCode.OPERATING_ERROR, "Session does not belong to the requested agent.", data=False)
        return session

    async def delete_session(self, agent_id: str, session_id: str) -> None:
        await self._session_of(agent_id, session_id)
        try:
            await self.backend.delete_session(session_id)
        except errors.AgentCanvasError as exc:
            raise from_domain(exc, not_found="Session not found!", denied=DENIED) from None

    async def delete_sessions(self, agent_id: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """None on full success; `{"success_count", "errors"}` when only some went."""
        ids = body.get("ids")
        if flag(body.get("delete_all")):
            ids = [session.id for session in await self._sessions(agent_id, "")]
        elif ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)):
            raise argument("`ids` must be a list of session ids.")
        if not ids:
            return None
        try:
            await self.backend.get_canvas(agent_id)
        except errors.AgentCanvasError:
            raise data_error(f"You don't own the agent {agent_id}") from None
        problems: list[str] = []
        done = 0
        for session_id in dict.fromkeys(ids):
            try:
                await self.delete_session(agent_id, session_id)
                done += 1
            except ApiError:
                problems.append(f"The agent doesn't own the session {session_id}")
        if problems and not done:
            raise data_error("; ".join(problems))
        return {"success_count": done, "errors": problems} if problems else None
