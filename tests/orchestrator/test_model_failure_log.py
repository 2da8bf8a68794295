"""A model call that fails for good (a 401, or a 500 once the gateway's and the node's retries are spent) is
one WARNING naming the run, the node, the model and the typed reason, through the real gateway and a
scripted OpenAI-compatible server."""

from __future__ import annotations

import logging

import pytest
from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.common.structs import to_struct
from tests.orchestrator.support.harness import dsl
from tests.support import openai_server
from tests.support.llm_stack import AUTH, llm_stack

RETRY = {"max_attempts": 2, "initial_backoff_s": 0, "max_backoff_s": 0, "jitter": 0}


@pytest.fixture
async def stack(tmp_path):
    async with llm_stack(tmp_path, llm_id="m", gateway={"retry": RETRY}) as pair:
        yield pair


def canvas(**llm_params) -> dict:
    return dsl({
        "begin": {"type": "Begin", "down": ["writer"]},
        "writer": {"type": "LLM", "params": {"llm_id": "m", "prompts": [{"role": "user", "content": "{sys.query}"}],
                                             **llm_params}, "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{writer@content}"]}},
    })


def warnings_about_models(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and getattr(r, "model", None) is not None]


@pytest.mark.parametrize(("failures", "reason", "params"), [
    ([openai_server.Fail(401, body={"error": {"message": "bad key", "type": "invalid_request_error"}})], "AUTH", {}),
    # Two gateway attempts per node attempt, two node attempts: four 500s, still one line.
    ([openai_server.Fail(500)] * 4, "SERVER", {"max_retries": 1, "delay_after_error": 0}),
])
async def test_a_model_failing_for_good_is_one_warning_with_run_node_model_and_reason(stack, caplog, failures,
                                                                                      reason, params):
    stub, provider = stack
    provider.queue(*failures)
    with caplog.at_level(logging.INFO):
        events = [e async for e in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(
            dsl=to_struct(canvas(**params)), query="hi"), metadata=AUTH, timeout=60)]
    final = events[-1].workflow_finished
    assert final.status == common_pb2.RUN_STATUS_FAILED
    assert len(provider.chat_bodies) == len(failures)  # every retry was made before giving up
    lines = warnings_about_models(caplog)
    assert len(lines) == 1, [r.getMessage() for r in lines]
    line = lines[0]
    run_id = events[0].run_id
    assert (line.run_id, line.component_id, line.model, line.reason) == (run_id, "writer", "m", reason)
    assert run_id in line.getMessage() and "writer" in line.getMessage() and reason in line.getMessage()
