"""Tools as canvas nodes: Retrieval over the embedded knowledge base and a web tool against a local
API server, through the whole engine (references, citations in MessageEnd, error policy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.common.settings import Config
from services.orchestrator.core.dsl.loader import load
from services.orchestrator.core.dsl.validate import validate
from services.orchestrator.core.ports import RunStatus, acting_as
from services.orchestrator.tools import ToolRuntime, ToolsSettings
from services.orchestrator.tools.kb_cli import add as kb_add
from tests.orchestrator.support.harness import dsl, finished, make_orchestrator, node_events, run_dsl
from tests.orchestrator.support.scripted_llm import ScriptedLlm
from tests.support.web_apis import start_web_apis

EXAMPLES = Path(__file__).parents[1] / "fixtures" / "ragflow_dsl" / "examples"


@pytest.fixture
async def kb_runtime(tmp_path):
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)})
    doc = tmp_path / "returns.md"
    doc.write_text("Refund policy: items can be returned within 30 days for a full refund.\n\n"
                   "Shipping: orders ship within two business days.")
    kb_add([doc], config, env={})
    runtime = ToolRuntime(ToolsSettings.from_config(config, env={}))
    yield runtime
    await runtime.aclose()


def rag_canvas(query: str = "{sys.query}"):
    return dsl({
        "begin": {"type": "Begin", "down": ["retrieval:0"]},
        "retrieval:0": {"type": "Retrieval", "params": {"query": query, "top_n": 3, "similarity_threshold": 0.0,
                                                         "empty_response": "Nothing found"}, "down": ["llm"]},
        "llm": {"type": "LLM", "params": {"llm_id": "m", "sys_prompt": "Knowledge:\n{retrieval:0@formalized_content}",
                                          "prompts": [{"role": "user", "content": "{sys.query}"}]}, "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}},
    })


async def test_retrieval_node_feeds_the_llm_and_cites_in_message_end(kb_runtime):
    llm = ScriptedLlm({"m": [[("text", "30 days [ID:0]")]]})
    _, events = await run_dsl(make_orchestrator(llm=llm, tools=kb_runtime), rag_canvas(), "refund policy days")
    done = finished(events)
    assert done["status"] == RunStatus.SUCCEEDED and done["outputs"]["content"] == "30 days [ID:0]"
    system = llm.requests[0].messages[0]["content"]
    assert "returned within 30 days" in system
    end = next(e for e in events if e.kind == "message_end")
    chunks = end.data["reference"]["chunks"]
    assert chunks and chunks[0]["citation_id"] == 0 and "30 days" in chunks[0]["content"]
    assert end.data["reference"]["doc_aggs"][0]["doc_name"] == "returns.md"


async def test_retrieval_example_from_ragflow_runs_with_empty_response(kb_runtime):
    example = json.loads((EXAMPLES / "retrieval_and_generate.json").read_text())  # G1: no query on the node
    llm = ScriptedLlm({"deepseek-chat": [[("text", "I could not find it.")]]})
    _, events = await run_dsl(make_orchestrator(llm=llm, tools=kb_runtime), example, "anything")
    assert finished(events)["status"] == RunStatus.SUCCEEDED
    assert "Nothing found in dataset" in llm.requests[0].messages[0]["content"]
    assert node_events(events, "node_finished") == ["begin", "retrieval:0", "generate:0", "message:0"]


async def test_web_tool_node_against_a_local_api_and_its_error_policy(tmp_path):
    with start_web_apis() as apis:
        runtime = ToolRuntime(ToolsSettings.from_mapping(apis.tools_config(), data_dir=tmp_path, env={}))
        try:
            canvas = dsl({
                "begin": {"type": "Begin", "down": ["wiki"]},
                "wiki": {"type": "Wikipedia", "params": {"query": "sys.query", "top_n": 2}, "down": ["msg"]},
                "msg": {"type": "Message", "params": {"content": ["{wiki@formalized_content}"]}},
            })
            _, events = await run_dsl(make_orchestrator(tools=runtime), canvas, "Paris")
            assert finished(events)["status"] == RunStatus.SUCCEEDED, finished(events)
            assert next(e for e in events if e.kind == "message_end").data.get("reference", {}).get("chunks")
        finally:
            await runtime.aclose()


async def test_tool_param_problems_are_reported_per_node(kb_runtime):
    canvas = dsl({"begin": {"type": "Begin", "down": ["sql"]},
                  "sql": {"type": "ExeSQL", "params": {"db_type": "mysql", "database": "", "username": "", "host": "", "password": ""}}})
    problems = [(p.component_id, p.code) for p in validate(canvas, kb_runtime.context()).problems]
    assert problems and all(p == ("sql", "BAD_PARAM") for p in problems)


async def test_tools_without_a_runtime_fail_the_node_clearly():
    _, events = await run_dsl(make_orchestrator(), rag_canvas(), "q")
    error = finished(events)["error"]
    assert error["component_id"] == "retrieval:0" and error["reason"] == "NO_TOOLS"


async def test_code_exec_node_resolves_argument_references_over_a_real_sandbox_socket(tmp_path):
    from tests.orchestrator_tools.support.sandbox_servicer import start_sandbox

    server, address, servicer = await start_sandbox()
    runtime = ToolRuntime(ToolsSettings.from_mapping({"code_exec": {"address": address, "timeout_s": 20, "token": "svc"}},
                                                     data_dir=tmp_path, env={}))
    try:
        canvas = dsl({
            "begin": {"type": "Begin", "down": ["split"]},
            "split": {"type": "StringTransform", "params": {"method": "split", "split_ref": "sys.query"}, "down": ["code"]},
            "code": {"type": "CodeExec", "down": ["msg"], "params": {
                "lang": "python3", "script": "def main(items, label):\n    return {label: len(items)}\n",
                "arguments": {"items": "split@result", "label": "{sys.user_id}"},
                "outputs": {"result": {"type": "Object", "value": ""}}}},
            "msg": {"type": "Message", "params": {"content": ["{code@result}"]}},
        })
        _, events = await run_dsl(make_orchestrator(tools=runtime), canvas, "a,b,c", user_id="count")
        assert finished(events)["outputs"]["content"] == '{"count":3}'
        assert servicer.requests[-1].request_id.endswith(":code::1")  # run:node:scope:attempt, for dedup
    finally:
        await runtime.aclose()
        await server.stop(None)


async def test_code_exec_of_a_taken_over_run_acts_for_its_creator_with_the_service_token(tmp_path):
    """Outside an RPC (a takeover) there is no caller's token to forward: CodeExec sent none, and the sandbox
    refused the run's code (UNAUTHENTICATED) after every takeover. It now uses the orchestrator's service token
    on behalf of the run's creator, as the store and gateway calls do."""
    from services.orchestrator.adapters.memory import InMemoryRunStore
    from services.orchestrator.core.ports import RunRecord
    from tests.orchestrator_tools.support.sandbox_servicer import start_sandbox

    server, address, servicer = await start_sandbox()
    runtime = ToolRuntime(ToolsSettings.from_mapping({"code_exec": {"address": address, "timeout_s": 20}},
                                                     data_dir=tmp_path, env={}),
                          service_identity=lambda: ("t-svc", acting_as.get()))
    try:
        canvas = dsl({
            "begin": {"type": "Begin", "down": ["code"]},
            "code": {"type": "CodeExec", "down": ["msg"], "params": {
                "lang": "python3", "script": "def main():\n    return 7\n", "arguments": {},
                "outputs": {"result": {"type": "Number", "value": 0}}}},
            "msg": {"type": "Message", "params": {"content": ["{code@result}"]}},
        })
        store = InMemoryRunStore()
        spec = {"dsl": load(canvas).canvas.dsl, "query": "", "inputs": {}, "globals": {}}
        record = await store.create_run(RunRecord(id="r-taken-over", spec=spec, tenant_id="acme",
                                                     creator_id="alice", create_time_ms=1))
        orchestrator = make_orchestrator(store, tools=runtime)
        assert await orchestrator.reap_once() == 1  # no RPC: the takeover path
        await orchestrator.wait_idle()
        done = await store.get_run(record.id)
        assert done.status == RunStatus.SUCCEEDED, done.error
        sent = servicer.metadata[-1]
        assert sent.get("authorization") == "Bearer t-svc" and sent.get("x-agentcanvas-on-behalf-of") == "acme/alice"
    finally:
        await runtime.aclose()
        await server.stop(None)
