"""RAGFlow's SSE stream read raw with httpx: framing byte for byte, reattaching with Last-Event-ID with
nothing lost or repeated, a reader that goes away leaving its run running, pause and resume."""

from __future__ import annotations


import pytest

from tests.http_api.sse import parse, read_until
from tests.http_api.support import client, create_agent, create_session
from tests.support.openai_server import Reply, Stream

pytestmark = pytest.mark.timeout(300)

FORM = {
    "components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["UserFillUp:Ask"], "upstream": []},
        "UserFillUp:Ask": {"obj": {"component_name": "UserFillUp", "params": {
            "enable_tips": True, "tips": "Who are you?",
            "inputs": {"name": {"name": "Your name", "type": "line", "optional": False}}}},
            "downstream": ["Message:Hello"], "upstream": ["begin"]},
        "Message:Hello": {"obj": {"component_name": "Message", "params": {"content": ["Hello, {UserFillUp:Ask@name}!"]}},
                          "downstream": [], "upstream": ["UserFillUp:Ask"]},
    },
    "globals": {"sys.query": "", "sys.user_id": "", "sys.conversation_turns": 0, "sys.files": [], "sys.history": []},
}


def kinds(events) -> list[str]:
    return [payload.get("event") for _, payload in events]


def text(events) -> str:
    return "".join(payload["data"].get("content", "") for _, payload in events if payload.get("event") == "message")


def test_the_stream_is_framed_as_ragflow_frames_it(cluster):
    agent_id = create_agent(cluster, "SSE framing")
    session_id = create_session(cluster, agent_id)
    answer = "Grüße aus 東京 ☀"
    cluster.model.queue(Reply(content=answer, reasoning_content="Hmm, 考えて", chunk_size=4))
    with client(cluster) as http, http.stream("POST", "/api/v1/agents/chat/completions", json={
            "agent_id": agent_id, "session_id": session_id, "query": "Hallo", "stream": True}) as response:
        raw = response.read()
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["x-accel-buffering"] == "no"
        run_id = response.headers["x-run-id"]
    assert "東京".encode() in raw and b"\\u" not in raw  # UTF-8 text, not escapes
    events, ended = parse(raw)
    assert ended
    ids = [event_id for event_id, _ in events]
    assert all(isinstance(i, int) for i in ids) and ids == sorted(set(ids))  # every event has an increasing id
    assert {payload["message_id"] for _, payload in events} == {run_id}
    assert {payload["session_id"] for _, payload in events} == {session_id}
    # the session path: no workflow_started/node_started; node_finished and the usage-only workflow_finished stay
    assert "workflow_started" not in kinds(events) and "node_started" not in kinds(events)
    messages = [payload["data"] for _, payload in events if payload["event"] == "message"]
    start = next(i for i, data in enumerate(messages) if data.get("start_to_think"))
    end = next(i for i, data in enumerate(messages) if data.get("end_to_think"))
    assert messages[start] == {"content": "", "start_to_think": True} and messages[end] == {"content": "", "end_to_think": True}
    assert "".join(data["content"] for data in messages[start + 1:end]) == "Hmm, 考えて"
    assert "".join(data["content"] for data in messages[end + 1:]) == answer
    assert kinds(events)[-1] == "workflow_finished"
    assert set(events[-1][1]["data"]["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens", "calls"}


def test_a_stream_without_a_session_forwards_every_canvas_event(cluster):
    agent_id = create_agent(cluster, "SSE workflow path")
    with client(cluster) as http:
        raw = http.post("/api/v1/agents/chat/completions", json={"agent_id": agent_id, "query": "Hi", "stream": True}).content
    events, ended = parse(raw)
    assert ended and kinds(events)[0] == "workflow_started"
    assert "node_started" in kinds(events) and kinds(events)[-1] == "workflow_finished"
    finished = events[-1][1]["data"]
    assert finished["status"] == "succeeded" and "outputs" in finished and "elapsed_time" in finished
    assert events[0][1]["session_id"]  # a session was made for it, as RAGFlow does


def slow_answer(words: int = 12) -> Stream:
    return Stream(chunks=[{"content": f"w{i} "} for i in range(words)], chunk_delay_s=0.15)


def test_a_dropped_stream_resumes_with_last_event_id_with_nothing_lost_or_repeated(cluster):
    agent_id = create_agent(cluster, "SSE reattach")
    session_id = create_session(cluster, agent_id)
    cluster.model.queue(slow_answer())
    body = {"agent_id": agent_id, "session_id": session_id, "query": "Talk slowly", "stream": True}
    with client(cluster) as http, http.stream("POST", "/api/v1/agents/chat/completions", json=body) as response:
        first_raw = read_until(response, lambda _, payload: payload.get("event") == "message"
                               and payload["data"].get("content") == "w2 ")
    # the connection is gone mid-answer; the run goes on without a reader
    first, ended = parse(first_raw)
    assert not ended and kinds(first)[-1] == "message"
    last_id = first[-1][0]
    with client(cluster) as http:
        rest_raw = http.post("/api/v1/agents/chat/completions", json=body, headers={"Last-Event-ID": str(last_id)}).content
        full_raw = http.post("/api/v1/agents/chat/completions", json=body, headers={"Last-Event-ID": "0"}).content
    rest, rest_ended = parse(rest_raw)
    full, _ = parse(full_raw)
    assert rest_ended and kinds(rest)[-1] == "workflow_finished" and rest[-1][1]["data"]["status"] == "succeeded"
    assert all(event_id > last_id for event_id, _ in rest)
    assert first + rest == full  # the same events, each once, in order
    assert text(first + rest) == "".join(f"w{i} " for i in range(12))


def test_a_reader_that_asks_for_it_cancels_its_run_by_going_away(cluster):
    agent_id = create_agent(cluster, "SSE cancel on disconnect")
    session_id = create_session(cluster, agent_id)
    # 40 words a second apart: the cancel lands long before the answer could end, however busy the machine.
    cluster.model.queue(Stream(chunks=[{"content": f"w{i} "} for i in range(40)], chunk_delay_s=1.0))
    body = {"agent_id": agent_id, "session_id": session_id, "query": "Talk", "stream": True, "cancel_on_disconnect": True}
    # A stream sends a Message's text once the node finishes (TEXT_DELIVERY_CONFIRMED), so the reader leaves as
    # soon as the run exists: the response's headers come after the run's first event.
    with client(cluster) as http, http.stream("POST", "/api/v1/agents/chat/completions", json=body) as response:
        assert response.status_code == 200 and response.headers["X-Run-Id"]
    with client(cluster) as http:
        rest, ended = parse(http.post("/api/v1/agents/chat/completions", json=body,
                                      headers={"Last-Event-ID": "0"}).content)
    assert ended and rest[-1][1]["event"] == "workflow_finished"
    assert rest[-1][1]["data"]["status"] == "cancelled"
    assert len(text(rest).split()) < 40
    assert "Traceback" not in cluster.log_tail("http_api", 1 << 20)  # a reader going away is no error


def test_a_paused_user_fill_up_asks_for_inputs_and_resumes_with_them(cluster):
    agent_id = create_agent(cluster, "SSE form", FORM)
    session_id = create_session(cluster, agent_id)
    with client(cluster) as http:
        paused, ended = parse(http.post("/api/v1/agents/chat/completions", json={
            "agent_id": agent_id, "session_id": session_id, "query": "hi", "stream": True}).content)
        assert ended and kinds(paused)[-1] == "user_inputs"
        asked = paused[-1][1]["data"]
        assert asked["tips"] == "Who are you?" and "name" in asked["inputs"]
        resumed = http.post("/api/v1/agents/chat/completions", json={
            "agent_id": agent_id, "session_id": session_id, "stream": False,
            "inputs": {"name": {"type": "line", "value": "Ada"}}}).json()
    assert resumed["code"] == 0 and resumed["data"]["data"]["content"] == "Hello, Ada!"


def test_the_non_streamed_answer_is_the_last_message_end_with_the_whole_text(cluster):
    agent_id = create_agent(cluster, "non-stream")
    session_id = create_session(cluster, agent_id)
    with client(cluster) as http:
        answer = http.post(f"/api/v1/agents/{agent_id}/completions", json={"session_id": session_id, "question": "Q?"}).json()
    assert answer["code"] == 0 and "message" not in answer
    event = answer["data"]
    assert event["event"] == "message_end" and event["session_id"] == session_id and event["task_id"] == session_id
    assert event["data"]["content"] == "Generic answer to: Q?"
    assert event["data"]["reference"] == {"chunks": {}, "doc_aggs": {}}
    assert event["data"]["usage"]["total_tokens"] > 0


def test_reattach_by_get_for_event_source_clients(cluster):
    agent_id = create_agent(cluster, "SSE GET reattach")
    with client(cluster) as http:
        response = http.post("/api/v1/agents/chat/completions", json={"agent_id": agent_id, "query": "Hi", "stream": True})
        run_id = response.headers["x-run-id"]
        live, _ = parse(response.content)
        replay, ended = parse(http.get(f"/api/v1/agents/{agent_id}/runs/{run_id}/events", headers={"Last-Event-ID": "2"}).content)
    assert ended and replay == [event for event in live if event[0] > 2]


def test_return_trace_adds_each_nodes_trace_to_the_answer(cluster):
    agent_id = create_agent(cluster, "trace")
    session_id = create_session(cluster, agent_id)
    with client(cluster) as http:
        answer = http.post("/api/v1/agents/chat/completions", json={
            "agent_id": agent_id, "session_id": session_id, "query": "Q", "return_trace": True}).json()
        plain = http.post("/api/v1/agents/chat/completions", json={
            "agent_id": agent_id, "session_id": session_id, "query": "Q"}).json()
    trace = answer["data"]["data"]["trace"]
    by_node = {item["component_id"]: item["trace"] for item in trace}
    assert set(by_node) == {"begin", "LLM:Answer", "Message:Reply"}  # in the order they finished
    assert by_node["LLM:Answer"][0]["outputs"]["content"] == "Generic answer to: Q"
    assert "trace" not in plain["data"]["data"]
