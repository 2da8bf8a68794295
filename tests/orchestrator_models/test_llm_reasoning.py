"""LLM component through the real gateway: reasoning stays in think events (never in the answer,
DocGenerator exports or sys.history), history window, vision parts, structured output, max_retries."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pytest

from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.settings import Config
from services.llm_gateway import app as gateway_app
from services.orchestrator.adapters.gateway_grpc import GatewayLlmClient
from services.orchestrator.adapters.memory import InMemoryRunStore
from tests.orchestrator.support.harness import dsl, finished, make_orchestrator, run_dsl
from tests.support import openai_server

os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
REASONING = "SECRET-REASONING about the question"


@pytest.fixture(scope="module")
async def gateway(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("llm")
    with openai_server.ScriptedOpenAIServer() as provider:
        config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp)}).with_overrides({
            "auth": {"embedded": False, "tokens": [{"token": "t1", "tenant": "acme", "user": "alice"}]},
            "gateway": {"embedded": {"enabled": False}, "retry": {"max_attempts": 1},
                        "models": {"": {"model": "openai/test-model", "api_base": provider.base_url, "api_key": "sk"}}},
        })
        server = await start_server(gateway_app.build_definition(config), config,
                                    authenticator=TokenAuthenticator.from_config(config, env={}))
        await server.ready.wait()
        client = GatewayLlmClient(f"127.0.0.1:{server.port}", own_token="t1")
        yield client, provider
        await client.close()
        await server.stop(0)


def thinking_reply(text: str) -> openai_server.Reply:
    return openai_server.Reply(content=text, reasoning_content=REASONING)


def llm_canvas(down: str = "msg", **params: Any) -> dict[str, Any]:
    return {"type": "LLM", "params": {"llm_id": "", "sys_prompt": "Be brief.",
                                      "prompts": [{"role": "user", "content": "{sys.query}"}], **params}, "down": [down]}


async def test_reasoning_never_reaches_answer_export_or_history(gateway):
    llm, provider = gateway
    store = InMemoryRunStore()
    orch = make_orchestrator(store, llm)
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["llm"]},
        "llm": llm_canvas(down="doc"),
        "doc": {"type": "DocGenerator", "params": {"content": "{llm@content}", "output_format": "markdown"}, "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{llm@content} {doc@download}"]}},
    })
    session = store.create_session()
    provider.queue(thinking_reply("First answer."))
    _, events = await run_dsl(orch, canvas, query="one", session_id=session.id)
    assert finished(events)["status"] == 4, finished(events)
    end = [e for e in events if e.kind == "message_end"][0].data
    assert REASONING not in end["content"] and "First answer." in end["content"]
    exported = base64.b64decode(end["downloads"][0]["base64"]).decode()
    assert "First answer." in exported and REASONING not in exported
    # Second turn: the history the model receives holds the answer, never the reasoning.
    provider.queue(thinking_reply("Second answer."))
    _, events = await run_dsl(orch, canvas, query="two", session_id=session.id)
    assert finished(events)["status"] == 4
    sent = provider.chat_bodies[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert "First answer." in sent[2]["content"] and REASONING not in json.dumps(sent)
    stored = (await store.get_session(session.id)).history
    assert stored and REASONING not in json.dumps(stored)
    await orch.stop(0)


async def test_streamed_think_events_and_text_are_complete_and_separate(gateway):
    llm, provider = gateway
    orch = make_orchestrator(InMemoryRunStore(), llm)
    provider.queue(openai_server.Stream(chunks=[{"reasoning_content": "Step 1. "}, {"reasoning_content": "Step 2."},
                                                {"content": "Hel"}, {"content": "lo "}, {"content": "world"}]))
    canvas = dsl({"begin": {"type": "Begin", "down": ["llm"]}, "llm": llm_canvas(),
                  "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}}})
    _, events = await run_dsl(orch, canvas, query="hi")
    kinds = [e.kind for e in events if e.kind in ("think_start", "think_delta", "think_end", "message_delta")]
    assert kinds[0] == "think_start" and "think_end" in kinds
    assert kinds.index("think_end") < kinds.index("message_delta")
    assert "".join(e.data["content"] for e in events if e.kind == "think_delta") == "Step 1. Step 2."
    assert "".join(e.data["content"] for e in events if e.kind == "message_delta") == "Hello world"
    await orch.stop(0)


async def test_history_window_limits_the_turns_sent(gateway):
    llm, provider = gateway
    store = InMemoryRunStore()
    orch = make_orchestrator(store, llm)
    canvas = dsl({"begin": {"type": "Begin", "down": ["llm"]}, "llm": llm_canvas(message_history_window_size=1),
                  "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}}})
    session = store.create_session()
    for turn in range(3):
        provider.queue(openai_server.Reply(content=f"answer {turn}"))
        await run_dsl(orch, canvas, query=f"question {turn}", session_id=session.id)
    sent = provider.chat_bodies[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[1]["content"] == "question 1" and sent[2]["content"] == "answer 1"
    await orch.stop(0)


async def test_images_in_sys_files_are_sent_as_image_parts(gateway):
    from services.orchestrator.core.run_request import InputFileData

    llm, provider = gateway
    orch = make_orchestrator(InMemoryRunStore(), llm)
    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
    provider.queue(openai_server.Reply(content="a pixel"))
    canvas = dsl({"begin": {"type": "Begin", "down": ["llm"]}, "llm": llm_canvas(visual_files_var="sys.files"),
                  "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}}})
    _, events = await run_dsl(orch, canvas, query="what is this", files=[InputFileData("p.png", "image/png", png, "")])
    assert finished(events)["status"] == 4
    content = provider.chat_bodies[-1]["messages"][-1]["content"]
    assert isinstance(content, list)
    assert any(p.get("type") == "image_url" and p["image_url"]["url"].startswith("data:image/png;base64,") for p in content)
    await orch.stop(0)


async def test_structured_output_is_validated_and_repaired(gateway):
    llm, provider = gateway
    orch = make_orchestrator(InMemoryRunStore(), llm)
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    provider.queue(openai_server.Reply(content="not json"), openai_server.Reply(content='{"city": "Paris"}'))
    canvas = dsl({"begin": {"type": "Begin", "down": ["llm"]}, "llm": llm_canvas(outputs={"structured": schema}),
                  "msg": {"type": "Message", "params": {"content": ["{llm@structured.city}"]}}})
    _, events = await run_dsl(orch, canvas, query="capital of France")
    assert finished(events)["status"] == 4
    assert [e for e in events if e.kind == "message_end"][0].data["content"] == "Paris"
    await orch.stop(0)


async def test_max_retries_retries_a_failed_model_call(gateway):
    llm, provider = gateway
    orch = make_orchestrator(InMemoryRunStore(), llm)
    provider.queue(openai_server.Fail(503), openai_server.Reply(content="recovered"))
    canvas = dsl({"begin": {"type": "Begin", "down": ["llm"]},
                  "llm": llm_canvas(max_retries=1, delay_after_error=0.01),
                  "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}}})
    _, events = await run_dsl(orch, canvas, query="hi")
    assert finished(events)["status"] == 4, finished(events)
    starts = [e.data["attempt"] for e in events if e.kind == "node_started" and e.data["component_id"] == "llm"]
    assert starts == [1, 2]
    assert [e for e in events if e.kind == "message_end"][0].data["content"] == "recovered"
    await orch.stop(0)
