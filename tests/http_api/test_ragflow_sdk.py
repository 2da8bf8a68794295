"""The unmodified official `ragflow-sdk` 0.27.3 (from PyPI, in a venv of its own) against the facade on a
real stack: its whole agent surface, answers streamed and not, non-ASCII text and Retrieval references."""

from __future__ import annotations

import pytest

from tests.http_api.support import RETRIEVAL, create_agent, run_sdk
from tests.support.generic_llm import ANSWER_PREFIX
from tests.support.openai_server import Reply

pytestmark = pytest.mark.timeout(600)


def test_sdk_creates_lists_gets_updates_and_deletes_agents_and_sessions(cluster):
    seen = run_sdk(cluster, "crud", title="SDK agent", dsl=__import__("tests.http_api.support", fromlist=["HELLO"]).HELLO)
    assert seen["create"] is None
    assert "SDK agent" in seen["listed_titles"]
    assert seen["get"]["id"] == seen["agent_id"] and seen["get"]["title"] == "SDK agent"
    assert seen["get"]["description"] == "made by the SDK"
    assert "begin" in seen["get"]["components"]
    assert seen["updated"] == {"title": "SDK agent (renamed)", "description": "updated by the SDK"}
    session = seen["session"]
    assert session["agent_id"] == seen["agent_id"] and session["name"] == "first"
    assert session["message"] == [{"role": "assistant", "content": "Hi! Ask me anything."}]
    assert seen["listed_sessions"] == seen["created_sessions"]
    assert seen["listed_by_id"] == [session["id"]]
    assert seen["after_delete"] == [sid for sid in seen["created_sessions"] if sid != session["id"]]
    assert seen["after_delete_all"] == []
    assert seen["missing_agent"].startswith("canvas not found.")
    assert seen["duplicate"].startswith("SDK agent (renamed) already exists.")
    assert seen["agent_id"] not in seen["after_agent_delete"]


def test_sdk_asks_streamed_and_not(cluster):
    agent_id = create_agent(cluster, "SDK ask")
    seen = run_sdk(cluster, "ask", agent_id=agent_id, question="What is the capital of France?")
    [blocking] = seen["blocking"]
    assert blocking["content"] == f"{ANSWER_PREFIX} to: What is the capital of France?"
    assert blocking["role"] == "assistant" and blocking["id"]
    streamed = "".join(message["content"] for message in seen["streamed"])
    # RAGFlow streams reasoning as message text between its think markers; the answer follows it
    assert streamed.endswith(f"{ANSWER_PREFIX} to: What is the capital of France?")
    assert len(seen["streamed"]) > 2  # in pieces, not one block


def test_sdk_reads_a_non_ascii_answer_intact(cluster):
    agent_id = create_agent(cluster, "SDK non-ASCII")
    answer = "Réponse : 東京は晴れ ☀ — Привет"
    cluster.model.queue(Reply(content=answer, chunk_size=3), Reply(content=answer, chunk_size=3))
    seen = run_sdk(cluster, "ask", agent_id=agent_id, question="Wie geht's? 你好")
    assert seen["blocking"][0]["content"] == answer
    assert "".join(message["content"] for message in seen["streamed"]) == answer


def test_sdk_gets_the_reference_of_a_retrieval(cluster):
    agent_id = create_agent(cluster, "SDK retrieval", RETRIEVAL)
    seen = run_sdk(cluster, "ask", agent_id=agent_id, question="renewable energy sources")
    reference = seen["blocking"][0]["reference"]
    assert reference and any("Renewable energy" in chunk["content"] for chunk in reference)
    assert {"id", "content", "document_id", "document_name"} <= set(reference[0])
    ends = [message for message in seen["streamed"] if message["reference"]]
    assert len(ends) == 1 and ends[0]["content"] == ""
    assert [chunk["id"] for chunk in ends[0]["reference"]] == [chunk["id"] for chunk in reference]


def test_sdk_reports_a_bad_api_key(cluster):
    seen = run_sdk(cluster, "bad_key", api_key="not-a-key")
    assert seen["error"] and "401" in seen["error"]
