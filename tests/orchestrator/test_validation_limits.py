"""Validation catches, per node and before a run starts: a Loop whose maximum_loop_count is above the
cap (or not a count at all), and a reference to a `sys.*` variable that does not exist (spec §3.6:
sys.query, sys.user_id, sys.conversation_turns, sys.files, sys.history, sys.date, plus runtime-only
sys.chat_template_kwargs and any sys.* key the DSL's own globals declare)."""

from __future__ import annotations

import pytest

from services.common.errors import InvalidArgumentError
from services.orchestrator.core.components.containers import MAX_LOOP_COUNT
from services.orchestrator.core.dsl.validate import load_for_run, validate
from services.orchestrator.core.run_request import RunRequest
from services.orchestrator.core.ports import RunStatus
from tests.orchestrator.support.harness import dsl, finished, make_orchestrator, run_dsl


def loop_canvas(count):
    return dsl({
        "begin": {"type": "Begin", "down": ["loop"]},
        "loop": {"type": "Loop", "params": {"maximum_loop_count": count}},
        "li": {"type": "LoopItem", "parent": "loop", "down": ["body"]},
        "body": {"type": "StringTransform", "parent": "loop", "params": {"method": "merge", "script": "x"}, "down": ["li"]},
    })


def problems(doc):
    return {(p.component_id, p.field, p.code) for p in validate(doc).problems}


def test_the_cap_is_sane():
    assert MAX_LOOP_COUNT == 1000


@pytest.mark.parametrize("count", [MAX_LOOP_COUNT + 1, 10**9, -1, "many", 2.5, True])
def test_a_loop_count_above_the_cap_or_not_a_count_is_bad_param_naming_the_node(count):
    assert ("loop", "params.maximum_loop_count", "BAD_PARAM") in problems(loop_canvas(count))
    with pytest.raises(InvalidArgumentError) as caught:
        load_for_run(loop_canvas(count))
    assert "components.loop.params.maximum_loop_count" in {v.field for v in caught.value.violations}


@pytest.mark.parametrize("count", [0, None, 1, 10, MAX_LOOP_COUNT, "5"])
def test_counts_up_to_the_cap_are_valid(count):
    assert validate(loop_canvas(count)).problems == []


def sys_canvas(text, **extra):
    return dsl({
        "begin": {"type": "Begin", "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": [text]}},
    }, **extra)


@pytest.mark.parametrize("text", ["{sys.querry}", "hi {sys.nope} there", "{sys.query} and {sys.usr_id}"])
def test_an_unknown_sys_variable_is_a_dangling_reference_naming_the_node(text):
    assert ("msg", "params.content", "DANGLING_REFERENCE") in problems(sys_canvas(text))
    with pytest.raises(InvalidArgumentError) as caught:
        load_for_run(sys_canvas(text))
    assert "components.msg.params.content" in {v.field for v in caught.value.violations}
    assert "sys." in caught.value.message


@pytest.mark.parametrize("text", ["{sys.query}", "{sys.user_id}", "{sys.conversation_turns}", "{sys.files.0}",
                                  "{sys.history}", "{sys.date}", "{sys.chat_template_kwargs}", "sys.query"])
def test_known_sys_variables_and_their_sub_paths_are_valid(text):
    assert validate(sys_canvas(text)).problems == []


def test_a_sys_key_declared_in_the_dsl_globals_is_valid():
    assert validate(sys_canvas("{sys.custom}", globals={"sys.custom": "v"})).problems == []


async def test_run_canvas_refuses_them_before_any_run_exists():
    orch = make_orchestrator()
    with pytest.raises(InvalidArgumentError):
        await orch.start_run(RunRequest(dsl=loop_canvas(MAX_LOOP_COUNT + 1)))
    with pytest.raises(InvalidArgumentError):
        await orch.start_run(RunRequest(dsl=sys_canvas("{sys.nope}")))
    _, events = await run_dsl(orch, loop_canvas(3))
    assert finished(events)["status"] == RunStatus.SUCCEEDED
    assert [e.data["outputs"]["loop_count"] for e in events
            if e.kind == "node_finished" and e.data["component_id"] == "loop"] == [3]
