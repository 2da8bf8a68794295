"""Bad requests get RAGFlow's codes in a JSON body (with our reason in the message); nothing anyone
sends produces an HTML page or a traceback."""

from __future__ import annotations

import httpx
import pytest

from tests.http_api.support import HELLO, client, create_agent, create_session
from tests.support.openai_server import Fail

pytestmark = pytest.mark.timeout(300)
MISSING = "0" * 32


def body_of(response: httpx.Response) -> dict:
    assert response.headers["content-type"].startswith("application/json"), response.text[:300]
    value = response.json()
    assert isinstance(value["code"], int) and isinstance(value["message"], str) and value["message"]
    return value


def test_authentication_failures_are_401_with_a_json_body(cluster):
    with httpx.Client(base_url=cluster.base_url, trust_env=False) as http:
        missing = http.get("/api/v1/agents")
        wrong = http.get("/api/v1/agents", headers={"Authorization": "Bearer nope"})
        bare = http.get("/api/v1/agents", headers={"Authorization": "t-e2e"})  # RAGFlow accepts a bare key
        lower = http.get("/api/v1/agents", headers={"Authorization": "bearer t-e2e"})
    assert missing.status_code == 401 and body_of(missing)["code"] == 401 and "TOKEN_MISSING" in missing.json()["message"]
    assert wrong.status_code == 401 and body_of(wrong)["code"] == 401 and "TOKEN_INVALID" in wrong.json()["message"]
    assert bare.json()["code"] == 0 and lower.json()["code"] == 0


def test_unknown_routes_and_methods_are_json(cluster):
    with client(cluster) as http:
        unknown = http.get("/api/v1/nothing/here")
        root = http.get("/")
        method = http.patch("/api/v1/agents")
    assert unknown.status_code == 404 and body_of(unknown) == {
        "code": 404, "message": "Not Found: /api/v1/nothing/here", "data": None, "error": "Not Found"}
    assert root.status_code == 404 and body_of(root)["code"] == 404
    assert method.status_code == 405 and body_of(method)["code"] == 405


@pytest.mark.parametrize(("payload", "code", "message"), [
    ({}, 101, "No title in request."),
    ({"title": "x"}, 101, "No DSL data in request."),
    ({"title": "x", "dsl": "{not json"}, 101, "Invalid DSL: not JSON"),
    ({"title": "x", "dsl": '{"components": NaN}'}, 101, "Invalid DSL: not JSON"),
    ({"title": "x", "dsl": "[" * 5000 + "]" * 5000}, 101, "nested more than"),
    ({"title": "x", "dsl": '{"components": {}, "n": 18014398509481985}'}, 101, "`n`: the integer"),
    ({"title": "x", "dsl": HELLO, "canvas_category": ["agent"]}, 101, "`canvas_category` must be one of"),
    ({"title": "x", "dsl": HELLO, "permission": {"me": 1}}, 101, "`permission` must be"),
    ({"title": "x", "dsl": [1, 2]}, 101, "Invalid DSL: must be a JSON object."),
    ({"title": 5, "dsl": HELLO}, 101, "`title` must be a string."),
    ({"title": "x", "dsl": {"components": "nope"}}, 101, "canvas.dsl"),  # the store's field, named
])
def test_creating_an_agent_badly(cluster, payload, code, message):
    with client(cluster) as http:
        answer = body_of(http.post("/api/v1/agents", json=payload))
    assert answer["code"] == code and message in answer["message"], answer


def test_bodies_that_are_not_json_objects(cluster):
    with client(cluster) as http:
        for content in (b"{", b"[1]", b"\xff\xfe", b"NaN", b'"text"'):
            answer = body_of(http.post("/api/v1/agents", content=content, headers={"content-type": "application/json"}))
            assert answer["code"] == 101, (content, answer)
        deep = http.post("/api/v1/agents", content=b'{"title": "x", "dsl": ' + b"[" * 5000 + b"]" * 5000 + b"}")
        assert body_of(deep)["code"] == 101 and "nested" in deep.json()["message"]
        nested = {"title": "x", "dsl": {"components": {}}}
        node = nested["dsl"]["components"]
        for _ in range(70):
            node["a"] = {}
            node = node["a"]
        too_deep = body_of(http.post("/api/v1/agents", json=nested))
        assert too_deep["code"] == 101 and too_deep["message"].startswith("`dsl.components.a.a")
        huge = body_of(http.post("/api/v1/agents/chat/completions", json={"agent_id": "a", "inputs": {"n": 2**60}}))
        assert huge["code"] == 101 and "`inputs.n`" in huge["message"]
        too_big = http.post("/api/v1/agents", content=b" " * (17 << 20))
    assert too_big.status_code == 413 and body_of(too_big)["code"] == 101


def test_unknown_agents_and_sessions(cluster):
    agent_id = create_agent(cluster, "errors: agent")
    other = create_agent(cluster, "errors: other agent")
    session_id = create_session(cluster, agent_id)
    with client(cluster) as http:
        assert body_of(http.get(f"/api/v1/agents/{MISSING}"))["message"].startswith("canvas not found.")
        assert body_of(http.get("/api/v1/agents/not-an-id"))["code"] == 102
        assert body_of(http.post(f"/api/v1/agents/{MISSING}/sessions", json={}))["message"].startswith("Agent not found.")
        assert body_of(http.get(f"/api/v1/agents/{other}/sessions/{session_id}"))["code"] == 103
        chat = "/api/v1/agents/chat/completions"
        assert body_of(http.post(chat, json={"query": "x"})) == {"code": 101, "message": "`agent_id` is required."}
        assert body_of(http.post(chat, json={"agent_id": agent_id, "session_id": MISSING}))["message"] == "Session not found!"
        foreign = body_of(http.post(chat, json={"agent_id": other, "session_id": session_id, "stream": True}))
        assert foreign["code"] == 103 and foreign["message"] == "Session does not belong to the requested agent."
        unknown_agent = body_of(http.post(chat, json={"agent_id": MISSING, "query": "x", "stream": True}))
        assert unknown_agent["code"] == 102
        bad_resume = body_of(http.post(chat, json={"agent_id": agent_id, "session_id": session_id, "stream": True},
                                       headers={"Last-Event-ID": "seven"}))
        assert bad_resume["code"] == 101 and "Last-Event-ID" in bad_resume["message"]
        assert body_of(http.get("/api/v1/agents", params={"page_size": 1000}))["code"] == 100
        assert body_of(http.get("/api/v1/agents", params={"page": "x"}))["code"] == 100
        delete = body_of(http.request("DELETE", f"/api/v1/agents/{MISSING}", json={}))
        assert delete["code"] == 103 and delete["data"] is False


def test_a_failed_run_is_code_100_naming_its_reason_and_node(cluster):
    agent_id = create_agent(cluster, "errors: failing run")
    session_id = create_session(cluster, agent_id)
    cluster.model.queue(*[Fail(400)] * 4)  # the model refuses every attempt
    try:
        with client(cluster) as http:
            answer = body_of(http.post("/api/v1/agents/chat/completions", json={
                "agent_id": agent_id, "session_id": session_id, "query": "x"}))
    finally:
        cluster.model.clear()  # the next test's model answers again
    assert answer["code"] == 100 and "LLM:Answer" in answer["message"]


def test_nothing_answers_with_html(cluster):
    with client(cluster) as http:
        for method in ("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"):
            for path in ("/api/v1/agents", "/api/v1/agents/x", "/api/v1/agents/x/sessions", "/api/v1/agents/x/sessions/y",
                         "/api/v1/agents/chat/completions", "/api/v1/agents_openai/x/chat/completions", "/api/v1",
                         "/api/v1/agents/x/runs/y/events", "/%2e%2e/etc/passwd", "/api/v1/agents/%00"):
                response = http.request(method, path, content=b"{}")
                if method == "HEAD":
                    assert response.headers["content-type"].startswith("application/json")
                    continue
                assert response.headers["content-type"].startswith("application/json"), (method, path)
                assert isinstance(response.json()["code"], int), (method, path)
        # a request id that gRPC metadata cannot carry is replaced, not an error
        odd = http.get("/api/v1/agents", headers={"x-request-id": b"\xc3\xa9 not an id"})
        assert odd.json()["code"] == 0
    assert "Traceback" not in cluster.log_tail("http_api", 1 << 20)
