"""Inline DSLs are loaded once per dsl_key: later runs share the canvas, bad DSLs are never kept."""

from __future__ import annotations

import pytest

from services.common.errors import InvalidArgumentError
from services.common.structs import to_struct
from services.orchestrator.core import orchestrator as orchestrator_module
from services.orchestrator.core.ports import RunStatus
from tests.orchestrator.support.harness import dsl, finished, make_orchestrator, run_dsl

ECHO = dsl({"begin": {"type": "Begin", "down": ["msg"]},
            "msg": {"type": "Message", "params": {"content": ["you said {sys.query}"]}}})


def _key(document) -> bytes:
    return to_struct(document).SerializeToString(deterministic=True)  # what the gRPC adapter sends


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


def test_equal_dsls_encode_to_equal_keys_whatever_their_key_order():
    reordered = dict(reversed(list(ECHO.items())))
    assert _key(reordered) == _key(ECHO)
