"""Conversation loops (core/dsl/conversation.py): a cycle through a node that waits for the user runs
one turn per user message, pausing at the waiting node; cycles without one stay CYCLE errors. Also
the G0 Answer migration and G0 ExeSQL's model repair against a real SQLite database."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
import yaml

from services.common.errors import InvalidArgumentError
from services.common.settings import Config
from services.orchestrator.adapters.memory import InMemoryRunStore
from services.orchestrator.core.dsl.loader import load
from services.orchestrator.core.dsl.validate import load_for_run, validate
from services.orchestrator.core.run_request import RunRequest
from services.orchestrator.core.ports import RunStatus
from services.orchestrator.tools import ToolRuntime, ToolsSettings
from tests.orchestrator.support.harness import dsl, finished, kinds, make_orchestrator, node_events, until
from tests.orchestrator.support.scripted_llm import ScriptedLlm

EXESQL = Path(__file__).parents[1] / "fixtures" / "ragflow_dsl" / "examples" / "exesql.json"


def echo_loop():
    """Begin -> ask (waits) -> echo -> show -> back to ask."""
    return dsl({
        "begin": {"type": "Begin", "down": ["ask"]},
        "ask": {"type": "UserFillUp", "down": ["echo"], "params": {
            "query_field": "message", "tips": "Say something",
            "inputs": {"message": {"name": "message", "type": "paragraph", "optional": False}}}},
        "echo": {"type": "StringTransform", "params": {"method": "merge", "script": "you said {ask@message} ({sys.query})"},
                 "down": ["show"]},
        "show": {"type": "Message", "params": {"content": ["{echo@result}"]}, "down": ["ask"]},
    })


async def turn(orch, session_id: str, query: str = "", inputs=None, canvas=None):
    record = await orch.start_run(RunRequest(dsl=canvas or echo_loop(), query=query, session_id=session_id,
                                             inputs=inputs or {}))
    events = [e async for e in orch.stream_events(record.id)]
    await orch.wait_idle()
    return events


def shown(events) -> list[str]:
    return [e.data["content"] for e in events if e.kind == "message_end"]


async def test_each_message_goes_round_the_loop_once_then_the_run_pauses_at_the_waiting_node():
    store = InMemoryRunStore()
    orch = make_orchestrator(store, conversation_max_turns=3)
    session = store.create_session()

    first = await turn(orch, session.id, "hello")
    assert shown(first) == ["you said hello (hello)"]
    assert kinds(first)[-2:] == ["user_inputs_required", "workflow_finished"]
    form = first[-2].data
    assert form["component_id"] == "ask" and set(form["inputs"]) == {"message"} and form["tips"] == "Say something"
    assert finished(first)["status"] == RunStatus.PAUSED

    # The next message resumes the paused run: the earlier turn is replayed, not run again.
    second = await turn(orch, session.id, "two")
    assert second[0].data["resumed"] is True
    assert shown(second) == ["you said two (two)"]
    assert node_events(second, "node_finished") == ["ask", "echo", "show"]
    assert finished(second)["status"] == RunStatus.PAUSED

    # An answer through `inputs` (a form client) works as well as the chat query.
    third = await turn(orch, session.id, inputs={"message": {"value": "three"}})
    assert shown(third) == ["you said three (three)"]
    # conversation_max_turns = 3: the third turn ends the loop, and so the run.
    assert finished(third)["status"] == RunStatus.SUCCEEDED
    assert node_events(third, "node_finished")[-1] == "ask~conversation"
    assert next(e for e in third if e.kind == "node_finished" and e.data["component_id"] == "ask~conversation"
                ).data["outputs"]["turns"] == 3

    state = (await store.get_session(session.id)).state
    assert state["paused_run_id"] == ""
    assert [m["content"] for m in state["history"] if m["role"] == "assistant"] == [
        "you said hello (hello)", "you said two (two)", "you said three (three)"]


async def test_a_first_run_without_a_message_waits_before_the_first_turn():
    store = InMemoryRunStore()
    orch = make_orchestrator(store)
    session = store.create_session()
    first = await turn(orch, session.id)
    assert shown(first) == [] and finished(first)["status"] == RunStatus.PAUSED
    again = await turn(orch, session.id)  # still no message: it waits again, nothing ran
    assert shown(again) == [] and finished(again)["status"] == RunStatus.PAUSED
    assert node_events(again, "node_finished") == []
    answered = await turn(orch, session.id, "now")
    assert shown(answered) == ["you said now (now)"]


async def test_a_conversation_resumes_on_another_replica():
    store = InMemoryRunStore()
    a, b = make_orchestrator(store, holder="a"), make_orchestrator(store, holder="b")
    session = store.create_session()
    await turn(a, session.id, "one")
    second = await turn(b, session.id, "two")
    assert shown(second) == ["you said two (two)"] and finished(second)["status"] == RunStatus.PAUSED
    third = await turn(a, session.id, "three")
    assert shown(third) == ["you said three (three)"]


def test_a_cycle_without_a_waiting_node_is_still_a_cycle_error():
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["a"]},
        "a": {"type": "StringTransform", "params": {"method": "merge", "script": "x"}, "down": ["b"]},
        "b": {"type": "StringTransform", "params": {"method": "merge", "script": "y"}, "down": ["a"]},
    })
    with pytest.raises(InvalidArgumentError) as caught:
        load_for_run(canvas)
    fields = {v.field: v.description for v in caught.value.violations}
    assert any(d.startswith("CYCLE:") and "a -> b -> a" in d for d in fields.values()), fields


def test_a_conversation_loop_must_be_entered_through_its_waiting_node():
    canvas = echo_loop()
    canvas["components"]["begin"]["downstream"] = ["echo"]  # skips the node that waits
    problems = validate(canvas).problems
    assert any(p.code == "CYCLE" and p.component_id == "echo" and "'ask'" in p.message for p in problems), problems


def test_a_conversation_container_cannot_be_written_in_a_dsl():
    canvas = echo_loop()
    canvas["components"]["begin"]["downstream"] = ["c"]
    canvas["components"]["c"] = {"obj": {"component_name": "Conversation", "params": {"entry": "ask"}},
                                 "downstream": [], "upstream": ["begin"]}
    assert any(p.code == "BAD_DSL" and p.component_id == "c" for p in validate(canvas).problems)


def test_g0_answer_on_a_cycle_becomes_message_plus_a_waiting_node():
    result = load(json.loads(EXESQL.read_text()))
    canvas = result.canvas
    assert canvas is not None and not [p for p in result.problems if p.code != "UNSUPPORTED"], result.problems
    nodes = canvas.nodes
    assert nodes["answer:0"].type == "Message"
    assert nodes["answer:0"].params["content"] == ["{exesql:0@formalized_content}"]
    wait = nodes["answer:0:await"]
    assert wait.type == "UserFillUp" and wait.params["query_field"] == "message" and wait.params["tips"] == "Hi there!"
    container = nodes["answer:0:await~conversation"]
    assert container.type == "Conversation" and canvas.start_child(container.id) == "answer:0:await"
    assert {n.id for n in nodes.values() if n.parent_id == container.id} == {"answer:0", "answer:0:await", "exesql:0"}
    assert {(e.source, e.target) for e in canvas.edges} == {
        ("begin", container.id), ("answer:0:await", "exesql:0"), ("exesql:0", "answer:0")}
    assert nodes["exesql:0"].params["repair_with_llm"] is True and nodes["exesql:0"].params["max_records"] == 3
    # Loading the stored (normalised) DSL again folds it the same way: takeovers and resumes reload it.
    again = load(canvas.dsl).canvas
    assert list(again.nodes) == list(nodes) and again.edges == canvas.edges


@pytest.fixture
async def sql_runtime(tmp_path):
    db = tmp_path / "rag.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE cities (name TEXT, people INTEGER)")
        conn.executemany("INSERT INTO cities VALUES (?, ?)", [("Lyon", 520), ("Nantes", 320)])
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump({"tools": {"exesql": {"databases": {"rag_flow": {"url": f"sqlite:///{db}"}}}}}))
    runtime = ToolRuntime(ToolsSettings.from_config(Config.load(str(config_path), env={}), env={}))
    yield runtime
    await runtime.aclose()


async def test_g0_exesql_conversation_repairs_a_question_into_sql_with_the_model(sql_runtime):
    repaired = json.dumps({"sql": "SELECT name, people FROM cities ORDER BY people DESC"})
    llm = ScriptedLlm({"": [[("text", repaired)]]})
    store = InMemoryRunStore()
    orch = make_orchestrator(store, llm=llm, tools=sql_runtime, conversation_max_turns=2)
    session = store.create_session()
    canvas = json.loads(EXESQL.read_text())

    first = await turn(orch, session.id, "which city is the largest?", canvas=canvas)
    assert finished(first)["status"] == RunStatus.PAUSED
    assert shown(first) == ["| name | people |\n|---|---|\n| Lyon | 520 |\n| Nantes | 320 |"]
    request = llm.requests[0]
    assert request.json_schema is not None and "sql" in request.json_schema["properties"]
    assert "which city is the largest?" in request.messages[-1]["content"]
    sql_node = next(e for e in first if e.kind == "node_finished" and e.data["component_id"] == "exesql:0")
    assert sql_node.data["inputs"]["repairs"][0]["sql"].startswith("SELECT name")
    assert finished(first)["usage"]["calls"] == 1

    # Valid SQL needs no model; the second turn ends the conversation (max 2 turns).
    second = await turn(orch, session.id, "SELECT COUNT(*) AS n FROM cities", canvas=canvas)
    assert shown(second) == ["| n |\n|---|\n| 2 |"]
    assert finished(second)["status"] == RunStatus.SUCCEEDED and len(llm.requests) == 1


async def test_a_takeover_mid_turn_does_not_take_the_message_twice():
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["ask"]},
        "ask": {"type": "UserFillUp", "down": ["llm"], "params": {
            "query_field": "message", "inputs": {"message": {"name": "message", "type": "paragraph"}}}},
        "llm": {"type": "LLM", "params": {"llm_id": "m", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                "down": ["show"]},
        "show": {"type": "Message", "params": {"content": ["{llm@content}"]}, "down": ["ask"]},
    })
    store = InMemoryRunStore()
    hang = asyncio.Event()
    a = make_orchestrator(store, ScriptedLlm({"m": [[("gate", hang)]]}), holder="a")
    b = make_orchestrator(store, ScriptedLlm({"m": [[("text", "answered by b")]]}), holder="b")
    session = store.create_session()
    record = await a.start_run(RunRequest(dsl=canvas, query="one", session_id=session.id))
    first = await until(a.stream_events(record.id), lambda e: e.kind == "node_started" and e.data["component_id"] == "llm")
    await a.stop(grace=0)  # replica A dies while the turn's model call is under way
    store.expire_lease(record.id)
    assert await b.reap_once() == 1
    rest = [e async for e in b.stream_events(record.id, after_seq=first[-1].seq)]
    await b.wait_idle()
    events = first + rest
    # The turn that took "one" was journaled: B replays it and the next turn waits for a new message.
    assert node_events(events, "node_finished").count("ask") == 1
    assert shown(events) == ["answered by b"]
    assert finished(events)["status"] == RunStatus.PAUSED and events[-2].data["component_id"] == "ask"


def test_a_cycle_back_into_begin_is_not_a_conversation():
    canvas = echo_loop()
    canvas["components"]["show"]["downstream"] = ["begin"]
    problems = validate(canvas).problems
    assert any(p.code == "CYCLE" for p in problems), problems


async def test_g0_exesql_repair_attempts_zero_turns_the_model_repair_off(sql_runtime):
    llm = ScriptedLlm({"": [[("text", json.dumps({"sql": "SELECT 1"}))]]})
    store = InMemoryRunStore()
    orch = make_orchestrator(store, llm=llm, tools=sql_runtime, conversation_max_turns=2)
    session = store.create_session()
    canvas = json.loads(EXESQL.read_text())
    components = canvas.get("dsl", canvas)["components"]
    components["exesql:0"]["obj"]["params"]["repair_attempts"] = 0

    events = await turn(orch, session.id, "which city is the largest?", canvas=canvas)
    assert llm.requests == []  # the question was not sent to the model for a rewrite
    sql_node = next(e for e in events if e.kind == "node_finished" and e.data["component_id"] == "exesql:0")
    assert sql_node.data.get("error")
    assert "| Lyon |" not in "".join(shown(events))
