"""Every non-model component through its public behaviour: small canvases, real events."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from services.orchestrator.core.ports import RunStatus
from tests.orchestrator.support.harness import dsl, finished, make_orchestrator, node_events, run_dsl
from tests.orchestrator.support.http_server import EchoServer


def outputs_of(events, cid):
    return next(e for e in events if e.kind == "node_finished" and e.data["component_id"] == cid).data["outputs"]


def error_of(events):
    data = finished(events)
    assert data["status"] == RunStatus.FAILED, data
    return data["error"]


async def run_one(component: dict, query: str = "", **kwargs):
    doc = dsl({"begin": {"type": "Begin", "down": ["x"], "params": kwargs.pop("begin_params", {})}, "x": component}, **kwargs.pop("extra", {}))
    _, events = await run_dsl(make_orchestrator(**kwargs.pop("orch", {})), doc, query, **kwargs)
    return events


async def test_begin_maps_inputs_and_a_single_field_query():
    form = {"inputs": {"city": {"name": "City", "type": "line"}}, "mode": "task"}
    doc = dsl({"begin": {"type": "Begin", "params": form, "down": ["m"]},
               "m": {"type": "Message", "params": {"content": ["{begin@city}"]}}})
    _, events = await run_dsl(make_orchestrator(), doc, "", inputs={"city": {"value": "Oslo"}})
    assert finished(events)["outputs"]["content"] == "Oslo"
    _, events = await run_dsl(make_orchestrator(), doc, "Bergen")  # conversational shortcut: query → the one field
    assert finished(events)["outputs"]["content"] == "Bergen"


async def test_begin_webhook_mode_exposes_payload_keys_as_outputs():
    doc = dsl({"begin": {"type": "Begin", "params": {"mode": "Webhook"}, "down": ["m"]},
               "m": {"type": "Message", "params": {"content": ["{begin@event}"]}}})
    _, events = await run_dsl(make_orchestrator(), doc, inputs={"event": "push"})
    assert finished(events)["outputs"]["content"] == "push"


async def test_message_variants_are_seeded_and_downloads_extracted():
    events = await run_one({"type": "Message", "params": {"content": ["A", "B", "C", "D"]}})
    first = finished(events)["outputs"]["content"]
    assert first in "ABCD"
    doc = dsl({"begin": {"type": "Begin", "down": ["doc"]},
               "doc": {"type": "DocGenerator", "params": {"content": "Report for {sys.query}", "output_format": "markdown",
                                                          "filename": "rep/ort", "add_timestamp": False}, "down": ["m"]},
               "m": {"type": "Message", "params": {"content": ["Here: {doc@download}"]}}})
    _, events = await run_dsl(make_orchestrator(), doc, "Q3")
    end = next(e for e in events if e.kind == "message_end")
    assert end.data["content"] == "Here: "
    download = end.data["downloads"][0]
    assert download["filename"] == "rep_ort.md" and base64.b64decode(download["base64"]).decode() == "Report for Q3"


async def test_message_non_stream_jinja():
    events = await run_one({"type": "Message", "params": {"stream": False, "content": ["{% for i in range(3) %}{{ i }}{% endfor %} {sys.query}"]}}, "q")
    deltas = [e for e in events if e.kind == "message_delta"]
    assert len(deltas) == 1 and deltas[0].data["content"] == "012 q"


@pytest.mark.parametrize("query,expected", [("I want a refund", "refund"), ("price is 250", "big"), ("hello", "else")])
async def test_switch_operators_and_else(query, expected):
    doc = dsl({
        "begin": {"type": "Begin", "down": ["sw"]},
        "sw": {"type": "Switch", "down": ["refund", "big", "else"], "params": {
            "conditions": [
                {"logical_operator": "or", "items": [{"cpn_id": "sys.query", "operator": "contains", "value": "REFUND"},
                                                     {"cpn_id": "sys.query", "operator": "start with", "value": "money"}], "to": ["refund"]},
                {"logical_operator": "and", "items": [{"cpn_id": "sys.query", "operator": "end with", "value": "250"},
                                                      {"cpn_id": "sys.query", "operator": "not empty"}], "to": ["big"]}],
            "end_cpn_ids": ["else"]}},
        **{k: {"type": "Message", "params": {"content": [k]}} for k in ("refund", "big", "else")},
    })
    _, events = await run_dsl(make_orchestrator(), doc, query)
    assert finished(events)["outputs"]["content"] == expected
    assert len(node_events(events, "node_skipped")) == 2


async def test_iteration_with_aliases_collectors_and_nesting():
    doc = dsl({
        "begin": {"type": "Begin", "down": ["split"]},
        "split": {"type": "StringTransform", "params": {"method": "split", "split_ref": "sys.query", "delimiters": [",", ";"]}, "down": ["it"]},
        "it": {"type": "Iteration", "params": {"items_ref": "split@result", "outputs": {"shout": {"ref": "up@result", "type": "array"}}}, "down": ["m"]},
        "ii": {"type": "IterationItem", "parent": "it", "down": ["up"]},
        "up": {"type": "StringTransform", "parent": "it", "params": {"method": "merge", "script": "{index}:{item}!"}},
        "m": {"type": "Message", "params": {"content": ["{it@shout}"]}},
    })
    _, events = await run_dsl(make_orchestrator(), doc, "a,b;c")
    assert finished(events)["status"] == RunStatus.SUCCEEDED, finished(events)
    assert outputs_of(events, "it")["shout"] == ["0:a!", "1:b!", "2:c!"]
    body_started = [e for e in events if e.kind == "node_started" and e.data["component_id"] == "up"]
    assert len(body_started) == 3 and body_started[0].data["parent_id"] == "it"


async def test_iteration_rejects_non_lists():
    doc = dsl({"begin": {"type": "Begin", "down": ["it"]}, "it": {"type": "Iteration", "params": {"items_ref": "sys.query"}},
               "ii": {"type": "IterationItem", "parent": "it"}})
    _, events = await run_dsl(make_orchestrator(), doc, "not a list")
    error = error_of(events)
    assert error["component_id"] == "it" and error["message"] == "sys.query must be an array, but its type is <class 'str'>"


async def test_iteration_over_more_items_than_a_loop_may_run_fails_before_its_first_pass():
    from services.orchestrator.core.components.containers import MAX_LOOP_COUNT

    doc = dsl({
        "begin": {"type": "Begin", "down": ["split"]},
        "split": {"type": "StringTransform", "params": {"method": "split", "split_ref": "sys.query", "delimiters": [","]},
                  "down": ["it"]},
        "it": {"type": "Iteration", "params": {"items_ref": "split@result"}},
        "ii": {"type": "IterationItem", "parent": "it", "down": ["up"]},
        "up": {"type": "StringTransform", "parent": "it", "params": {"method": "merge", "script": "{item}"}},
    })
    _, events = await run_dsl(make_orchestrator(), doc, ",".join(["x"] * (MAX_LOOP_COUNT + 1)))
    error = error_of(events)
    assert error["component_id"] == "it" and error["reason"] == "TOO_MANY_ITEMS", error
    assert not [e for e in events if e.kind == "node_started" and e.data["component_id"] == "up"]
    _, events = await run_dsl(make_orchestrator(), doc, ",".join(["x"] * MAX_LOOP_COUNT))
    assert finished(events)["status"] == RunStatus.SUCCEEDED, finished(events)


async def test_nested_loops_and_exit_loop():
    doc = dsl({
        "begin": {"type": "Begin", "down": ["outer"]},
        "outer": {"type": "Loop", "down": ["m"], "params": {
            "maximum_loop_count": 3,
            "loop_variables": [{"variable": "total", "type": "number", "input_mode": "constant", "value": 0}]}},
        "oi": {"type": "LoopItem", "parent": "outer", "down": ["inner"]},
        "inner": {"type": "Loop", "parent": "outer", "params": {"maximum_loop_count": 10}},
        "ii": {"type": "LoopItem", "parent": "inner", "down": ["add"]},
        "add": {"type": "VariableAssigner", "parent": "inner", "down": ["check"], "params": {"variables": [
            {"variable": "outer@total", "operator": "+=", "parameter": 1}]}},
        "check": {"type": "Switch", "parent": "inner", "down": ["exit", "noop"], "params": {
            "conditions": [{"items": [{"cpn_id": "outer@total", "operator": "≥", "value": "2"}], "to": ["exit"]}],
            "end_cpn_ids": ["noop"]}},
        "exit": {"type": "ExitLoop", "parent": "inner"},
        "noop": {"type": "StringTransform", "parent": "inner", "params": {"method": "merge", "script": "."}},
        "m": {"type": "Message", "params": {"content": ["total={outer@total}"]}},
    })
    _, events = await run_dsl(make_orchestrator(), doc)
    # outer pass 1: inner adds 1 (no exit), adds 2 → exit; passes 2 and 3: one add each, then exit
    assert finished(events)["outputs"]["content"] == "total=4"
    assert node_events(events, "node_finished").count("outer") == 1


async def test_string_transform_split_and_merge():
    events = await run_one({"type": "StringTransform", "params": {"method": "split", "split_ref": "sys.query", "delimiters": ["||", ","]}}, "a||b,c")
    assert outputs_of(events, "x")["result"] == ["a", "b", "c"]
    doc = dsl({"begin": {"type": "Begin", "down": ["s"]},
               "s": {"type": "StringTransform", "params": {"method": "split", "split_ref": "sys.query"}, "down": ["m"]},
               "m": {"type": "StringTransform", "params": {"method": "merge", "script": "<{s@result}>", "delimiters": [" + "]}}})
    _, events = await run_dsl(make_orchestrator(), doc, "1,2")
    assert outputs_of(events, "m")["result"] == "<1 + 2>"
    events = await run_one({"type": "StringTransform", "params": {"method": "merge", "script": "{% if 1 %}yes {sys.query}{% endif %}"}}, "q")
    assert outputs_of(events, "x")["result"] == "yes q"


@pytest.mark.parametrize("op,params,expected", [
    ("select_keys", {"select_keys": ["a"]}, [{"a": 1}, {"a": 3}]),
    ("combine", {}, {"a": [1, 3], "b": "2"}),
    ("filter_values", {"filter_values": [{"key": "a", "operator": "=", "value": "3"}]}, [{"a": 3}]),
    ("append_or_update", {"updates": [{"key": "c", "value": "{sys.query}"}]}, [{"a": 1, "b": "2", "c": "q"}, {"a": 3, "c": "q"}]),
    ("remove_keys", {"remove_keys": ["b"]}, [{"a": 1}, {"a": 3}]),
    ("rename_keys", {"rename_keys": [{"old_key": "a", "new_key": "z"}]}, [{"z": 1, "b": "2"}, {"z": 3}]),
    ("literal_eval", {}, [{"a": 1, "b": 2}, {"a": 3}]),
])
async def test_data_operations(op, params, expected):
    extra = {"globals": {"env.data": [{"a": 1, "b": "2"}, {"a": 3}, "not a dict"]}}
    events = await run_one({"type": "DataOperations", "params": {"query": ["env.data"], "operations": op, **params}}, "q", extra=extra)
    assert outputs_of(events, "x")["result"] == expected


@pytest.mark.parametrize("params,result", [
    ({"operations": "nth", "n": -1}, [5]),
    ({"operations": "topN", "n": 2}, [3, 1]),
    ({"operations": "tail", "n": 2}, [1, 5]),
    ({"operations": "sort", "sort_method": "desc"}, [5, 3, 1, 1]),
    ({"operations": "drop_duplicates"}, [3, 1, 5]),
    ({"operations": "filter", "filter": {"operator": "≠", "value": "1"}}, [3, 5]),
    ({"operations": "nth", "n": 0}, []),
])
async def test_list_operations(params, result):
    events = await run_one({"type": "ListOperations", "params": {"query": "env.nums", **params}}, extra={"globals": {"env.nums": [3, 1, 1, 5]}})
    out = outputs_of(events, "x")
    assert out["result"] == result
    assert out["first"] == (result[0] if result else None) and out["last"] == (result[-1] if result else None)


async def test_list_operations_strict_fails_the_node():
    events = await run_one({"type": "ListOperations", "params": {"query": "env.nums", "operations": "nth", "n": 9, "strict": "yes"}},
                           extra={"globals": {"env.nums": [1]}})
    assert "out of range" in error_of(events)["message"]


async def test_variable_aggregator_keeps_zero_and_false():
    events = await run_one({"type": "VariableAggregator", "params": {"groups": [
        {"group_name": "n", "variables": [{"value": "env.empty"}, {"value": "env.zero"}, {"value": "env.one"}]},
        {"group_name": "none", "variables": [{"value": "env.empty"}]}]}},
        extra={"globals": {"env.empty": "", "env.zero": 0, "env.one": 1}})
    assert outputs_of(events, "x") == {"n": 0, "none": None}


async def test_variable_assigner_operators_and_type_errors():
    doc = dsl({"begin": {"type": "Begin", "down": ["va"]},
               "va": {"type": "VariableAssigner", "down": ["m"], "params": {"variables": [
                   {"variable": "env.items", "operator": "append", "parameter": "sys.query"},
                   {"variable": "env.items", "operator": "extend", "parameter": "env.more"},
                   {"variable": "env.items", "operator": "remove_first"},
                   {"variable": "env.n", "operator": "*=", "parameter": 3},
                   {"variable": "env.s", "operator": "set", "parameter": "hi {sys.query}"},
                   {"variable": "env.more", "operator": "clear"}]}},
               "m": {"type": "Message", "params": {"content": ["{env.items}|{env.n}|{env.s}|{env.more}"]}}},
              globals={"env.items": ["a"], "env.more": ["c", "d"], "env.n": 2, "env.s": ""})
    _, events = await run_dsl(make_orchestrator(), doc, "b")
    assert finished(events)["outputs"]["content"] == '["b","c","d"]|6|hi b|[]'
    events = await run_one({"type": "VariableAssigner", "params": {"variables": [
        {"variable": "env.s", "operator": "append", "parameter": "x"}]}}, extra={"globals": {"env.s": "text"}})
    assert error_of(events)["message"].endswith("the variable is not a list")
    events = await run_one({"type": "VariableAssigner", "params": {"variables": [
        {"variable": "env.n", "operator": "/=", "parameter": 0}]}}, extra={"globals": {"env.n": 1}})
    assert "division by zero" in error_of(events)["message"]


async def test_invoke_get_post_headers_variables_and_html():
    async with httpx.AsyncClient() as client:
        with EchoServer() as server:
            orch = {"http": client}
            events = await run_one({"type": "Invoke", "params": {
                "url": server.url + "/api/{sys.query}", "method": "post", "headers": '{"x-api-key": "{env.key}"}',
                "variables": [{"key": "q", "ref": "sys.query"}, {"key": "n", "value": "[1, 2]"}]}},
                "items", extra={"globals": {"env.key": "k1"}}, orch=orch)
            echoed = json.loads(outputs_of(events, "x")["result"])
            assert json.loads(echoed.pop("body")) == {"q": "items", "n": [1, 2]}
            assert echoed == {"method": "POST", "path": "/api/items", "query": {}, "auth": "k1"}
            events = await run_one({"type": "Invoke", "params": {"url": server.url.replace("http://", "") + "/get", "method": "get",
                                                                 "variables": [{"key": "q", "value": "{sys.query}"}]}}, "z", orch=orch)
            assert json.loads(outputs_of(events, "x")["result"])["query"] == {"q": ["z"]}
            events = await run_one({"type": "Invoke", "params": {"url": server.url + "/html", "clean_html": True}}, orch=orch)
            assert outputs_of(events, "x")["result"] == "Title Hello world"


async def test_invoke_retries_5xx_with_backoff_then_succeeds_and_fails_fast_on_4xx():
    async with httpx.AsyncClient() as client:
        with EchoServer() as server:
            server.failures_left = 2
            events = await run_one({"type": "Invoke", "params": {"url": server.url + "/flaky", "max_retries": 2, "delay_after_error": 0.001}},
                                   orch={"http": client})
            assert finished(events)["status"] == RunStatus.SUCCEEDED
            attempts = [e.data["attempt"] for e in events if e.kind == "node_started" and e.data["component_id"] == "x"]
            assert attempts == [1, 2, 3]
            server.hits.clear()
            events = await run_one({"type": "Invoke", "params": {"url": server.url + "/missing", "max_retries": 3, "delay_after_error": 0.001}},
                                   orch={"http": client})
            assert "404" in error_of(events)["message"] and server.hits == ["/missing"]


async def test_excel_processor_csv_read_merge_output():
    csv1 = "data:text/csv;base64," + base64.b64encode(b"id,name\n1,a\n2,b\n").decode()
    csv2 = "id,score\n1,9\n"
    extra = {"globals": {"env.files": [csv1, csv2]}}
    events = await run_one({"type": "ExcelProcessor", "params": {"operation": "read", "input_files": ["env.files"]}}, extra=extra)
    assert outputs_of(events, "x")["data"] == [[{"id": "1", "name": "a"}, {"id": "2", "name": "b"}], [{"id": "1", "score": "9"}]]
    events = await run_one({"type": "ExcelProcessor", "params": {"operation": "merge", "merge_strategy": "join", "join_on": "id",
                                                                 "input_files": ["env.files"]}}, extra=extra)
    assert outputs_of(events, "x")["data"] == [{"id": "1", "name": "a", "score": "9"}, {"id": "2", "name": "b"}]
    events = await run_one({"type": "ExcelProcessor", "params": {"operation": "output", "output_format": "csv",
                                                                 "transform_data": "env.rows", "output_filename": "out.xlsx"}},
                           extra={"globals": {"env.rows": [{"a": 1}, {"a": 2, "b": 3}]}})
    attachment = outputs_of(events, "x")["attachment"]
    assert attachment["filename"] == "out.csv"
    assert base64.b64decode(attachment["base64"]).decode().splitlines() == ["a,b", "1,", "2,3"]


async def test_doc_generator_html_and_unsupported_pdf():
    events = await run_one({"type": "DocGenerator", "params": {"content": "<b>{sys.query}</b><think>secret</think>", "output_format": "html",
                                                               "add_timestamp": False}}, "x&y")
    download = json.loads(outputs_of(events, "x")["download"])
    assert base64.b64decode(download["base64"]).decode() == "<html><body><p>&lt;b&gt;x&amp;y&lt;/b&gt;</p></body></html>"


async def test_data_operations_literal_eval_keeps_hostile_text_as_text():
    hostile = "-" * 50_000 + "1"  # too deep for Python's parser: must stay text, not fail the node
    extra = {"globals": {"env.data": [{"deep": hostile, "list": "[1, 2]"}]}}
    events = await run_one({"type": "DataOperations", "params": {"query": ["env.data"], "operations": "literal_eval"}}, "q", extra=extra)
    assert outputs_of(events, "x")["result"] == [{"deep": hostile, "list": [1, 2]}]
