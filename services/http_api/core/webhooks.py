"""Begin's webhook mode: an HTTP request fires a run whose Begin receives it as `webhook_payload`.

The canvas's Begin decides how the call is answered (`execution_mode`): "Immediately" answers at
once (202, with the run and session ids) while the run goes on; otherwise ("Streaming", RAGFlow's
other mode) the answer comes when the run ends, with its final output. `methods` (when set) lists the
HTTP methods the webhook accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.common import errors
from services.common.json_text import text_or_struct
from services.common.structs import from_struct, to_struct
from services.http_api.core.errors import DENIED, ApiError, RetCode, data_error, from_domain
from services.http_api.core.events import EventMapper, error_text

PRIVATE_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization", "x-agentcanvas-on-behalf-of"})
"""Never handed to the canvas: the caller's credentials stay out of run specs, events and logs."""


@dataclass(frozen=True)
class WebhookCall:
    method: str
    query: dict[str, Any]
    headers: dict[str, str]
    body: Any

    def payload(self) -> dict[str, Any]:
        request = {"method": self.method, "query": self.query,
                   "headers": {k: v for k, v in self.headers.items() if k.lower() not in PRIVATE_HEADERS},
                   "body": self.body}
        return {**{k: v for k, v in request.items() if k != "method"}, "input": request}


def begin_params(dsl: Mapping[str, Any]) -> dict[str, Any]:
    components = dsl.get("components") if isinstance(dsl, Mapping) else None
    begin = components.get("begin") if isinstance(components, Mapping) else None
    params = ((begin or {}).get("obj") or {}).get("params") if isinstance(begin, Mapping) else None
    return dict(params) if isinstance(params, Mapping) else {}


async def _flatten(batches):
    async for batch in batches:
        for event in batch:
            yield event


class Webhooks:
    def __init__(self, backend):
        self.backend = backend

    async def fire(self, agent_id: str, call: WebhookCall, *, test: bool) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) for one call of the webhook."""
        try:
            canvas = await self.backend.get_canvas(agent_id)
        except (errors.NotFoundError, errors.InvalidArgumentError):
            raise data_error("Agent not found.") from None
        except errors.AgentCanvasError as exc:
            raise from_domain(exc, denied=DENIED) from None
        if canvas.HasField("delete_time"):
            raise data_error("Agent not found.")
        params = begin_params(text_or_struct(canvas.dsl_json, canvas.dsl))
        if str(params.get("mode") or "").lower() != "webhook":
            raise data_error("This agent's Begin is not in webhook mode.")
        methods = [str(m).upper() for m in params.get("methods") or [] if isinstance(m, str)]
        if methods and call.method.upper() not in methods:
            raise ApiError(RetCode.ARGUMENT_ERROR, f"This webhook accepts {', '.join(methods)}, not {call.method}.",
                           http_status=405)
        # The test route runs the head (what the editor shows); the webhook the published revision when there is one.
        revision = "" if test or not canvas.published_revision_id else "published"
        request = orchestrator_pb2.RunCanvasRequest(canvas_id=agent_id, revision_id=revision,
                                                    webhook_payload=to_struct(call.payload()))
        immediate = str(params.get("execution_mode") or "").lower() == "immediately" and not test
        events = self.backend.run(request)
        mapper = EventMapper(session_id="", forward_all=True)
        trace: list[dict[str, Any]] = []
        content: list[str] = []
        try:
            async for event in _flatten(events):
                kind = event.WhichOneof("event")
                if kind == "heartbeat":
                    continue
                if immediate:  # the run is created and durable: answer now, it goes on without us
                    return 202, {"code": 0, "message": "success",
                                 "data": {"run_id": event.run_id, "session_id": event.session_id, "status": "running"}}
                if kind == "message_delta":
                    content.append(event.message_delta.content)
                if test:
                    mapped = mapper.map(event)
                    if mapped is not None:
                        trace.append(mapped)
                if kind == "workflow_finished":
                    return 200, self._finished(event, "".join(content), trace if test else None)
        except errors.AgentCanvasError as exc:
            raise from_domain(exc, not_found="Agent not found.", denied=DENIED) from None
        finally:
            await events.aclose()
        raise ApiError(RetCode.EXCEPTION_ERROR, "the run's event stream ended before the run did")

    @staticmethod
    def _finished(event: orchestrator_pb2.RunEvent, content: str, trace: list[dict[str, Any]] | None) -> dict[str, Any]:
        done = event.workflow_finished
        status = {common_pb2.RUN_STATUS_SUCCEEDED: "succeeded", common_pb2.RUN_STATUS_FAILED: "failed",
                  common_pb2.RUN_STATUS_CANCELLED: "cancelled", common_pb2.RUN_STATUS_PAUSED: "paused"}.get(done.status, "unknown")
        data: dict[str, Any] = {"run_id": event.run_id, "session_id": event.session_id, "status": status,
                                "content": content, "outputs": from_struct(done.outputs),
                                "usage": {"prompt_tokens": done.usage.prompt_tokens,
                                          "completion_tokens": done.usage.completion_tokens,
                                          "total_tokens": done.usage.total_tokens}}
        if trace is not None:
            data["events"] = trace
        if done.HasField("error") and done.status != common_pb2.RUN_STATUS_SUCCEEDED:
            return {"code": int(RetCode.EXCEPTION_ERROR), "message": error_text(done.error), "data": data}
        return {"code": 0, "message": "success", "data": data}
