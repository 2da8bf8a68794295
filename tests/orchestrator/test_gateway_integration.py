"""Begin → LLM → Message through the real llm_gateway (litellm) and a scripted OpenAI-compatible
server: the orchestrator talks gRPC to the gateway, the gateway talks HTTP to the "provider"."""

from __future__ import annotations

import os

import pytest
from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.common.structs import from_struct, to_struct
from tests.support import openai_server
from tests.support.llm_stack import llm_stack
from tests.orchestrator.support.harness import dsl


AUTH = [("authorization", "Bearer t1")]
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
async def stack(tmp_path):
    async with llm_stack(tmp_path) as pair:
        yield pair


async def test_begin_llm_message_through_the_real_gateway(stack):
    stub, provider = stack
    provider.queue(openai_server.Stream(
        chunks=[{"reasoning_content": "Thinking about France."}, {"content": "Par"}, {"content": "is"}],
        usage={"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}))
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["llm"]},
        "llm": {"type": "LLM", "params": {"llm_id": "", "sys_prompt": "Answer briefly.",
                                          "prompts": [{"role": "user", "content": "{sys.query}"}]}, "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}},
    })
    events = [e async for e in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(
        dsl=to_struct(canvas), query="What is the capital of France?"), metadata=AUTH, timeout=60)]
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[0] == "workflow_started" and kinds[-1] == "workflow_finished"
    assert "think_start" in kinds and kinds.index("think_start") < kinds.index("think_end") < kinds.index("message_end")
    thinking = "".join(e.think_delta.content for e in events if e.HasField("think_delta"))
    answer = "".join(e.message_delta.content for e in events if e.HasField("message_delta"))
    assert thinking == "Thinking about France." and answer == "Paris"
    final = events[-1].workflow_finished
    assert final.status == common_pb2.RUN_STATUS_SUCCEEDED and from_struct(final.outputs)["content"] == "Paris"
    assert final.usage.total_tokens == 15 and final.usage.calls == 1
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    body = provider.requests[-1].body
    assert body["messages"] == [{"role": "system", "content": "Answer briefly."},
                                {"role": "user", "content": "What is the capital of France?"}]
