"""Canvases written for these tests behave as RAGFlow's do, over the real gRPC server (in-memory store,
scripted model): nothing is silently skipped or ignored.

1. An Iteration whose items_ref is not a list (null included) fails its node with RAGFlow's message,
   under the node's error policy.
"""

from __future__ import annotations

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
