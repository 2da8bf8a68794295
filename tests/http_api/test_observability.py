"""Each request is a server span continuing the caller's traceparent, and is counted by route and code."""

from __future__ import annotations

from starlette.testclient import TestClient

from services.common import telemetry
from services.common.settings import Config
from services.http_api.app import build_app

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_requests_are_spans_and_metrics(tmp_path, finished_spans):
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides(
        {"auth": {"embedded": False, "tokens": [{"token": "t-obs", "tenant": "acme", "user": "ann"}]}})
    with TestClient(build_app(config), raise_server_exceptions=False) as http:
        refused = http.get("/api/v1/agents", headers={"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"})
        bad = http.post("/api/v1/agents", headers={"Authorization": "Bearer t-obs"}, content=b"[")
    assert refused.status_code == 401 and bad.json()["code"] == 101
    spans = {span.name: span for span in finished_spans.get_finished_spans()}
    assert format(spans["GET /api/v1/agents"].context.trace_id, "032x") == TRACE  # the caller's trace goes on
    assert spans["GET /api/v1/agents"].attributes["ragflow.code"] == 401
    text = telemetry.metrics_text()
    assert 'agentcanvas_http_requests_total{code="401",method="GET",route="/api/v1/agents"}' in text
    assert 'agentcanvas_http_requests_total{code="101",method="POST",route="/api/v1/agents"}' in text
    assert 'agentcanvas_http_latency_seconds_count{route="/api/v1/agents"}' in text


def test_browsers_may_call_it_cross_origin_unless_turned_off(tmp_path):
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({"auth": {"embedded": False}})
    preflight = {"Origin": "https://chat.example", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization,content-type"}
    with TestClient(build_app(config)) as http:
        allowed = http.options("/api/v1/agents/chat/completions", headers=preflight)
    assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == "*"
    assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
    closed = config.with_overrides({"http": {"cors_origins": []}})
    with TestClient(build_app(closed)) as http:
        refused = http.options("/api/v1/agents/chat/completions", headers=preflight)
    assert "access-control-allow-origin" not in refused.headers and refused.json()["code"] == 405
