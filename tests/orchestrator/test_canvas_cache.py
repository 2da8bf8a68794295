"""Inline DSLs are decoded and loaded once per dsl_key, in the core's one cache: later runs share the
canvas, bad DSLs and DSLs over CACHEABLE_DSL_BYTES are never kept."""

from __future__ import annotations

import pytest
from agentcanvas.v1 import orchestrator_pb2

from services.common.errors import InvalidArgumentError
from services.common.structs import from_struct, to_struct
from services.orchestrator.core import orchestrator as orchestrator_module
from services.orchestrator.core.ports import RunStatus
from services.orchestrator.server import OrchestratorServicer
from tests.orchestrator.support.harness import dsl, finished, make_orchestrator, run_dsl

ECHO = dsl({"begin": {"type": "Begin", "down": ["msg"]},
            "msg": {"type": "Message", "params": {"content": ["you said {sys.query}"]}}})


def _key(document) -> bytes:
    return b"s" + to_struct(document).SerializeToString(deterministic=True)  # what the gRPC adapter sends


def _echo(text: str):
    return dsl({"begin": {"type": "Begin", "down": ["msg"]},
                "msg": {"type": "Message", "params": {"content": [text + " {sys.query}"]}}})


class Decoder:
    """A RunRequest.decode_dsl that counts how often the core asked for the DSL."""

    def __init__(self, document) -> None:
        self.struct = to_struct(document)
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return from_struct(self.struct)


async def test_runs_of_one_inline_dsl_share_its_canvas_and_keep_their_own_inputs():
    orch = make_orchestrator()
    _, first = await run_dsl(orch, ECHO, "one", dsl_key=_key(ECHO))
    _, second = await run_dsl(orch, ECHO, "two", dsl_key=_key(ECHO))
    assert finished(first)["status"] == RunStatus.SUCCEEDED and finished(second)["status"] == RunStatus.SUCCEEDED
    assert finished(first)["outputs"]["content"] == "you said one"
    assert finished(second)["outputs"]["content"] == "you said two"
    assert list(orch._canvases) == [_key(ECHO)]  # loaded once


async def test_a_bad_inline_dsl_is_rejected_every_time_and_not_kept():
    orch = make_orchestrator()
    bad = dsl({"begin": {"type": "Begin", "down": ["nowhere"]}})
    for _ in range(2):
        with pytest.raises(InvalidArgumentError):
            await run_dsl(orch, bad, "q", dsl_key=_key(bad))
    assert not orch._canvases


async def test_the_least_recently_used_canvas_is_dropped_first():
    orch = make_orchestrator()
    docs = [dsl({"begin": {"type": "Begin", "down": ["msg"]},
                 "msg": {"type": "Message", "params": {"content": [f"canvas {i}"]}}})
            for i in range(orchestrator_module.CANVAS_CACHE_SIZE + 1)]
    for doc in docs[:-1]:
        await run_dsl(orch, doc, dsl_key=_key(doc))
    await run_dsl(orch, docs[0], dsl_key=_key(docs[0]))  # used again: now the most recent
    _, events = await run_dsl(orch, docs[-1], dsl_key=_key(docs[-1]))
    assert finished(events)["outputs"]["content"] == f"canvas {len(docs) - 1}"
    assert len(orch._canvases) == orchestrator_module.CANVAS_CACHE_SIZE
    assert _key(docs[0]) in orch._canvases and _key(docs[1]) not in orch._canvases


async def test_a_seen_dsl_is_not_decoded_or_loaded_again():
    orch = make_orchestrator()
    decode = Decoder(ECHO)
    _, first = await run_dsl(orch, None, "one", dsl_key=_key(ECHO), decode_dsl=decode)
    canvas = orch._canvases[_key(ECHO)]
    _, second = await run_dsl(orch, None, "two", dsl_key=_key(ECHO), decode_dsl=decode)
    assert decode.calls == 1
    assert orch._canvases[_key(ECHO)] is canvas  # the second run used the canvas loaded by the first
    assert finished(second)["outputs"]["content"] == "you said two"


async def test_a_dsl_over_the_cacheable_size_is_decoded_and_loaded_per_run_and_not_kept():
    orch = make_orchestrator()
    big = _echo("x" * orchestrator_module.CACHEABLE_DSL_BYTES)
    decode = Decoder(big)
    assert len(_key(big)) > orchestrator_module.CACHEABLE_DSL_BYTES
    for query in ("e", "f"):
        _, events = await run_dsl(orch, None, query, dsl_key=_key(big), decode_dsl=decode)
        assert finished(events)["outputs"]["content"].endswith(f"x {query}")
    assert decode.calls == 2
    assert not orch._canvases


async def test_the_grpc_adapter_leaves_inline_dsls_to_the_core_cache():
    orch = make_orchestrator()
    servicer = OrchestratorServicer(orch)

    async def answer(document, query: str) -> str:
        request = orchestrator_pb2.RunCanvasRequest(dsl=to_struct(document), query=query)
        events = [e async for e in servicer.RunCanvas(request, None) if not e.HasField("heartbeat")]
        return from_struct(events[-1].workflow_finished.outputs)["content"]

    assert await answer(_echo("first"), "a") == "first a"
    canvas = orch._canvases[_key(_echo("first"))]
    assert await answer(_echo("first"), "b") == "first b"
    assert await answer(_echo("second"), "c") == "second c"
    big = "x" * orchestrator_module.CACHEABLE_DSL_BYTES
    assert await answer(_echo(big), "d") == f"{big} d"
    await orch.wait_idle()
    # one entry per distinct cacheable DSL, the repeat served by the canvas its first run loaded
    assert list(orch._canvases) == [_key(_echo("first")), _key(_echo("second"))]
    assert orch._canvases[_key(_echo("first"))] is canvas


def test_equal_dsls_encode_to_equal_keys_whatever_their_key_order():
    reordered = dict(reversed(list(ECHO.items())))
    assert _key(reordered) == _key(ECHO)
