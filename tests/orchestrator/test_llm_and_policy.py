"""The thin LLM component through a scripted LlmClient, and the per-node error policy."""

from __future__ import annotations

import asyncio

from services.orchestrator.core.ports import RunStatus
from tests.orchestrator.support.harness import dsl, finished, kinds, make_orchestrator, node_events, run_dsl
from tests.orchestrator.support.scripted_llm import ScriptedLlm


def chat(llm_params: dict | None = None, message: str = "{llm@content}", **llm_extra):
    return dsl({
        "begin": {"type": "Begin", "down": ["llm"]},
        "llm": {"type": "LLM", "params": {"llm_id": "m", "sys_prompt": "You answer {sys.query}",
                                          "prompts": [{"role": "user", "content": "Q: {sys.query}"}], **(llm_params or {})},
                "down": ["msg"], **llm_extra},
        "msg": {"type": "Message", "params": {"content": [message]}},
    })


async def test_begin_llm_message_streams_typed_events_and_sums_usage():
    llm = ScriptedLlm({"m": [[("think", "let me"), ("think", " see"), ("text", "Par"), ("text", "is")]]})
    _, events = await run_dsl(make_orchestrator(llm=llm), chat(message="A: {llm@content}."), "capital?")
    body = [(e.kind, e.data.get("content")) for e in events if e.kind in ("message_delta", "think_start", "think_delta", "think_end")]
    assert body == [("message_delta", "A: "), ("think_start", None), ("think_delta", "let me"), ("think_delta", " see"),
                    ("think_end", None), ("message_delta", "Par"), ("message_delta", "is"), ("message_delta", ".")]
    end = next(e for e in events if e.kind == "message_end")
    assert end.data["content"] == "A: Paris."
    done = finished(events)
    assert done["status"] == RunStatus.SUCCEEDED and done["outputs"]["content"] == "A: Paris."
    assert done["usage"]["total_tokens"] == 15 and done["usage"]["calls"] == 1
    request = llm.requests[0]
    assert request.messages == [{"role": "system", "content": "You answer capital?"}, {"role": "user", "content": "Q: capital?"}]
    assert kinds(events)[0] == "workflow_started" and kinds(events)[-1] == "workflow_finished"
    # the Message started while the model was still producing (no barrier): node_started(msg) precedes node_finished(llm)
    assert kinds(events).index("node_started", 3) < [i for i, e in enumerate(events) if e.kind == "node_finished" and e.data["component_id"] == "llm"][0]


async def test_generation_flags_and_structured_output():
    llm = ScriptedLlm({"m": [[("text", "```json\n{\"city\": \"Paris\"}\n```")]]})
    schema = {"structured": {"type": "object", "properties": {"city": {"type": "string"}}}}
    doc = chat({"temperature": 0.3, "temperatureEnabled": True, "max_tokens": 99, "maxTokensEnabled": False,
                "outputs": schema}, message="{llm@structured.city}")
    _, events = await run_dsl(make_orchestrator(llm=llm), doc, "q")
    assert finished(events)["outputs"]["content"] == "Paris"
    assert llm.requests[0].temperature == 0.3 and llm.requests[0].max_tokens is None
    assert llm.requests[0].json_schema["properties"] == {"city": {"type": "string"}}
    assert not [e for e in events if e.kind == "think_start"]


async def test_history_is_passed_from_the_session(tmp_path):
    from services.orchestrator.core.run_request import RunRequest
    llm = ScriptedLlm({"m": [[("text", "one")], [("text", "two")]]})
    orch = make_orchestrator(llm=llm)
    session = orch.store.create_session()
    for query in ("first?", "second?"):
        record = await orch.start_run(RunRequest(dsl=chat(), query=query, session_id=session.id))
        [e async for e in orch.stream_events(record.id)]
        await orch.wait_idle()
    second = llm.requests[1].messages
    assert [m["content"] for m in second[1:]] == ["first?", "one", "Q: second?"]
    saved = await orch.store.get_session(session.id)
    assert saved.conversation_turns == 2
    assert saved.state["history"][-1] == {"role": "assistant", "content": "two"}


async def test_model_failure_fails_the_run_with_the_component_id():
    llm = ScriptedLlm({"m": [[("text", ""), ("error", "quota exceeded")]]})
    _, events = await run_dsl(make_orchestrator(llm=llm), chat(), "q")
    done = finished(events)
    assert done["status"] == RunStatus.FAILED
    assert done["error"]["component_id"] == "llm" and "quota exceeded" in done["error"]["message"]
    assert kinds(events).count("workflow_finished") == 1


async def test_retryable_model_errors_retry_with_backoff():
    llm = ScriptedLlm({"m": [[("error", "overloaded", True)], [("error", "overloaded", True)], [("text", "ok")]]})
    _, events = await run_dsl(make_orchestrator(llm=llm), chat({"max_retries": 2, "delay_after_error": 0.001}), "q")
    assert finished(events)["outputs"]["content"] == "ok"
    assert [e.data["attempt"] for e in events if e.kind == "node_started" and e.data["component_id"] == "llm"] == [1, 2, 3]


async def test_default_value_policy_streams_the_default_and_continues():
    llm = ScriptedLlm({"m": [[("error", "down")]]})
    doc = chat({"exception_method": "comment", "exception_default_value": "Sorry, try later."})
    _, events = await run_dsl(make_orchestrator(llm=llm), doc, "q")
    done = finished(events)
    assert done["status"] == RunStatus.SUCCEEDED and done["outputs"]["content"] == "Sorry, try later."
    llm_done = next(e for e in events if e.kind == "node_finished" and e.data["component_id"] == "llm")
    assert llm_done.data["error"]["message"].endswith("down")  # reported, though recovered


async def test_goto_policy_follows_the_exception_edge_and_skips_normal_downstream():
    doc = dsl({
        "begin": {"type": "Begin", "down": ["inv"]},
        "inv": {"type": "Invoke", "down": ["ok"], "params": {"url": "http://127.0.0.1:9/none", "timeout": 1,
                                                             "exception_method": "goto", "exception_goto": ["fallback"]}},
        "ok": {"type": "Message", "params": {"content": ["ok"]}},
        "fallback": {"type": "Message", "params": {"content": ["fallback: {inv@_ERROR}"]}},
    })
    import httpx
    async with httpx.AsyncClient() as client:
        _, events = await run_dsl(make_orchestrator(http=client), doc)
    assert finished(events)["outputs"]["content"].startswith("fallback: request to http://127.0.0.1:9/none failed")
    assert node_events(events, "node_skipped") == ["ok"]


async def test_timeouts_are_real_and_cancel_the_node():
    gate = asyncio.Event()  # never set: the model hangs
    llm = ScriptedLlm({"m": [[("gate", gate)]]})
    _, events = await run_dsl(make_orchestrator(llm=llm, node_timeout_s=0.05), chat(), "q")
    done = finished(events)
    assert done["status"] == RunStatus.FAILED and done["error"]["reason"] == "COMPONENT_TIMEOUT"


async def test_agent_without_tools_runs_like_an_llm():
    llm = ScriptedLlm({"m": [[("text", "agent says hi")]]})
    doc = dsl({"begin": {"type": "Begin", "down": ["a"]},
               "a": {"type": "Agent", "params": {"llm_id": "m", "prompts": "{sys.query}", "tools": []}, "down": ["msg"]},
               "msg": {"type": "Message", "params": {"content": ["{a@content}"]}}})
    _, events = await run_dsl(make_orchestrator(llm=llm), doc, "hello")
    assert finished(events)["outputs"]["content"] == "agent says hi"
    assert llm.requests[0].messages[-1] == {"role": "user", "content": "hello"}


def router(query_ref: str = "sys.query"):
    return dsl({
        "begin": {"type": "Begin", "down": ["cat"]},
        "cat": {"type": "Categorize", "down": ["refund", "sales", "other"], "params": {
            "llm_id": "m", "query": query_ref, "category_description": {
                "Refund": {"description": "money back", "examples": ["I want my money back"], "to": ["refund"]},
                "Sales ": {"description": "buying", "examples": "How much is it?\nDo you ship?", "to": "sales"},
                "Other": {"description": "anything else", "to": ["other"]}}}},
        **{k: {"type": "Message", "params": {"content": [k]}, "down": ["agg"]} for k in ("refund", "sales", "other")},
        "agg": {"type": "VariableAggregator", "params": {"groups": [{"group_name": "which", "variables": [
            {"value": "refund@content"}, {"value": "sales@content"}, {"value": "other@content"}]}]}},
    })


async def test_categorize_routes_on_constrained_json_and_skips_other_branches():
    llm = ScriptedLlm({"m": [[("text", '{"category": "sales"}')]]})
    _, events = await run_dsl(make_orchestrator(llm=llm), router(), "How much for two?")
    assert finished(events)["outputs"]["content"] == "sales"
    assert node_events(events, "node_skipped") == ["refund", "other"]
    cat = next(e for e in events if e.kind == "node_finished" and e.data["component_id"] == "cat")
    assert cat.data["branch"] == "Sales " and cat.data["next"] == ["sales"]
    request = llm.requests[0]
    assert request.json_schema["properties"]["category"]["enum"] == ["Refund", "Sales", "Other"]
    assert 'USER: "Do you ship?" → Sales' in request.messages[0]["content"]  # string examples were split (G1)
    assert request.messages[1]["content"].endswith("USER: How much for two?")


async def test_categorize_falls_back_to_counting_names_then_the_last_category():
    llm = ScriptedLlm({"m": [[("text", "Refund, definitely a refund")], [("text", "no idea")]]})
    orch = make_orchestrator(llm=llm)
    _, events = await run_dsl(orch, router(), "money")
    assert finished(events)["outputs"]["content"] == "refund"
    _, events = await run_dsl(orch, router(), "??")
    assert finished(events)["outputs"]["content"] == "other"
