"""Canvases written for these tests behave as RAGFlow's do, over the real gRPC server (in-memory store,
scripted model): nothing is silently skipped or ignored.

1. An Iteration whose items_ref is not a list (null included) fails its node with RAGFlow's message,
   under the node's error policy.
2. ValidateCanvas (and RunCanvas) report a reference to an output its component never produces,
   naming the node, the parameter and the reference; dynamic outputs (Begin inputs, structured-output
   properties, aggregator groups, loop variables) count.
3. At run time, a reference in an answer that resolved to nothing, or text shaped like a reference that
   names nothing readable, is a RunWarning event (persisted), not silent text.
"""

from __future__ import annotations

import json

import pytest
from agentcanvas.v1 import common_pb2

from services.common.structs import from_struct, to_struct
from tests.orchestrator.support.harness import dsl
from tests.orchestrator.support.request_server import final, request_server, run


@pytest.fixture
async def server(tmp_path):
    async with request_server(tmp_path) as running:
        yield running


def finished_nodes(events) -> dict[str, object]:
    return {e.node_finished.component_id: e.node_finished for e in events if e.WhichOneof("event") == "node_finished"}


# -- 1. Iteration over something that is not a list ---------------------------------------------

def iteration_canvas(items_ref: str, **policy) -> dict:
    """Begin -> agg (a group with no truthy value: null) -> it (over items_ref) -> done; fallback on goto."""
    fallback = {"fallback": {"type": "Message", "params": {"content": ["fallback"]}}} if "exception_goto" in policy else {}
    return dsl({
        "begin": {"type": "Begin", "down": ["agg"]},
        "agg": {"type": "VariableAggregator", "down": ["it"], "params": {"groups": [
            {"group_name": "g", "variables": [{"value": "sys.user_id"}]}]}},
        "it": {"type": "Iteration", "down": ["done"], "params": {"items_ref": items_ref, **policy}},
        "ii": {"type": "IterationItem", "parent": "it", "down": ["echo"]},
        "echo": {"type": "StringTransform", "parent": "it", "params": {"method": "merge", "script": "{ii@item}"}},
        "done": {"type": "Message", "params": {"content": ["done"]}},
        **fallback,
    }, variables={"config": {"name": "config", "type": "object", "value": {"a": 1}}})


@pytest.mark.parametrize("items_ref, kind", [("agg@g", "<class 'NoneType'>"), ("env.config", "<class 'dict'>"),
                                             ("sys.query", "<class 'str'>")])
async def test_an_iteration_over_a_non_list_fails_its_node_with_ragflows_message(server, items_ref, kind):
    stub, _ = server
    events = await run(stub, dsl=to_struct(iteration_canvas(items_ref)), query="one, two")
    end = final(events)
    assert end.status == common_pb2.RUN_STATUS_FAILED
    assert end.error.component_id == "it" and end.error.reason == "NOT_A_LIST"
    assert end.error.message == f"{items_ref} must be an array, but its type is {kind}"
    assert "echo" not in finished_nodes(events)  # the body never ran


async def test_an_iteration_over_null_follows_the_exception_goto(server):
    stub, _ = server
    canvas = iteration_canvas("agg@g", exception_method="goto", exception_goto=["fallback"])
    events = await run(stub, dsl=to_struct(canvas))
    assert final(events).status == common_pb2.RUN_STATUS_SUCCEEDED, final(events).error
    assert from_struct(final(events).outputs)["content"] == "fallback"
    assert "must be an array" in finished_nodes(events)["it"].error.message


async def test_an_iteration_over_null_with_a_default_value_succeeds_and_reports_the_failure(server):
    stub, _ = server
    canvas = iteration_canvas("agg@g", exception_method="comment", exception_default_value="no items")
    events = await run(stub, dsl=to_struct(canvas))
    assert final(events).status == common_pb2.RUN_STATUS_SUCCEEDED, final(events).error
    assert from_struct(final(events).outputs)["content"] == "done"
    node = finished_nodes(events)["it"]
    assert node.error.reason == "NOT_A_LIST" and "NoneType" in node.error.message


# -- 2. references to outputs a component never produces ----------------------------------------

def outputs_canvas(message: str) -> dict:
    """Components whose outputs come from their params: Begin inputs, an LLM's structured schema,
    VariableAggregator groups, Loop variables, an Iteration's declared outputs."""
    return dsl({
        "begin": {"type": "Begin", "down": ["llm"], "params": {"inputs": {"city": {"name": "City", "type": "line"}}}},
        "llm": {"type": "LLM", "down": ["agg"], "params": {"llm_id": "m", "prompts": [{"role": "user", "content": "{begin@city}"}],
                                                        "outputs": {"structured": {"type": "object", "properties": {
                                                            "title": {"type": "string"}}}}}},
        "agg": {"type": "VariableAggregator", "down": ["loop"], "params": {"groups": [
            {"group_name": "g", "variables": [{"value": "llm@content"}]}]}},
        "loop": {"type": "Loop", "down": ["msg"], "params": {"loop_variables": [
            {"variable": "counter", "input_mode": "constant", "value": 0}], "maximum_loop_count": 1}},
        "li": {"type": "LoopItem", "parent": "loop", "down": ["set"]},
        "set": {"type": "VariableAssigner", "parent": "loop", "params": {"variables": [
            {"variable": "loop@counter", "operator": "+=", "parameter": 1}]}},
        "msg": {"type": "Message", "params": {"content": [message]}},
    })


VALID = ("{begin@city} {llm@content} {llm@structured.title} {agg@g} {loop@counter} {loop@loop_count} "
         "{llm@_ERROR} {Begin@city}")


async def test_references_to_outputs_that_exist_validate(server):
    stub, _ = server
    from agentcanvas.v1 import orchestrator_pb2
    from tests.orchestrator.support.request_server import AUTH

    reply = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl=to_struct(outputs_canvas(VALID))),
                                      metadata=AUTH)
    assert [(p.component_id, p.field, p.message) for p in reply.problems] == []


@pytest.mark.parametrize("reference, words", [
    ("{llm@summary}", ["output 'summary'", "llm (LLM)", "content"]),
    ("{begin@town}", ["output 'town'", "begin (Begin)", "city"]),
    ("{llm@structured.author}", ["'author'", "title"]),
    ("{agg@h}", ["output 'h'", "agg (VariableAggregator)", "its outputs: g"]),
    ("{loop@count}", ["output 'count'", "counter", "loop_count"]),
])
async def test_a_reference_to_an_output_that_is_never_produced_is_a_validation_problem(server, reference, words):
    stub, _ = server
    from agentcanvas.v1 import orchestrator_pb2
    from tests.orchestrator.support.request_server import AUTH, refused

    canvas = outputs_canvas(f"{VALID} {reference}")
    reply = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl=to_struct(canvas)), metadata=AUTH)
    problems = [(p.component_id, p.field, p.code, p.message) for p in reply.problems]
    assert len(problems) == 1 and problems[0][:3] == ("msg", "params.content", "DANGLING_REFERENCE"), problems
    assert reference.strip("{}") in problems[0][3] and all(word in problems[0][3] for word in words), problems[0][3]
    error = await refused(stub, dsl=to_struct(canvas))  # and RunCanvas refuses it before running anything
    assert [v.field for v in error.violations] == ["components.msg.params.content"]


async def test_an_iteration_output_naming_a_missing_body_output_is_reported(server):
    stub, _ = server
    from agentcanvas.v1 import orchestrator_pb2
    from tests.orchestrator.support.request_server import AUTH

    canvas = iteration_canvas("sys.files")
    canvas["components"]["it"]["obj"]["params"]["outputs"] = {"echoes": {"ref": "echo@text", "type": "array"}}
    reply = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl=to_struct(canvas)), metadata=AUTH)
    assert [(p.component_id, p.field) for p in reply.problems] == [("it", "params.outputs")]
    assert "echo@text" in reply.problems[0].message and "result" in reply.problems[0].message


# -- 3. a reference left empty or literal in an answer is a warning event ------------------------

async def test_a_reference_that_resolves_to_nothing_in_an_answer_is_a_warning(server):
    stub, _ = server
    from agentcanvas.v1 import orchestrator_pb2
    from tests.orchestrator.support.request_server import AUTH

    canvas = dsl({
        "begin": {"type": "Begin", "down": ["agg"]},
        "agg": {"type": "VariableAggregator", "down": ["msg"], "params": {"groups": [
            {"group_name": "g", "variables": [{"value": "sys.user_id"}]}]}},
        "msg": {"type": "Message", "params": {"content": ["got [{agg@g}] and {iteration:0@generate:1}"]}},
    })
    events = await run(stub, dsl=to_struct(canvas))
    assert final(events).status == common_pb2.RUN_STATUS_SUCCEEDED
    assert from_struct(final(events).outputs)["content"] == "got [] and {iteration:0@generate:1}"
    warnings = [e.warning for e in events if e.WhichOneof("event") == "warning"]
    assert [(w.component_id, w.code, list(w.references)) for w in warnings] == [
        ("msg", "UNRESOLVED_REFERENCE", ["agg@g"]), ("msg", "LITERAL_REFERENCE", ["iteration:0@generate:1"])]
    assert "{agg@g}" in warnings[0].message
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds.index("warning") < kinds.index("message_end")
    # persisted like any event: a replay shows them too
    replay = [e async for e in stub.StreamRunEvents(orchestrator_pb2.StreamRunEventsRequest(run_id=events[0].run_id),
                                                      metadata=AUTH) if not e.HasField("heartbeat")]
    assert [e.warning.code for e in replay if e.WhichOneof("event") == "warning"] == [w.code for w in warnings]


async def test_an_answer_whose_references_all_resolve_has_no_warning(server):
    stub, _ = server
    canvas = dsl({"begin": {"type": "Begin", "down": ["msg"]},
                  "msg": {"type": "Message", "params": {"content": ["you said {sys.query}: {\"a@b\": 1}"]}}})
    events = await run(stub, dsl=to_struct(canvas), query="hi")
    assert from_struct(final(events).outputs)["content"] == 'you said hi: {"a@b": 1}'
    assert not [e for e in events if e.WhichOneof("event") == "warning"]


# -- 4. tool parameters are honoured or reported -------------------------------------------------

@pytest.fixture
async def tools_server(tmp_path):
    """The orchestrator's gRPC server with its tools pointed at the local web-API servers."""
    import contextlib

    import grpc
    from agentcanvas.v1 import orchestrator_pb2_grpc

    from services.common.auth import TokenAuthenticator
    from services.common.bootstrap import start_server
    from services.common.settings import Config
    from services.orchestrator.adapters.memory import InMemoryRunStore
    from services.orchestrator.app import build_definition
    from tests.orchestrator.support.scripted_llm import ScriptedLlm
    from tests.support.web_apis import start_web_apis

    with start_web_apis() as apis, contextlib.ExitStack():
        config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({
            "auth": {"embedded": False, "tokens": [{"token": "t1", "tenant": "acme", "user": "alice"}]},
            "orchestrator": {"flush_interval_ms": 5},
            "tools": {**apis.tools_config(), "exesql": {"databases": {"shop": {"url": f"sqlite:///{tmp_path / 'shop.db'}"}}}}})
        llm = ScriptedLlm({"m": [[("text", '{"category": "Refund"}')]]})
        definition = build_definition(config, store=InMemoryRunStore(), llm=llm)
        running = await start_server(definition, config, authenticator=TokenAuthenticator.from_config(config, env={}))
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
        apis.llm = llm  # the test reads the requests the components made
        try:
            yield orchestrator_pb2_grpc.OrchestratorStub(channel), apis
        finally:
            await channel.close()
            await running.stop(0)


def finance_canvas(**params) -> dict:
    return dsl({"begin": {"type": "Begin", "down": ["yf"]},
                "yf": {"type": "YahooFinance", "down": ["msg"], "params": {"stock_code": "sys.query", **params}},
                "msg": {"type": "Message", "params": {"content": ["{yf@report}"]}}})


async def test_yahoo_finance_node_reports_the_statements_it_is_asked_for_and_not_the_quote(tools_server):
    stub, apis = tools_server
    canvas = finance_canvas(info=False, news=False, balance_sheet=True, cash_flow_statement=True)
    events = await run(stub, dsl=to_struct(canvas), query="msft")
    assert final(events).status == common_pb2.RUN_STATUS_SUCCEEDED, final(events).error
    answer = from_struct(final(events).outputs)["content"]
    titles = [line for line in answer.splitlines() if line.startswith("# ")]
    assert titles == ["# Balance sheet:", "# Quarterly balance sheet:", "# Cash flow statement:",
                      "# Quarterly cash flow statement:"]
    assert "| totalAssets |" in answer and "Price" not in answer and "—" not in answer
    assert not [r for r in apis.of("yahoo_finance") if r.path.endswith("/search")]  # news off: not fetched


async def test_a_tool_param_this_runtime_cannot_honour_is_reported_by_name(tools_server):
    stub, _ = tools_server
    from agentcanvas.v1 import orchestrator_pb2
    import grpc
    from tests.orchestrator.support.request_server import AUTH

    canvas = finance_canvas(count=True)
    canvas["components"]["agent"] = {"obj": {"component_name": "Agent", "params": {
        "llm_id": "m", "prompts": [{"role": "user", "content": "{sys.query}"}],
        "tools": [{"component_name": "Retrieval", "name": "kb", "params": {"use_kg": True, "kb_vars": ["x"]}}]}},
        "downstream": [], "upstream": ["begin"]}
    canvas["components"]["begin"]["downstream"].append("agent")
    reply = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl_json=json.dumps(canvas)), metadata=AUTH)
    assert [(p.component_id, p.field, p.code) for p in reply.problems] == [  # in DSL order
        ("yf", "params.count", "UNSUPPORTED"),
        ("agent", "params.tools[0].params.kb_vars", "UNSUPPORTED"),
        ("agent", "params.tools[0].params.use_kg", "UNSUPPORTED")]
    assert "backend" in reply.problems[2].message
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await run(stub, dsl=to_struct(canvas), query="msft")
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "count" in caught.value.details()
    # the same params at their defaults (or false) are fine
    quiet = finance_canvas(count=False)
    reply = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl=to_struct(quiet)), metadata=AUTH)
    assert list(reply.problems) == []


def test_every_component_declares_what_it_cannot_honour():
    from services.orchestrator.core.components import registry

    assert {name for name, _ in registry.get("Message").unsupported(
        {"output_format": "pdf", "auto_play": True, "memory_ids": ["m1"], "stream": True})} == {
        "output_format", "auto_play", "memory_ids"}
    assert registry.get("Message").unsupported({"output_format": "", "auto_play": "false", "memory_ids": []}) == []


async def test_component_params_this_runtime_cannot_honour_are_reported_by_name(tools_server):
    stub, _ = tools_server
    from agentcanvas.v1 import orchestrator_pb2
    from tests.orchestrator.support.request_server import AUTH

    canvas = dsl({
        "begin": {"type": "Begin", "down": ["call"], "params": {"layout_recognize": "DeepDOC"}},
        "call": {"type": "Invoke", "down": ["xl"], "params": {"url": "http://127.0.0.1:9/x", "proxy": "http://proxy:3128"}},
        "xl": {"type": "ExcelProcessor", "down": ["msg"], "params": {"input_files": [], "sheet_selection": "Q1,Q2"}},
        "msg": {"type": "Message", "params": {"content": ["{call@result}"], "output_format": "pdf", "auto_play": True}},
    })
    reply = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl_json=json.dumps(canvas)), metadata=AUTH)
    assert [(p.component_id, p.field, p.code) for p in reply.problems] == [
        ("begin", "params.layout_recognize", "UNSUPPORTED"), ("call", "params.proxy", "UNSUPPORTED"),
        ("xl", "params.sheet_selection", "UNSUPPORTED"), ("msg", "params.output_format", "UNSUPPORTED"),
        ("msg", "params.auto_play", "UNSUPPORTED")]
    assert "DocGenerator" in reply.problems[3].message


async def test_categorize_sends_the_enabled_generation_settings(tools_server):
    stub, apis = tools_server
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["sort"]},
        "sort": {"type": "Categorize", "down": ["a", "b"], "params": {
            "llm_id": "m", "temperature": 0.15, "temperatureEnabled": True, "top_p": 0.5, "topPEnabled": False,
            "max_tokens": 64, "maxTokensEnabled": True,
            "category_description": {"Refund": {"to": ["a"]}, "Other": {"to": ["b"]}}}},
        "a": {"type": "Message", "params": {"content": ["refund"]}},
        "b": {"type": "Message", "params": {"content": ["other"]}},
    })
    events = await run(stub, dsl_json=json.dumps(canvas), query="money back please")
    assert from_struct(final(events).outputs)["content"] == "refund"
    request = apis.llm.requests[-1]
    assert (request.temperature, request.max_tokens, request.top_p) == (0.15, 64, None)


# -- 5. errors name the tool once ------------------------------------------------------------------

async def test_a_tool_error_names_the_tool_once(tools_server, tmp_path):
    import sqlite3

    stub, _ = tools_server
    with sqlite3.connect(tmp_path / "shop.db") as db:
        db.execute("CREATE TABLE IF NOT EXISTS items (name TEXT)")
    canvas = dsl({"begin": {"type": "Begin", "down": ["sql"]},
                  "sql": {"type": "ExeSQL", "down": ["msg"], "params": {"database": "shop", "sql": "SELECT * FROM nowhere"}},
                  "msg": {"type": "Message", "params": {"content": ["{sql@formalized_content}"]}}})
    events = await run(stub, dsl_json=json.dumps(canvas), query="x")
    error = final(events).error
    assert final(events).status == common_pb2.RUN_STATUS_FAILED and error.component_id == "sql"
    assert error.message.startswith("ExeSQL: ") and "ExeSQL: ExeSQL" not in error.message, error.message
    assert "nowhere" in error.message


# -- 6. older conversation graphs: several waiting loops ---------------------------------------------

def recruiting_canvas() -> dict:
    """Two conversation loops in one cycle, as RAGFlow's older recruiting templates have: `ask` waits for
    any message and a router either chats (back to `ask`) or starts an application, which waits at `cv`
    and loops there (`more`) until the CV is complete, then goes back to `ask`."""
    return dsl({
        "begin": {"type": "Begin", "down": ["ask"]},
        "ask": {"type": "UserFillUp", "down": ["route"], "params": {
            "query_field": "message", "inputs": {"message": {"name": "message", "type": "paragraph", "optional": False}}}},
        "route": {"type": "Categorize", "down": ["intake", "chat"], "params": {"llm_id": "m", "category_description": {
            "apply": {"to": ["intake"]}, "chat": {"to": ["chat"]}}}},
        "chat": {"type": "Message", "down": ["ask"], "params": {"content": ["chat: {ask@message}"]}},
        "intake": {"type": "Message", "down": ["cv"], "params": {"content": ["Please send your CV"]}},
        "cv": {"type": "UserFillUp", "down": ["check"], "params": {
            "query_field": "message", "inputs": {"message": {"name": "message", "type": "paragraph", "optional": False}}}},
        "check": {"type": "Categorize", "down": ["more", "done"], "params": {
            "llm_id": "m", "query": "{cv@message}", "category_description": {
                "incomplete": {"to": ["more"]}, "complete": {"to": ["done"]}}}},
        "more": {"type": "Message", "down": ["cv"], "params": {"content": ["Please add your experience to: {cv@message}"]}},
        "done": {"type": "Message", "down": ["ask"], "params": {"content": ["Thanks, CV received: {cv@message}"]}},
    })


async def test_an_older_canvas_with_several_waiting_loops_runs_turn_by_turn(tmp_path):
    import contextlib

    import grpc
    from agentcanvas.v1 import orchestrator_pb2, orchestrator_pb2_grpc

    from services.common.auth import TokenAuthenticator
    from services.common.bootstrap import start_server
    from services.common.settings import Config
    from services.orchestrator.adapters.memory import InMemoryRunStore
    from services.orchestrator.app import build_definition
    from tests.orchestrator.support.request_server import AUTH
    from tests.orchestrator.support.scripted_llm import ScriptedLlm

    answers = ["apply", "incomplete", "complete", "chat"]
    llm = ScriptedLlm({"m": [[("text", json.dumps({"category": a}))] for a in answers]})
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({
        "auth": {"embedded": False, "tokens": [{"token": "t1", "tenant": "acme", "user": "alice"}]},
        "orchestrator": {"flush_interval_ms": 5}})
    running = await start_server(build_definition(config, store=InMemoryRunStore(), llm=llm), config,
                                 authenticator=TokenAuthenticator.from_config(config, env={}))
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(running.stop, 0)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
        stack.push_async_callback(channel.close)
        stub = orchestrator_pb2_grpc.OrchestratorStub(channel)
        canvas = recruiting_canvas()
        reply = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl_json=json.dumps(canvas)), metadata=AUTH)
        assert list(reply.problems) == []  # was CYCLE (the `cv` loop inside the conversation)

        shown, waits, run_id = [], [], ""
        for message in ["I want to apply", "my CV, no experience", "ten years of welding", "how are you?"]:
            fields = {"resume_run_id": run_id} if run_id else {"dsl_json": json.dumps(canvas)}
            events = await run(stub, query=message, **fields)
            assert final(events).status == common_pb2.RUN_STATUS_PAUSED, final(events).error
            shown.append([e.message_end.content for e in events if e.WhichOneof("event") == "message_end"])
            waits.append([e.user_inputs_required.component_id for e in events
                          if e.WhichOneof("event") == "user_inputs_required"])
            run_id = events[-1].run_id
        assert shown == [["Please send your CV"], ["Please add your experience to: my CV, no experience"],
                         ["Thanks, CV received: ten years of welding"], ["chat: how are you?"]]
        assert waits == [["cv"], ["cv"], ["ask"], ["ask"]]
        assert llm.calls["m"] == 4  # earlier turns are replayed from the journal, never asked again
