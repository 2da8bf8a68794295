"""The `openai` Python client (nobody here wrote it) against the OpenAI-compatible agent routes."""

from __future__ import annotations

import openai
import pytest

from tests.http_api.sse import parse
from tests.http_api.stack import TOKEN
from tests.http_api.support import RETRIEVAL, client, create_agent, create_session

pytestmark = pytest.mark.timeout(300)


def openai_client(cluster, agent_id: str) -> openai.OpenAI:
    import httpx

    return openai.OpenAI(api_key=TOKEN, base_url=f"{cluster.base_url}/api/v1/agents_openai/{agent_id}",
                         http_client=httpx.Client(trust_env=False), max_retries=0)


def test_openai_client_gets_a_whole_completion(cluster):
    agent_id = create_agent(cluster, "OpenAI blocking")
    completion = openai_client(cluster, agent_id).chat.completions.create(
        model="anything", messages=[{"role": "system", "content": "ignored"}, {"role": "user", "content": "Ping?"}])
    assert completion.object == "chat.completion" and completion.model == agent_id
    choice = completion.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    assert choice.message.content == "Generic answer to: Ping?"
    assert completion.usage.total_tokens > 0


def test_openai_client_streams_and_the_stream_ends_with_finish_reason_stop(cluster):
    agent_id = create_agent(cluster, "OpenAI stream")
    stream = openai_client(cluster, agent_id).chat.completions.create(
        model="anything", messages=[{"role": "user", "content": "Stream it"}], stream=True)
    chunks = list(stream)
    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    answer = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    assert answer == "Generic answer to: Stream it"
    reasoning = "".join(getattr(chunk.choices[0].delta, "reasoning_content", None) or "" for chunk in chunks)
    assert reasoning.startswith("Let me think about")  # not mixed into the answer
    assert [chunk.choices[0].finish_reason for chunk in chunks][-1] == "stop"
    assert all(chunk.choices[0].finish_reason is None for chunk in chunks[:-1])


def test_openai_compatible_flag_on_the_completions_route_with_a_session_and_a_reference(cluster):
    agent_id = create_agent(cluster, "OpenAI flag", RETRIEVAL)
    session_id = create_session(cluster, agent_id)
    with client(cluster) as http:
        raw = http.post("/api/v1/agents/chat/completions", json={
            "agent_id": agent_id, "openai-compatible": True, "session_id": session_id, "stream": True,
            "messages": [{"role": "user", "content": "renewable energy sources"}]}).content
        blocking = http.post("/api/v1/agents/chat/completions", json={
            "agent_id": agent_id, "openai-compatible": True, "session_id": session_id,
            "messages": [{"role": "user", "content": "renewable energy sources"}]}).json()
    chunks, ended = parse(raw, space=True)  # RAGFlow writes `data: ` with a space in this mode
    assert ended and {chunk["id"] for _, chunk in chunks} == {session_id}
    references = [chunk["choices"][0]["delta"]["reference"] for _, chunk in chunks if "reference" in chunk["choices"][0]["delta"]]
    assert len(references) == 1 and references[0]["chunks"]
    assert chunks[-1][1]["choices"][0]["finish_reason"] == "stop"
    assert blocking["object"] == "chat.completion" and "code" not in blocking
    assert blocking["choices"][0]["message"]["reference"]["chunks"]


def test_openai_mode_without_messages_is_refused_with_ragflows_code(cluster):
    agent_id = create_agent(cluster, "OpenAI empty")
    with client(cluster) as http:
        refused = http.post(f"/api/v1/agents_openai/{agent_id}/chat/completions", json={"model": "x", "messages": []})
    assert refused.status_code == 200
    assert refused.json() == {"code": 102, "message": "You must provide at least one message."}
