"""Begin's webhook mode fired with curl: answered after the run with its output, or at once (202)."""

from __future__ import annotations

import copy
import json
import subprocess

import pytest

from tests.http_api.sse import parse
from tests.http_api.stack import TOKEN
from tests.http_api.support import LOCAL_ENV, client, create_agent

pytestmark = pytest.mark.timeout(300)

HOOK = {
    "components": {
        "begin": {"obj": {"component_name": "Begin", "params": {"mode": "webhook", "methods": ["POST", "PUT"],
                                                                 "execution_mode": "Streaming"}},
                  "downstream": ["Message:Ack"], "upstream": []},
        "Message:Ack": {"obj": {"component_name": "Message", "params": {"content": ["Received {begin@body}"]}},
                        "downstream": [], "upstream": ["begin"]},
    },
    "globals": {"sys.query": "", "sys.user_id": "", "sys.conversation_turns": 0, "sys.files": [], "sys.history": []},
}


def curl(url: str, *args: str) -> tuple[int, dict]:
    done = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", "-H", f"Authorization: Bearer {TOKEN}", *args, url],
                          capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin", **LOCAL_ENV})
    assert done.returncode == 0, done.stderr
    body, _, status = done.stdout.rpartition("\n")
    return int(status), json.loads(body)


def test_a_webhook_fired_with_curl_answers_with_the_runs_output(cluster):
    agent_id = create_agent(cluster, "webhook: streaming", HOOK)
    status, body = curl(f"{cluster.base_url}/api/v1/agents/{agent_id}/webhook?source=ci", "-X", "POST",
                        "-H", "Content-Type: application/json", "-d", '{"order": "Ada-42"}')
    assert status == 200 and body["code"] == 0, body
    assert body["data"]["status"] == "succeeded" and "Ada-42" in body["data"]["content"]
    assert "events" not in body["data"]


def test_the_test_route_returns_the_runs_events_too(cluster):
    agent_id = create_agent(cluster, "webhook: test", HOOK)
    status, body = curl(f"{cluster.base_url}/api/v1/agents/{agent_id}/webhook/test", "-X", "PUT",
                        "-H", "Content-Type: application/x-www-form-urlencoded", "-d", "order=Form-7")
    assert status == 200 and body["code"] == 0 and "Form-7" in body["data"]["content"]
    kinds = [event["event"] for event in body["data"]["events"]]
    assert kinds[0] == "workflow_started" and kinds[-1] == "workflow_finished"
    begin = next(e for e in body["data"]["events"] if e["event"] == "node_finished" and e["data"]["component_id"] == "begin")
    request = begin["data"]["inputs"]["request"]
    assert request["method"] == "PUT" and request["body"] == {"order": "Form-7"}
    assert "authorization" not in {name.lower() for name in request["headers"]}  # the caller's key stays out of the run


def test_an_immediate_webhook_answers_202_with_the_run_which_goes_on(cluster):
    hook = copy.deepcopy(HOOK)
    hook["components"]["begin"]["obj"]["params"]["execution_mode"] = "Immediately"
    agent_id = create_agent(cluster, "webhook: immediately", hook)
    status, body = curl(f"{cluster.base_url}/api/v1/agents/{agent_id}/webhook", "-X", "POST", "-d", '{"order": "Now-1"}',
                        "-H", "Content-Type: application/json")
    assert status == 202 and body["code"] == 0 and body["data"]["run_id"]
    with client(cluster) as http:
        replay, ended = parse(http.get(f"/api/v1/agents/{agent_id}/runs/{body['data']['run_id']}/events").content)
    assert ended and replay[-1][1]["data"]["status"] == "succeeded"
    assert "Now-1" in "".join(p["data"].get("content", "") for _, p in replay if p["event"] == "message")


def test_webhook_refusals(cluster):
    agent_id = create_agent(cluster, "webhook: refusals", HOOK)
    plain = create_agent(cluster, "webhook: not a webhook")
    status, body = curl(f"{cluster.base_url}/api/v1/agents/{agent_id}/webhook", "-X", "DELETE")
    assert status == 405 and body["code"] == 101 and "POST, PUT" in body["message"]
    status, body = curl(f"{cluster.base_url}/api/v1/agents/{plain}/webhook", "-X", "POST", "-d", "{}")
    assert status == 200 and body["code"] == 102
    status, body = curl(f"{cluster.base_url}/api/v1/agents/{'0' * 32}/webhook", "-X", "POST", "-d", "{}")
    assert body == {"code": 102, "message": "Agent not found."}
    for unfit in ("[" * 5000 + "]" * 5000, '{"n": 18014398509481985}'):
        status, body = curl(f"{cluster.base_url}/api/v1/agents/{agent_id}/webhook", "-X", "POST", "-d", unfit,
                            "-H", "Content-Type: application/json")
        assert body["code"] == 101, (unfit[:20], body)
    # NaN is not JSON: the body reaches the canvas as the text it is, like any other non-JSON body
    status, body = curl(f"{cluster.base_url}/api/v1/agents/{agent_id}/webhook", "-X", "POST", "-d", '{"n": NaN}',
                        "-H", "Content-Type: application/json")
    assert status == 200 and body["code"] == 0 and body["data"]["content"] == 'Received {"n": NaN}', body
