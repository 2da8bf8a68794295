"""RAGFlow's own templates run end to end with a scripted model (spec §6.3)."""

from __future__ import annotations

import json
from pathlib import Path

from services.orchestrator.adapters.gateway_grpc import to_request
from services.orchestrator.core.run_request import InputFileData
from services.orchestrator.core.ports import RunStatus
from tests.orchestrator.support.harness import finished, make_orchestrator, node_events, run_dsl
from tests.orchestrator.support.scripted_llm import ScriptedLlm

TEMPLATES = Path(__file__).parents[1] / "fixtures" / "ragflow_dsl" / "templates"
PNG = b"\x89PNG\r\n\x1a\nfake"


async def test_photo_text_translator_sends_the_image_and_streams_the_answer():
    template = json.loads((TEMPLATES / "photo_text_translator.json").read_text())
    llm = ScriptedLlm({"qwen-vl-plus@Tongyi-Qianwen": [[("text", "Bonjour → Hello")]]})
    _, events = await run_dsl(make_orchestrator(llm=llm), template, "translate to English",
                              files=[InputFileData("menu.png", "image/png", PNG), InputFileData("note.txt", "text/plain", b"merci")])
    done = finished(events)
    assert done["status"] == RunStatus.SUCCEEDED and done["outputs"]["content"] == "Bonjour → Hello"
    assert node_events(events, "node_started") == ["begin", "Agent:CoolPandasCrash", "Message:CurlyApplesRelate"]
    agent_started = next(e for e in events if e.kind == "node_started" and e.data["component_id"] == "Agent:CoolPandasCrash")
    assert agent_started.data["component_name"]  # display names come from the graph
    last = llm.requests[0].messages[-1]
    assert last["content"].startswith("The user query is translate to English") and last["content"].endswith("merci")
    assert last["images"] == ["data:image/png;base64,iVBORw0KGgpmYWtl"]
    proto = to_request(llm.requests[0])  # what the gateway receives: text part, then the image part
    assert [p.WhichOneof("part") for p in proto.messages[-1].parts] == ["text", "image_url"]
