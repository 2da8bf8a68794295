"""RunCanvas / ValidateCanvas input checks over the real gRPC server (in-memory store, scripted model):

1. a resume (`resume_run_id`, or a session's paused run) names its own canvas: a `canvas_id` or an
   inline `dsl` that is not the paused run's canvas is INVALID_ARGUMENT, not silently ignored;
2. Begin inputs with `optional: false` are required when a run starts (defaults and the
   conversational query shortcut satisfy them), INVALID_ARGUMENT listing every missing one;
3. JSON null anywhere in params, inputs and globals is either treated as absent or reported as
   INVALID_ARGUMENT naming its path: never INTERNAL, never a Python exception text.
"""

from __future__ import annotations

import copy

import pytest
from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.common.structs import from_struct, to_struct
from tests.orchestrator.support.harness import dsl
from tests.orchestrator.support.request_server import AUTH, final, refused, request_server, run


@pytest.fixture
async def server(tmp_path):
    async with request_server(tmp_path) as running:
        yield running


def form_canvas(label: str = "plan"):
    return dsl({
        "begin": {"type": "Begin", "down": ["ask"]},
        "ask": {"type": "UserFillUp", "down": ["msg"], "params": {
            "inputs": {"instructions": {"name": "Instructions", "type": "paragraph", "optional": False}}}},
        "msg": {"type": "Message", "params": {"content": [label + ": {ask@instructions}"]}},
    })


# -- 1. a resume names the paused run's canvas or none ------------------------------------------

async def test_resume_run_id_with_another_canvas_id_is_invalid_argument(server):
    stub, store = server
    store.put_canvas("c1", form_canvas("one"))
    store.put_canvas("c2", form_canvas("two"))
    paused = await run(stub, canvas_id="c1")
    assert final(paused).status == common_pb2.RUN_STATUS_PAUSED
    run_id = paused[0].run_id

    error = await refused(stub, resume_run_id=run_id, canvas_id="c2", inputs=to_struct({"instructions": "x"}))
    assert [v.field for v in error.violations] == ["canvas_id"]
    assert "c1" in error.violations[0].description and "c2" in error.violations[0].description
    # Nothing was applied: the paused run is still resumable, and a matching canvas_id is fine.
    resumed = await run(stub, resume_run_id=run_id, canvas_id="c1", inputs=to_struct({"instructions": "go"}))
    assert final(resumed).status == common_pb2.RUN_STATUS_SUCCEEDED
    assert from_struct(final(resumed).outputs)["content"] == "one: go"


async def test_resume_run_id_with_an_inline_dsl_that_is_not_the_paused_runs_is_invalid_argument(server):
    stub, store = server
    store.put_canvas("c1", form_canvas("one"))
    stored = (await run(stub, canvas_id="c1"))[0].run_id
    error = await refused(stub, resume_run_id=stored, dsl=to_struct(form_canvas("one")))
    assert [v.field for v in error.violations] == ["dsl"]

    inline = (await run(stub, dsl=to_struct(form_canvas("inline"))))[0].run_id
    error = await refused(stub, resume_run_id=inline, dsl=to_struct(form_canvas("other")))
    assert [v.field for v in error.violations] == ["dsl"]
    error = await refused(stub, resume_run_id=inline, canvas_id="c1")
    assert [v.field for v in error.violations] == ["canvas_id"]
    # The same inline DSL again is the paused run's canvas.
    resumed = await run(stub, resume_run_id=inline, dsl=to_struct(form_canvas("inline")),
                        inputs=to_struct({"instructions": "go"}))
    assert from_struct(final(resumed).outputs)["content"] == "inline: go"


async def test_a_paused_session_with_another_canvas_id_is_invalid_argument(server):
    stub, store = server
    store.put_canvas("c1", form_canvas("one"))
    store.put_canvas("c2", form_canvas("two"))
    session = store.create_session("c1")
    assert final(await run(stub, session_id=session.id)).status == common_pb2.RUN_STATUS_PAUSED
    error = await refused(stub, session_id=session.id, canvas_id="c2", inputs=to_struct({"instructions": "x"}))
    assert [v.field for v in error.violations] == ["canvas_id"]
    resumed = await run(stub, session_id=session.id, canvas_id="c1", inputs=to_struct({"instructions": "go"}))
    assert from_struct(final(resumed).outputs)["content"] == "one: go"


# -- 2. required Begin inputs -------------------------------------------------------------------

def trip_canvas():
    return dsl({
        "begin": {"type": "Begin", "down": ["msg"], "params": {"mode": "task", "inputs": {
            "city": {"name": "City", "type": "line", "optional": False},
            "days": {"name": "Days", "type": "integer", "optional": False},
            "lang": {"name": "Language", "type": "options", "options": ["en", "fr"], "optional": False, "value": "en"},
            "note": {"name": "Note", "type": "paragraph", "optional": True},
            "mood": {"name": "Mood", "type": "line"},  # no `optional`: not enforced (RAGFlow's UI always writes it)
        }}},
        "msg": {"type": "Message", "params": {"content": ["{begin@city}/{begin@days}/{begin@lang}/{begin@note}"]}},
    })


async def test_missing_required_begin_inputs_are_invalid_argument_before_anything_runs(server):
    stub, store = server
    error = await refused(stub, dsl=to_struct(trip_canvas()))
    assert sorted(v.field for v in error.violations) == ["inputs.city", "inputs.days"]  # defaults satisfy `lang`
    assert "City" in next(v.description for v in error.violations if v.field == "inputs.city")
    error = await refused(stub, dsl=to_struct(trip_canvas()),
                          inputs=to_struct({"city": None, "days": {"value": None}, "note": "n"}))
    assert sorted(v.field for v in error.violations) == ["inputs.city", "inputs.days"]  # null is not an answer
    error = await refused(stub, dsl=to_struct(trip_canvas()), inputs=to_struct({"city": "  ", "days": 3}))
    assert [v.field for v in error.violations] == ["inputs.city"]  # nor is blank text
    assert not store._runs  # refused before any run record exists

    events = await run(stub, dsl=to_struct(trip_canvas()), inputs=to_struct({"city": {"value": "Oslo"}, "days": 3}))
    assert final(events).status == common_pb2.RUN_STATUS_SUCCEEDED
    assert from_struct(final(events).outputs)["content"] == "Oslo/3/en/"


async def test_the_query_answers_a_single_required_begin_input(server):
    stub, _ = server
    canvas = dsl({"begin": {"type": "Begin", "down": ["msg"], "params": {"inputs": {
                      "topic": {"name": "Topic", "type": "line", "optional": False}}}},
                  "msg": {"type": "Message", "params": {"content": ["about {begin@topic}"]}}})
    error = await refused(stub, dsl=to_struct(canvas))
    assert [v.field for v in error.violations] == ["inputs.topic"]
    events = await run(stub, dsl=to_struct(canvas), query="whales")
    assert from_struct(final(events).outputs)["content"] == "about whales"


async def test_required_begin_inputs_are_not_asked_again_on_resume_or_a_later_session_turn(server):
    stub, store = server
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["ask"], "params": {"inputs": {
            "city": {"name": "City", "type": "line", "optional": False},
            "days": {"name": "Days", "type": "integer", "optional": False}}}},
        "ask": {"type": "UserFillUp", "down": ["msg"], "params": {
            "inputs": {"instructions": {"name": "Instructions", "type": "paragraph", "optional": False}}}},
        "msg": {"type": "Message", "params": {"content": ["{begin@city}: {ask@instructions}"]}},
    })
    paused = await run(stub, dsl=to_struct(canvas), inputs=to_struct({"city": "Oslo", "days": 2}))
    resumed = await run(stub, resume_run_id=paused[0].run_id, inputs=to_struct({"instructions": "go"}))
    assert from_struct(final(resumed).outputs)["content"] == "Oslo: go"

    store.put_canvas("trip", canvas)
    session = store.create_session("trip")
    error = await refused(stub, session_id=session.id)  # the first turn of a conversation needs them
    assert sorted(v.field for v in error.violations) == ["inputs.city", "inputs.days"]
    first = await run(stub, session_id=session.id, inputs=to_struct({"city": "Oslo", "days": 2}))
    assert final(first).status == common_pb2.RUN_STATUS_PAUSED
    answered = await run(stub, session_id=session.id, inputs=to_struct({"instructions": "go"}))
    assert final(answered).status == common_pb2.RUN_STATUS_SUCCEEDED
    later = await run(stub, session_id=session.id, query="and then?")  # the Begin form was filled at the start
    assert final(later).status == common_pb2.RUN_STATUS_PAUSED


# -- 3. JSON null -------------------------------------------------------------------------------

def single(component: dict, **extra):
    """Begin -> x (-> a | b for routers)."""
    routers = component["type"] in ("Switch", "Categorize")
    component = {**component, "down": ["a", "b"] if routers else []}
    nodes = {"begin": {"type": "Begin", "down": ["x"]}, "x": component}
    if routers:
        nodes.update({k: {"type": "Message", "params": {"content": [k]}} for k in ("a", "b")})
    return dsl(nodes, **extra)


# Each: (component, the field its null must be reported on, or None when the null is treated as absent
# and the canvas runs).
NULL_CASES = {
    "switch item": ({"type": "Switch", "params": {"conditions": [{"items": [None], "to": ["a"]}], "end_cpn_ids": ["b"]}},
                    "params.conditions[0].items[0]"),
    "switch operator": ({"type": "Switch", "params": {"conditions": [{"items": [
        {"cpn_id": "sys.query", "operator": None, "value": "x"}], "to": ["a"]}], "end_cpn_ids": ["b"]}},
        "params.conditions[0].items[0].operator"),
    "switch target": ({"type": "Switch", "params": {"conditions": [{"items": [], "to": [None]}], "end_cpn_ids": ["b"]}},
                      "params.conditions[0].to"),
    "switch else target": ({"type": "Switch", "params": {"conditions": [{"items": [], "to": ["a"]}], "end_cpn_ids": [None]}},
                           "params.end_cpn_ids"),
    "switch items": ({"type": "Switch", "params": {"conditions": [{"items": None, "to": ["a"]}], "end_cpn_ids": ["b"]}}, None),
    "categorize category": ({"type": "Categorize", "params": {"llm_id": "m", "category_description": {
        "A": None, "B": {"to": ["b"]}}}}, "params.category_description.A"),
    "categorize target": ({"type": "Categorize", "params": {"llm_id": "m", "category_description": {
        "A": {"to": [None]}, "B": {"to": ["b"]}}}}, "params.category_description.A.to"),
    "invoke variable": ({"type": "Invoke", "params": {"url": "http://127.0.0.1:9/", "timeout": 1, "variables": [None]}},
                        "params.variables[0]"),
    "data operations rename": ({"type": "DataOperations", "params": {"query": ["sys.query"], "operations": "rename_keys",
                                                                     "rename_keys": [None]}}, "params.rename_keys[0]"),
    "data operations update": ({"type": "DataOperations", "params": {"query": ["sys.query"], "operations": "append_or_update",
                                                                     "updates": [None]}}, "params.updates[0]"),
    "data operations filter": ({"type": "DataOperations", "params": {"query": ["sys.query"], "operations": "filter_values",
                                                                     "filter_values": [None]}}, "params.filter_values[0]"),
    "list filter operator": ({"type": "ListOperations", "params": {"query": "env.l", "operations": "filter",
                                                                   "filter": {"operator": None, "value": "1"}}}, None),
    "assigner operator": ({"type": "VariableAssigner", "params": {"variables": [
        {"variable": "env.n", "operator": None, "parameter": 1}]}}, "params.variables[0].operator"),
    "assigner parameter": ({"type": "VariableAssigner", "params": {"variables": [
        {"variable": "env.n", "operator": "+=", "parameter": None}]}}, "params.variables[0].parameter"),
    "assigner set null": ({"type": "VariableAssigner", "params": {"variables": [
        {"variable": "env.n", "operator": "set", "parameter": None}]}}, None),
    "tool param": ({"type": "Retrieval", "params": {"query": "sys.query", "top_n": None, "similarity_threshold": None,
                                                    "dataset_ids": None}}, None),
    "loop condition operator": ({"type": "Loop", "params": {
        "loop_variables": [{"variable": "v", "type": "number", "input_mode": "constant", "value": 1}],
        "loop_termination_condition": [{"variable": "v", "operator": None, "value": 1, "input_mode": "constant"}],
        "maximum_loop_count": 2}}, "params.loop_termination_condition[0].operator"),
    "every common param": ({"type": "StringTransform", "params": {
        "method": "merge", "script": "x", "max_retries": None, "delay_after_error": None, "exception_method": None,
        "exception_default_value": None, "exception_goto": None, "message_history_window_size": None,
        "description": None, "inputs": None, "outputs": None, "timeout": None}}, None),
}


@pytest.mark.parametrize("case", list(NULL_CASES))
async def test_null_params_are_absent_or_invalid_argument_naming_the_path(server, case):
    stub, _ = server
    component, field = NULL_CASES[case]
    extra = {"globals": {"env.l": ["1", "2"], "env.n": 1}}
    if component["type"] == "Loop":
        component = {**component}
        canvas = dsl({"begin": {"type": "Begin", "down": ["x"]}, "x": {**component, "down": []},
                      "li": {"type": "LoopItem", "parent": "x", "down": ["body"]},
                      "body": {"type": "StringTransform", "parent": "x", "params": {"method": "merge", "script": "."}}})
    else:
        canvas = single(copy.deepcopy(component), **extra)
    reply = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl=to_struct(canvas)), metadata=AUTH)
    if field is None:
        assert reply.valid, [(p.field, p.message) for p in reply.problems]
        events = await run(stub, dsl=to_struct(canvas), query="q")
        outcome = final(events)
        # Runs like the param was not there: a failure may only be the tool's own (no network here).
        assert outcome.status == common_pb2.RUN_STATUS_SUCCEEDED or outcome.error.reason.startswith("TOOL_"), outcome
        assert "NoneType" not in outcome.error.message and "None" not in outcome.error.message
        return
    assert [(p.component_id, p.field, p.code) for p in reply.problems] == [("x", field, "BAD_PARAM")]
    error = await refused(stub, dsl=to_struct(canvas), query="q")
    assert [v.field for v in error.violations] == [f"components.x.{field}"]


@pytest.mark.parametrize("inputs", [{"city": None}, {"city": {"value": None}}, {"other": None}, {"city": [None]}])
async def test_null_run_inputs_and_null_form_fields_are_absent(server, inputs):
    stub, _ = server
    canvas = dsl({"begin": {"type": "Begin", "down": ["msg"], "params": {"mode": None, "prologue": None, "inputs": {
                      "city": {"name": None, "type": None, "optional": None, "value": None, "options": None},
                      "nothing": None}}},
                  "msg": {"type": "Message", "params": {"content": ["[{begin@city}][{begin@nothing}][{sys.query}]"]}}},
                 globals={"sys.query": None, "sys.user_id": None, "sys.files": None, "sys.history": None,
                          "sys.conversation_turns": None, "env.x": None}, variables={"x": None})
    reply = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl=to_struct(canvas)), metadata=AUTH)
    assert reply.valid, [(p.field, p.message) for p in reply.problems]
    events = await run(stub, dsl=to_struct(canvas), inputs=to_struct(inputs))
    assert final(events).status == common_pb2.RUN_STATUS_SUCCEEDED
    content = from_struct(final(events).outputs)["content"]
    assert content.endswith("[][]") and "None" not in content


async def test_null_form_answers_on_resume_keep_the_run_paused(server):
    stub, _ = server
    paused = await run(stub, dsl=to_struct(form_canvas()))
    again = await run(stub, resume_run_id=paused[0].run_id, inputs=to_struct({"instructions": None}))
    assert final(again).status == common_pb2.RUN_STATUS_PAUSED
    assert again[-2].user_inputs_required.component_id == "ask"
    done = await run(stub, resume_run_id=again[0].run_id, inputs=to_struct({"instructions": "go"}))
    assert from_struct(final(done).outputs)["content"] == "plan: go"


async def test_references_that_resolve_to_null_are_empty(server):
    """An output that is null (here: a VariableAggregator group with no truthy value) read as a list
    or a string is empty, not a node failure naming a Python type. (An Iteration over it fails, as in
    RAGFlow: test_fidelity.py.)"""
    stub, _ = server
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["agg"]},
        "agg": {"type": "VariableAggregator", "down": ["list", "split"], "params": {"groups": [
            {"group_name": "g", "variables": [{"value": "sys.user_id"}]}]}},
        "list": {"type": "ListOperations", "params": {"query": "agg@g", "operations": "head", "n": 1}, "down": ["msg"]},
        "split": {"type": "StringTransform", "params": {"method": "split", "split_ref": "agg@g", "delimiters": [None, ","]},
                  "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{list@result}|{split@result}|"]}},
    })
    events = await run(stub, dsl=to_struct(canvas), query="aNoneb")
    assert final(events).status == common_pb2.RUN_STATUS_SUCCEEDED, final(events).error
    assert from_struct(final(events).outputs)["content"].startswith("[]|[]|")
