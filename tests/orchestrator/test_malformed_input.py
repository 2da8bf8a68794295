"""Malformed DSLs, params and values from users never crash a load or a run:

1. a DSL whose entries, graph or params have the wrong shape (a number where a list or an object
   belongs, an unhashable id) loads — ValidateCanvas lists the problems, RunCanvas is INVALID_ARGUMENT
   naming the path — instead of failing INTERNAL;
2. text nested too deeply to parse (a query walked by `{sys.query.0}`, an `object` form field, an
   ExcelProcessor JSON) stays text or fails the node cleanly, and a deep structure that does reach an
   event travels as its JSON text, so every event still decodes (protobuf stops at 100 levels);
3. a Jinja template that recurses forever or builds a huge string fails its node;
4. `exception_goto` of another shape is no target: the run still ends.

Before the fixes each of these raised a Python exception that escaped the run: the run crashed on
every replica that took it over and its stream never reached WorkflowFinished (tests 2-4), or the RPC
failed INTERNAL (test 1).
"""

from __future__ import annotations

import json

import grpc
import pytest
from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.common.structs import from_struct, to_struct
from services.orchestrator.core.dsl.validate import validate
from services.orchestrator.core.ports import RunStatus
from services.orchestrator.core.errors import NodeError
from services.orchestrator.core.jinja_sandbox import render_jinja
from services.orchestrator.core.values import MAX_DEPTH
from tests.orchestrator.support.harness import dsl, finished, make_orchestrator, run_dsl
from tests.orchestrator.support.request_server import AUTH, final, refused, request_server, run


@pytest.fixture
async def server(tmp_path):
    async with request_server(tmp_path) as running:
        yield running


def two_nodes(**extra):
    return dsl({"begin": {"type": "Begin", "down": ["m"]}, "m": {"type": "Message", "params": {"content": ["hi"]}}},
               **extra)


def with_entry(cid, entry):
    doc = two_nodes()
    doc["components"][cid] = entry
    return doc


def with_entries(**entries):
    doc = two_nodes()
    doc["components"].update(entries)
    return doc


def renamed(doc):
    """A PDFGenerator (renamed to DocGenerator on load, spec §1.5 A) makes the loader rewrite ids everywhere."""
    doc["components"]["PDFGenerator:0"] = {"obj": {"component_name": "PDFGenerator", "params": {
        "content": "x", "output_format": "markdown"}}, "downstream": [], "upstream": ["m"]}
    doc["components"]["m"]["downstream"] = ["PDFGenerator:0"]
    return doc


# -- 1. shapes ----------------------------------------------------------------------------------

# Each: a DSL that loads (its display data is ignored where it is not what RAGFlow writes).
LOADABLE = {
    "graph nodes a number": two_nodes(graph={"nodes": 5, "edges": 7}),
    "graph node id a list": two_nodes(graph={"nodes": [{"id": ["m"], "data": {"name": "x"}}, 3]}),
    "renamed, graph entries of odd shapes": renamed(two_nodes(graph={
        "nodes": [5, {"id": ["m"], "parentId": {"a": 1}, "type": [1], "data": {"label": [1], "name": {"n": 1}}}],
        "edges": [5, {"source": ["m"], "target": {"t": 1}}]})),
    "G0 conversation, upstream holding objects": {"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["answer"], "upstream": []},
        "answer": {"obj": {"component_name": "Answer", "params": {}}, "downstream": ["gen"],
                   "upstream": [{"a": None}, ["begin"], "begin", "gen"]},
        "gen": {"obj": {"component_name": "Message", "params": {"content": ["echo {sys.query}"]}},
                "downstream": ["answer"], "upstream": ["answer"]}}},
}


@pytest.mark.parametrize("case", list(LOADABLE))
async def test_odd_display_data_is_ignored(server, case):
    stub, _ = server
    reply = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl=to_struct(LOADABLE[case])), metadata=AUTH)
    assert reply.valid, [(p.field, p.message) for p in reply.problems]
    events = await run(stub, dsl=to_struct(LOADABLE[case]), query="q")
    assert final(events).status in (common_pb2.RUN_STATUS_SUCCEEDED, common_pb2.RUN_STATUS_PAUSED)  # a conversation pauses


# Each: (DSL, the (component, field, code) ValidateCanvas and RunCanvas report).
def node(component, params, **entry):
    return {"obj": {"component_name": component, "params": params}, "downstream": [], "upstream": ["begin"], **entry}


BAD = {
    "obj a number": (with_entry("x", {"obj": 5, "downstream": [], "upstream": []}), ("x", "obj.component_name", "BAD_DSL")),
    "component_name a list": (with_entry("x", {"obj": {"component_name": ["Message"]}}), ("x", "obj.component_name", "BAD_DSL")),
    "renamed, obj a number": (renamed(with_entry("x", {"obj": 5})), ("x", "obj.component_name", "BAD_DSL")),
    "switch conditions a number": (with_entry("x", node("Switch", {"conditions": 5, "end_cpn_ids": ["m"]})),
                                   ("x", "params.conditions", "BAD_PARAM")),
    "categorize categories a number": (with_entry("x", node("Categorize", {"llm_id": "m", "category_description": 5})),
                                       ("x", "params.category_description", "BAD_PARAM")),
    "categorize examples a number": (with_entry("x", node("Categorize", {"llm_id": "m", "category_description": {
        "A": {"to": ["m"], "examples": 5}}})), ("x", "params.category_description.A.examples", "BAD_PARAM")),
    "loop variables a number": (with_entry("x", node("Loop", {"loop_variables": 5})), ("x", "params.loop_variables", "BAD_PARAM")),
    "loop conditions an object": (with_entry("x", node("Loop", {"loop_termination_condition": {"a": 1}})),
                                  ("x", "params.loop_termination_condition", "BAD_PARAM")),
    "assigner variables a number": (with_entry("x", node("VariableAssigner", {"variables": 5})),
                                    ("x", "params.variables", "BAD_PARAM")),
    "aggregator variables a number": (with_entry("x", node("VariableAggregator", {"groups": [
        {"group_name": "g", "variables": 5}]})), ("x", "params.groups[0].variables", "BAD_PARAM")),
    "list filter text": (with_entry("x", node("ListOperations", {"query": "sys.history", "operations": "filter",
                                                                 "filter": "x"})), ("x", "params.filter", "BAD_PARAM")),
    "list n not a number": (with_entry("x", node("ListOperations", {"query": "sys.history", "operations": "head",
                                                                    "n": "abc"})), ("x", "params.n", "BAD_PARAM")),
    "data select_keys a number": (with_entry("x", node("DataOperations", {"query": ["sys.query"], "operations": "select_keys",
                                                                          "select_keys": 5})),
                                  ("x", "params.select_keys", "BAD_PARAM")),
    "iteration outputs a list": (with_entry("x", node("Iteration", {"items_ref": "sys.history", "outputs": [1]})),
                                 ("x", "params.outputs", "BAD_PARAM")),
    "invoke variables a number": (with_entry("x", node("Invoke", {"url": "http://127.0.0.1:9/", "variables": 5})),
                                  ("x", "params.variables", "BAD_PARAM")),
    "llm legacy tools a number": (with_entry("x", node("LLM", {"llm_id": "m", "llm_enabled_tools": 5, "prompts": 7})),
                                  ("x", "params.prompts", "BAD_PARAM")),
    "retrieval kb_ids a number": (with_entry("x", node("Retrieval", {"kb_ids": 5, "query": "sys.query"})), None),
    # Numbers the components convert at run time (they failed the run with "ValueError: invalid literal").
    "temperature text": (with_entry("x", node("LLM", {"llm_id": "m", "temperatureEnabled": True, "temperature": "warm"})),
                         ("x", "params.temperature", "BAD_PARAM")),
    "max_tokens fractional text": (with_entry("x", node("LLM", {"llm_id": "m", "maxTokensEnabled": True,
                                                                "max_tokens": "512.5"})), ("x", "params.max_tokens", "BAD_PARAM")),
    "max_tokens zero": (with_entry("x", node("Agent", {"llm_id": "m", "maxTokensEnabled": True, "max_tokens": 0})),
                        ("x", "params.max_tokens", "BAD_PARAM")),
    "history window text": (with_entry("x", node("Categorize", {"llm_id": "m", "message_history_window_size": "all",
                                                                "category_description": {"A": {"to": ["m"]}}})),
                            ("x", "params.message_history_window_size", "BAD_PARAM")),
    "max_retries beyond the cap": (with_entry("x", node("Message", {"content": ["x"], "max_retries": 1e300})),
                                   ("x", "params.max_retries", "BAD_PARAM")),
    "delay_after_error negative": (with_entry("x", node("Message", {"content": ["x"], "delay_after_error": -1})),
                                   ("x", "params.delay_after_error", "BAD_PARAM")),
    "agent max_rounds text": (with_entry("x", node("Agent", {"llm_id": "m", "max_rounds": "many"})),
                              ("x", "params.max_rounds", "BAD_PARAM")),
    # Scopes: the runner follows edges within one container only, so these components never ran.
    "edge into a container body": (with_entries(
        x=node("Message", {"content": ["x"]}, downstream=["body"]),
        it=node("Iteration", {"items_ref": "sys.history"}),
        item={"obj": {"component_name": "IterationItem", "params": {}}, "downstream": ["body"], "upstream": [],
              "parent_id": "it"},
        body={"obj": {"component_name": "Message", "params": {"content": ["b"]}}, "downstream": [],
              "upstream": ["item", "x"], "parent_id": "it"}), ("x", "downstream", "BAD_DSL")),
    "parent no container": (with_entry("x", node("Message", {"content": ["x"]}, parent_id="m")),
                            ("x", "parent_id", "BAD_CONTAINER")),
    "parents in a ring": (with_entries(x=node("Iteration", {"items_ref": "sys.history"}, parent_id="y"),
                                       y=node("Iteration", {"items_ref": "sys.history"}, parent_id="x")),
                          ("x", "parent_id", "BAD_CONTAINER")),
}


def test_numeric_text_and_disabled_sampling_params_are_accepted():
    # RAGFlow's own files hold some numbers as text ("0.1"); a sampling param is only read when enabled.
    doc = with_entry("x", node("LLM", {"llm_id": "m", "temperatureEnabled": True, "temperature": "0.1",
                                       "topPEnabled": False, "top_p": "n/a", "max_retries": "", "delay_after_error": "1"}))
    doc["components"]["begin"]["downstream"] = ["m", "x"]
    assert [p for p in validate(doc).problems if p.code == "BAD_PARAM"] == []


@pytest.mark.parametrize("case", list(BAD))
async def test_malformed_entries_and_params_are_reported_not_internal(server, case):
    stub, store = server
    doc, expected = BAD[case]
    doc["components"]["begin"]["downstream"] = ["m", "x"]
    reply = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl=to_struct(doc)), metadata=AUTH)
    problems = {(p.component_id, p.field, p.code) for p in reply.problems}
    if expected is None:  # loads; the node's own problems (if any) are about its tool, not a crash
        assert all(p.component_id == "x" for p in reply.problems), problems
        return
    assert expected in problems, problems
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await run(stub, dsl=to_struct(doc))
    assert caught.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION), caught.value.details()
    if caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT:
        error = await refused(stub, dsl=to_struct(doc))
        assert f"components.{expected[0]}.{expected[1]}" in {v.field for v in error.violations}
    assert not store._runs  # refused before any run record exists


# -- 2. deep values -----------------------------------------------------------------------------

def nested(depth, leaf="x"):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def echo_form(kind):
    return dsl({"begin": {"type": "Begin", "down": ["m"], "params": {"inputs": {"a": {"name": "A", "type": kind}}}},
                "m": {"type": "Message", "params": {"content": ["{begin@a}|{begin@a.0.0}"]}}})


async def test_text_too_deep_to_parse_stays_text():
    deep = "[" * 100_000 + "\"x\"" + "]" * 100_000
    doc = dsl({"begin": {"type": "Begin", "down": ["m"]}, "m": {"type": "Message", "params": {"content": ["[{sys.query.0}]"]}}})
    _, events = await run_dsl(make_orchestrator(), doc, deep)
    assert finished(events)["status"] == RunStatus.SUCCEEDED
    assert finished(events)["outputs"]["content"] == "[]"  # not JSON it can walk: nothing at that path

    _, events = await run_dsl(make_orchestrator(), echo_form("object"), inputs={"a": deep})
    assert finished(events)["status"] == RunStatus.SUCCEEDED
    assert finished(events)["outputs"]["content"] == deep + "|"  # an `object` answer that cannot be parsed stays text

    excel = dsl({"begin": {"type": "Begin", "down": ["x"]},
                 "x": {"type": "ExcelProcessor", "params": {"operation": "transform", "transform_data": "sys.query"}}})
    _, events = await run_dsl(make_orchestrator(), excel, deep)
    assert finished(events)["error"]["reason"] == "BAD_DATA"
    assert "nested deeper" in finished(events)["error"]["message"]


def nested_objects(depth, leaf="x"):
    value = leaf
    for _ in range(depth):
        value = {"k": value}
    return value


def begin_output(events):
    return from_struct(next(e.node_finished for e in events if e.WhichOneof("event") == "node_finished"
                            and e.node_finished.component_id == "begin").outputs)["a"]


async def test_deep_values_reach_the_client_and_every_event_decodes(server):
    stub, _ = server
    within = nested(MAX_DEPTH)
    events = await run(stub, dsl=to_struct(echo_form("object")), inputs=to_struct({"a": json.dumps(within)}))
    assert final(events).status == common_pb2.RUN_STATUS_SUCCEEDED
    assert begin_output(events) == within  # parsed and kept as a structure

    text = json.dumps(nested(50))  # deeper than MAX_DEPTH: not parsed, the answer stays text
    events = await run(stub, dsl=to_struct(echo_form("object")), inputs=to_struct({"a": text}))
    assert final(events).status == common_pb2.RUN_STATUS_SUCCEEDED
    assert begin_output(events) == text

    # Sent as a Struct (the request decodes it), but too deep for the events that carry it one level
    # further down: below MAX_DEPTH levels it travels as its JSON text.
    deep = nested_objects(31)
    events = await run(stub, dsl=to_struct(echo_form("object")), inputs=to_struct({"a": deep}))
    assert final(events).status == common_pb2.RUN_STATUS_SUCCEEDED
    shown = begin_output(events)
    for _ in range(MAX_DEPTH):
        shown = shown["k"]
    assert json.loads(shown) == nested_objects(31 - MAX_DEPTH)
    assert from_struct(final(events).outputs)["content"].startswith('{"k":{"k":')


# -- 3. templates -------------------------------------------------------------------------------

@pytest.mark.parametrize("component", [
    {"type": "Message", "params": {"content": ["{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"]}},
    {"type": "StringTransform", "params": {"method": "merge", "script": "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"}},
    {"type": "Message", "params": {"content": ["{% if 1 %}{{ 'a' * 10**15 }}{% endif %}"]}},
    {"type": "Message", "params": {"content": ["{% if 1 %}{{ 'a'.ljust(10**9) }}{% endif %}"]}},
    {"type": "StringTransform", "params": {"method": "merge", "script": "{% if 1 %}{{ 'a'|center(10**9) }}{% endif %}"}},
    {"type": "Message", "params": {"content": ["{% if 1 %}{{ '{:>{w}}'.format(1, w=10**10) }}{{ '%*d' % (1, 2) }}{% endif %}"]}},
    {"type": "Message", "params": {"content": ["{% if 1 %}{{ 7 ** (10**9) }}{% endif %}"]}},
])
async def test_a_template_that_cannot_be_rendered_fails_its_node(component):
    doc = dsl({"begin": {"type": "Begin", "down": ["x"]}, "x": component})
    _, events = await run_dsl(make_orchestrator(), doc)
    assert finished(events)["status"] == RunStatus.FAILED
    assert finished(events)["error"] == {"reason": "TEMPLATE_ERROR", "component_id": "x",
                                         "message": finished(events)["error"]["message"]}
    assert "could not be rendered" in finished(events)["error"]["message"]


@pytest.mark.parametrize("template", [
    "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
    "{% set s = 'x' * 100000 %}{% for a in s %}{% for b in s %}{{ '' }}{% endfor %}{% endfor %}",
])
def test_a_template_that_would_run_for_hours_stops_at_its_budget(template):
    # 10**10 steps: no machine finishes them within the budget, so the render always gives up (and frees its
    # worker thread) instead of running on after its node timed out.
    with pytest.raises(NodeError) as caught:
        render_jinja(template, budget_s=0.2)
    assert caught.value.reason == "TEMPLATE_ERROR" and "longer than 0.2 s" in caught.value.message


def test_ordinary_templates_render_in_the_bounded_sandbox():
    assert render_jinja("{% for a in range(3) %}{{ a }}{% endfor %} {{ '{:,}'.format(12345678) }} {{ '%*d' % (4, 7) }}"
                        " {{ 'ab' * 2 }} {{ 2 ** 10 }} {{ 'x'|center(5) }}|") == "012 12,345,678    7 abab 1024   x  |"
    assert render_jinja("{% broken") == "{% broken"  # not a template: kept as it is


# -- 4. exception_goto of another shape -----------------------------------------------------------

@pytest.mark.parametrize("goto", [5, {"a": "m"}, [None, 3.5]])
async def test_exception_goto_of_another_shape_is_no_target(goto):
    doc = dsl({"begin": {"type": "Begin", "down": ["x"]},
               "x": {"type": "ListOperations", "params": {"query": "sys.query", "exception_method": "goto",
                                                           "exception_goto": goto}, "down": ["m"]},
               "m": {"type": "Message", "params": {"content": ["after"]}}})
    assert validate(doc).problems == []
    _, events = await run_dsl(make_orchestrator(), doc, "not a list")
    assert finished(events)["status"] == RunStatus.FAILED  # no exception target: the failure ends the run
    assert finished(events)["error"]["reason"] == "NOT_A_LIST"
