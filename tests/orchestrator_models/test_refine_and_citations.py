"""Retrieval's multi-turn question refinement and citations (instructions, optional second pass),
through the real llm_gateway and a scripted OpenAI-compatible server; Retrieval on the RAGFlow HTTP
backend served by the local API server (it records what was searched). Store: in memory."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.common.structs import from_struct, to_struct
from services.orchestrator.adapters.memory import InMemoryRunStore
from tests.orchestrator.support.harness import dsl
from tests.support import openai_server
from tests.support.generic_llm import generic_reply
from tests.support.llm_stack import AUTH, llm_stack
from tests.support.web_apis import start_web_apis


@pytest.fixture(scope="module")
async def stack(tmp_path_factory):
    store = InMemoryRunStore()
    with start_web_apis() as apis:
        tools = apis.tools_config()
        tools["retrieval"] = {"backend": "ragflow", "ragflow": tools["retrieval"]["ragflow"]}
        async with llm_stack(tmp_path_factory.mktemp("cite"), provider=openai_server.ScriptedOpenAIServer(default=generic_reply),
                             gateway={"retry": {"max_attempts": 1}}, extra={"tools": tools}, store=store) as (stub, provider):
            yield stub, provider, apis, store


def rag_canvas(retrieval: dict[str, Any] | None = None, llm: dict[str, Any] | None = None) -> dict[str, Any]:
    return dsl({
        "begin": {"type": "Begin", "down": ["retrieval:0"]},
        "retrieval:0": {"type": "Retrieval", "params": {"query": "{sys.query}", "dataset_ids": ["ds1"], **(retrieval or {})},
                        "down": ["llm"]},
        "llm": {"type": "LLM", "params": {"llm_id": "", "sys_prompt": "Knowledge:\n{retrieval:0@formalized_content}",
                                          "prompts": [{"role": "user", "content": "{sys.query}"}], **(llm or {})},
                "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}},
    })


async def run(stub, canvas: dict[str, Any], query: str, session_id: str = "") -> list[Any]:
    request = orchestrator_pb2.RunCanvasRequest(dsl=to_struct(canvas), query=query, session_id=session_id)
    events = [e async for e in stub.RunCanvas(request, metadata=AUTH, timeout=60)]
    end = of(events, "workflow_finished")[0]
    assert end.status == common_pb2.RUN_STATUS_SUCCEEDED, end.error
    return events


def of(events, kind: str) -> list[Any]:
    return [getattr(e, kind) for e in events if e.WhichOneof("event") == kind]


def searched(apis, before: int) -> list[str]:
    return [r.body["question"] for r in apis.of("ragflow")[before:]]


async def test_refine_multiturn_rewrites_the_question_from_the_history_before_retrieving(stack):
    stub, provider, apis, store = stack
    session = store.create_session()
    canvas = rag_canvas({"refine_multiturn": True})

    before, calls = len(apis.of("ragflow")), len(provider.chat_bodies)
    first = await run(stub, canvas, "Tell me about solar panels", session.id)
    assert searched(apis, before) == ["Tell me about solar panels"]  # no history yet: searched as asked
    assert len(provider.chat_bodies) == calls + 1  # only the answer
    first_answer = of(first, "message_end")[0].content

    provider.queue(openai_server.Reply(content="How efficient are solar panels?"))
    before, calls = len(apis.of("ragflow")), len(provider.chat_bodies)
    second = await run(stub, canvas, "How efficient are they?", session.id)
    assert searched(apis, before) == ["How efficient are solar panels?"]
    rewrite = provider.chat_bodies[calls]
    prompt = json.dumps(rewrite["messages"])
    assert "user: Tell me about solar panels" in prompt and f"assistant: {first_answer}" in prompt
    assert "Last question: How efficient are they?" in prompt
    node = next(n for n in of(second, "node_finished") if n.component_id == "retrieval:0")
    assert from_struct(node.inputs) == {"query": "How efficient are solar panels?", "question": "How efficient are they?"}
    # The answer still sees the user's own words; the knowledge came from the rewritten question.
    answer_body = provider.chat_bodies[calls + 1]
    assert answer_body["messages"][-1]["content"] == "How efficient are they?"
    assert "Passage 0 answering: How efficient are solar panels?" in answer_body["messages"][0]["content"]
    assert of(second, "workflow_finished")[0].usage.calls == 2


async def test_an_llm_after_retrieval_is_asked_for_citations_with_the_chunks_ids(stack):
    stub, provider, _, _ = stack
    calls = len(provider.chat_bodies)
    events = await run(stub, rag_canvas(), "wind turbines")
    system = provider.chat_bodies[calls]["messages"][0]["content"]
    assert "ID: 0" in system and "ID: 1" in system and "[ID:<n>]" in system
    chunks = from_struct(of(events, "message_end")[0].reference)["chunks"]
    assert [c["citation_id"] for c in chunks] == list(range(len(chunks))) and len(chunks) >= 2
    assert len(provider.chat_bodies) == calls + 1  # no second pass unless asked for
    # cite: false turns the instruction off.
    calls = len(provider.chat_bodies)
    await run(stub, rag_canvas(llm={"cite": False}), "wind turbines")
    assert "[ID:<n>]" not in provider.chat_bodies[calls]["messages"][0]["content"]


async def test_citation_second_pass_inserts_markers_when_the_answer_has_none(stack):
    stub, provider, _, _ = stack
    canvas = rag_canvas(llm={"citation_second_pass": True})
    provider.queue(openai_server.Reply(content="Wind turbines turn wind into power.", reasoning_content="Thinking it over"),
                   openai_server.Reply(content="Wind turbines turn wind into power. [ID:0]"))
    calls = len(provider.chat_bodies)
    events = await run(stub, canvas, "wind turbines")
    deltas = "".join(d.content for d in of(events, "message_delta"))
    assert deltas == "Wind turbines turn wind into power. [ID:0]" == of(events, "message_end")[0].content
    assert "Thinking it over" in "".join(t.content for t in of(events, "think_delta"))  # the first pass's reasoning
    second = provider.chat_bodies[calls + 1]
    user = second["messages"][-1]["content"]
    assert "ID: 0" in user and "Answer:\nWind turbines turn wind into power." in user
    assert "citation markers" in second["messages"][0]["content"]
    assert of(events, "workflow_finished")[0].usage.calls == 2

    # An answer that already cites is shown as it is: no second call.
    provider.queue(openai_server.Reply(content="Turbines [ID:1] spin."))
    calls = len(provider.chat_bodies)
    events = await run(stub, canvas, "wind turbines")
    assert "".join(d.content for d in of(events, "message_delta")) == "Turbines [ID:1] spin."
    assert len(provider.chat_bodies) == calls + 1


@pytest.mark.parametrize("second", ["Wind turbines convert wind into electricity. [ID:0]",  # words changed
                                    "Wind turbines turn wind into power. [ID:0] Also solar. [ID:1]",  # words added
                                    "Wind turbines [ID:0]"])  # words dropped
async def test_a_second_pass_that_changes_the_words_falls_back_to_the_uncited_answer(stack, second):
    stub, provider, _, _ = stack
    canvas = rag_canvas(llm={"citation_second_pass": True})
    provider.queue(openai_server.Reply(content="Wind turbines turn wind into power."), openai_server.Reply(content=second))
    events = await run(stub, canvas, "wind turbines")
    deltas = "".join(d.content for d in of(events, "message_delta"))
    assert deltas == "Wind turbines turn wind into power." == of(events, "message_end")[0].content
    assert of(events, "workflow_finished")[0].usage.calls == 2  # the pass was made, its text not shown


async def test_citation_second_pass_of_an_agent_with_a_retrieval_tool(stack):
    stub, provider, _, _ = stack
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["agent"]},
        "agent": {"type": "Agent", "params": {
            "llm_id": "", "sys_prompt": "Answer from the knowledge base.", "citation_second_pass": True,
            "tools": [{"component_name": "Retrieval", "name": "KB", "params": {"dataset_ids": ["ds1"]}}],
            "prompts": [{"role": "user", "content": "{sys.query}"}]}, "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{agent@content}"]}},
    })
    call = {"id": "c1", "name": "search_my_dateset", "arguments": json.dumps({"query": "tides"})}
    provider.queue(openai_server.Reply(content="", tool_calls=[call], finish_reason="tool_calls"),
                   openai_server.Reply(content="Tides move water twice a day."),
                   openai_server.Reply(content="Tides move water twice a day. [ID:0]"))
    calls = len(provider.chat_bodies)
    events = await run(stub, canvas, "tides")
    assert "[ID:<n>]" in provider.chat_bodies[calls]["messages"][0]["content"]
    deltas = "".join(d.content for d in of(events, "message_delta"))
    assert deltas == "Tides move water twice a day. [ID:0]"  # the uncited answer never reached the Message
    agent = next(n for n in of(events, "node_finished") if n.component_id == "agent")
    assert from_struct(agent.outputs)["content"] == deltas
    assert len(provider.chat_bodies) == calls + 3


async def test_an_agent_with_refine_multiturn_answers_the_standalone_question(stack):
    stub, provider, apis, store = stack
    session = store.create_session()
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["agent"]},
        "agent": {"type": "Agent", "params": {
            "llm_id": "", "sys_prompt": "Answer from the knowledge base.", "refine_multiturn": True,
            "tools": [{"component_name": "Retrieval", "name": "KB", "params": {"dataset_ids": ["ds1"]}}],
            "prompts": [{"role": "user", "content": "{sys.query}"}]}, "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{agent@content}"]}},
    })
    calls = len(provider.chat_bodies)
    await run(stub, canvas, "Tell me about heat pumps", session.id)
    first_rounds = provider.chat_bodies[calls:]
    assert first_rounds[0]["messages"][-1]["content"] == "Tell me about heat pumps"  # nothing to refine yet

    provider.queue(openai_server.Reply(content="What do heat pumps cost?"))
    calls = len(provider.chat_bodies)
    events = await run(stub, canvas, "What do they cost?", session.id)
    rewrite, round0 = provider.chat_bodies[calls], provider.chat_bodies[calls + 1]
    assert "user: Tell me about heat pumps" in json.dumps(rewrite["messages"])
    assert "Last question: What do they cost?" in rewrite["messages"][-1]["content"]
    assert round0["messages"][-1] == {"role": "user", "content": "What do heat pumps cost?"}
    assert any(m["role"] == "assistant" for m in round0["messages"])  # the history window is still there
    assert "What do heat pumps cost?" in of(events, "message_end")[0].content  # the generic model quotes it


@pytest.mark.parametrize("setting, rewrites", [(None, True), (False, False)])
async def test_an_agent_rewrites_a_follow_up_question_by_default_as_ragflow_does(stack, setting, rewrites):
    """RAGFlow's Agent rewrites the last question once its prompt has more than 3 messages; so does ours
    unless refine_multiturn is set false. The first turn (nothing to rewrite) costs no extra call."""
    stub, provider, _, store = stack
    session = store.create_session()
    params = {"llm_id": "", "sys_prompt": "Answer briefly.", "prompts": [{"role": "user", "content": "{sys.query}"}]}
    if setting is not None:
        params["refine_multiturn"] = setting
    canvas = dsl({"begin": {"type": "Begin", "down": ["agent"]},
                  "agent": {"type": "Agent", "params": params, "down": ["msg"]},
                  "msg": {"type": "Message", "params": {"content": ["{agent@content}"]}}})
    calls = len(provider.chat_bodies)
    await run(stub, canvas, "Tell me about heat pumps", session.id)
    assert len(provider.chat_bodies) == calls + 1
    provider.queue(openai_server.Reply(content="What do heat pumps cost?"))
    calls = len(provider.chat_bodies)
    events = await run(stub, canvas, "What do they cost?", session.id)
    bodies = provider.chat_bodies[calls:]
    if rewrites:
        assert len(bodies) == 2 and "Last question: What do they cost?" in bodies[0]["messages"][-1]["content"]
        assert bodies[1]["messages"][-1] == {"role": "user", "content": "What do heat pumps cost?"}
    else:
        assert len(bodies) == 1 and bodies[0]["messages"][-1] == {"role": "user", "content": "What do they cost?"}
    assert of(events, "workflow_finished")[0].usage.calls == len(bodies)
