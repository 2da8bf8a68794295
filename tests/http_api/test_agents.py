"""RAGFlow's list parameters and shapes on /agents and /agents/{id}/sessions, read raw over HTTP."""

from __future__ import annotations

import pytest

from tests.http_api.support import HELLO, client, create_agent, create_session

pytestmark = pytest.mark.timeout(300)


def test_listing_agents_pages_sorts_and_counts_as_ragflow(cluster):
    for title in ("zeta list", "alpha list", "Mid list"):
        create_agent(cluster, title)
    with client(cluster) as http:
        ascending = http.get("/api/v1/agents", params={"keywords": "list", "orderby": "title", "desc": "False",
                                                       "page": 1, "page_size": 2}).json()
        second = http.get("/api/v1/agents", params={"keywords": "list", "orderby": "title", "desc": "false",
                                                    "page": 2, "page_size": 2}).json()
        descending = http.get("/api/v1/agents", params={"keywords": "LIST", "orderby": "title", "desc": "True"}).json()
    assert ascending["code"] == 0 and ascending["message"] == "success"
    assert [a["title"] for a in ascending["data"]["canvas"]] == ["alpha list", "Mid list"]
    assert [a["title"] for a in second["data"]["canvas"]] == ["zeta list"]
    assert ascending["data"]["total"] == second["data"]["total"] == 3
    assert [a["title"] for a in descending["data"]["canvas"]] == ["zeta list", "Mid list", "alpha list"]
    item = ascending["data"]["canvas"][0]
    assert "dsl" not in item and item["canvas_category"] == "agent_canvas" and item["type"] == "agent"


def test_an_agent_is_created_updated_and_its_sessions_listed(cluster):
    with client(cluster) as http:
        created = http.post("/api/v1/agents", json={"title": "shapes", "dsl": HELLO, "description": "d"}).json()
        agent_id = created["data"]["id"]
        assert created["data"]["dsl"]["components"].keys() == HELLO["components"].keys()
        updated = http.put(f"/api/v1/agents/{agent_id}", json={"title": "shapes 2", "description": None}).json()
        assert updated["code"] == 0 and isinstance(updated["data"]["update_time"], int)
        got = http.get(f"/api/v1/agents/{agent_id}").json()["data"]
        assert got["title"] == "shapes 2" and got["description"] == "d"  # null fields are left alone
        assert got["create_date"] and got["update_time"] >= got["create_time"]
        sessions = [create_session(cluster, agent_id) for _ in range(3)]
        listed = http.get(f"/api/v1/agents/{agent_id}/sessions", params={"page_size": 2, "dsl": "false"}).json()
        assert listed["code"] == 0 and listed["total"] == 3 and len(listed["data"]) == 2
        assert all(row["agent_id"] == agent_id and "dsl" not in row for row in listed["data"])
        for column in ("dsl", "message"):  # objects and lists have no order: the store's order is kept
            by_object = http.get(f"/api/v1/agents/{agent_id}/sessions", params={"orderby": column}).json()
            assert by_object["code"] == 0 and len(by_object["data"]) == 3, by_object
        one = http.get(f"/api/v1/agents/{agent_id}/sessions/{sessions[0]}").json()["data"]
        assert one["id"] == sessions[0] and one["dialog_id"] == agent_id and one["dsl"]["components"]
        partial = http.request("DELETE", f"/api/v1/agents/{agent_id}/sessions", json={"ids": [sessions[0], "0" * 32]}).json()
        assert partial == {"code": 0, "data": {"success_count": 1, "errors": [f"The agent doesn't own the session {'0' * 32}"]}}
        assert http.delete(f"/api/v1/agents/{agent_id}/sessions/{sessions[1]}").json() == {"code": 0}
        assert [row["id"] for row in http.get(f"/api/v1/agents/{agent_id}/sessions").json()["data"]] == [sessions[2]]
        assert http.request("DELETE", f"/api/v1/agents/{agent_id}", json={}).json() == {"code": 0, "message": "success", "data": True}
        assert http.get(f"/api/v1/agents/{agent_id}").json()["code"] == 102
