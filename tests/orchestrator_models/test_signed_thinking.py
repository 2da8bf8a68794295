"""An Agent's tool loop on Anthropic with extended thinking: the signed thinking blocks of a tool-call
round go back, unchanged, on that assistant turn of the next request (Anthropic rejects the loop
otherwise). Real gateway over gRPC, scripted server speaking /v1/messages; the assertion is on the
exact body it received."""

from __future__ import annotations

import json

import pytest
from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.common.structs import to_struct
from tests.orchestrator.support.harness import dsl
from tests.support import openai_server
from tests.support.llm_stack import AUTH, llm_stack


@pytest.fixture(scope="module")
async def stack(tmp_path_factory):
    def claude(scripted):
        return {"claude": {"model": "anthropic/claude-sonnet-4-5", "api_base": scripted.root_url, "api_key": "k-test"}}

    async with llm_stack(tmp_path_factory.mktemp("signed"), more_models=claude) as (stub, provider):
        yield stub, provider


def canvas() -> dict:
    return dsl({
        "begin": {"type": "Begin", "down": ["agent"]},
        "agent": {"type": "Agent", "params": {"llm_id": "claude", "sys_prompt": "Research.", "thinking": "enabled",
                                              "tools": [{"component_name": "Wikipedia", "name": "Wikipedia", "params": {}}],
                                              "prompts": [{"role": "user", "content": "{sys.query}"}]},
                  "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{agent@content}"]}},
    })


async def test_signed_blocks_of_a_tool_round_are_echoed_on_its_turn(stack):
    stub, provider = stack
    provider.queue(
        openai_server.Reply(reasoning_content="I should look this up.", signature="c2lnLXJvdW5kMA==",
                            redacted_thinking=["RU5DUllQVEVE"],
                            tool_calls=[{"id": "toolu_1", "name": "wikipedia_search",
                                         "arguments": json.dumps({"query": "solar power"})}]),
        openai_server.Reply(content="Solar power is energy from the sun.", reasoning_content="Done.", signature="c2lnLTE="),
    )
    before = len(provider.chat_bodies)
    request = orchestrator_pb2.RunCanvasRequest(dsl=to_struct(canvas()), query="solar power")
    events = [e async for e in stub.RunCanvas(request, metadata=AUTH, timeout=60)]
    finished = [e.workflow_finished for e in events if e.WhichOneof("event") == "workflow_finished"]
    assert finished and finished[0].status == common_pb2.RUN_STATUS_SUCCEEDED
    second = provider.chat_bodies[before + 1]
    assistant = [m for m in second["messages"] if m["role"] == "assistant"]
    assert len(assistant) == 1
    blocks = [b for b in assistant[0]["content"] if b["type"] in ("thinking", "redacted_thinking")]
    assert blocks == [{"type": "thinking", "thinking": "I should look this up.", "signature": "c2lnLXJvdW5kMA=="},
                      {"type": "redacted_thinking", "data": "RU5DUllQVEVE"}]
    assert [b["type"] for b in assistant[0]["content"]][-1] == "tool_use"
