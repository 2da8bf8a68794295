"""The scheduler end to end through the engine: joins, branches, skips, concurrency, event order."""

from __future__ import annotations

import asyncio


from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.orchestrator.core.ports import RunStatus
from tests.orchestrator.support.harness import dsl, finished, kinds, make_orchestrator, node_events, run_dsl

NOOP = {"type": "StringTransform", "params": {"method": "merge", "script": "x"}}


def noop(down=(), **extra):
    return {**NOOP, "down": list(down), **extra}


def switch(on_yes: str, on_no: str, needle: str = "yes"):
    return {"type": "Switch", "down": [on_yes, on_no], "params": {
        "conditions": [{"logical_operator": "and", "items": [{"cpn_id": "sys.query", "operator": "contains", "value": needle}], "to": [on_yes]}],
        "end_cpn_ids": [on_no]}}


async def test_parallel_branches_join_all_of():
    doc = dsl({"begin": {"type": "Begin", "down": ["a", "b"]}, "a": noop(["j"]), "b": noop(["b2"]), "b2": noop(["j"]),
               "j": {"type": "StringTransform", "params": {"method": "merge", "script": "{a@result}+{b2@result}"}}})
    _, events = await run_dsl(make_orchestrator(), doc)
    started = node_events(events, "node_started")
    assert sorted(started) == sorted(["begin", "a", "b", "b2", "j"])
    assert started[-1] == "j"
    assert finished(events)["status"] == RunStatus.SUCCEEDED
    assert finished(events)["outputs"]["outputs"]["result"] == "x+x"


async def test_exclusive_branch_skips_and_any_of_join():
    doc = dsl({"begin": {"type": "Begin", "down": ["sw"]}, "sw": switch("y1", "n1"),
               "y1": noop(["y2"]), "y2": noop(["agg"]), "n1": noop(["agg"]),
               "agg": {"type": "VariableAggregator", "down": ["msg"], "params": {"groups": [
                   {"group_name": "out", "variables": [{"value": "y2@result"}, {"value": "n1@result"}]}]}},
               "msg": {"type": "Message", "params": {"content": ["got {agg@out}"]}}})
    _, events = await run_dsl(make_orchestrator(), doc, "no thanks")
    assert node_events(events, "node_skipped") == ["y1", "y2"]
    skip = next(e for e in events if e.kind == "node_skipped")
    assert skip.data["reason"] == "branch not taken by sw"
    sw = next(e for e in events if e.kind == "node_finished" and e.data["component_id"] == "sw")
    assert sw.data["next"] == ["n1"] and sw.data["branch"] == "else"
    assert set(node_events(events, "node_started")) == {"begin", "sw", "n1", "agg", "msg"}
    assert finished(events)["outputs"]["content"] == "got x"
    # every started node finished exactly once: no orphan node_started (§7 item 2)
    assert sorted(node_events(events, "node_started")) == sorted(node_events(events, "node_finished"))


async def test_slow_branch_does_not_delay_the_other_branch():
    gate = asyncio.Event()

    class Gated:
        async def chat_stream(self, request):
            from services.orchestrator.core.ports import ChatChunk
            await gate.wait()
            yield ChatChunk("text", "slow")
            yield ChatChunk("finish")

    doc = dsl({"begin": {"type": "Begin", "down": ["slow", "fast"]},
               "slow": {"type": "LLM", "params": {"llm_id": "m"}, "down": ["end"]},
               "fast": noop(["fast2"]), "fast2": noop(["fast3"]), "fast3": noop(["end"]), "end": noop()})
    orch = make_orchestrator(llm=Gated())
    from services.orchestrator.core.run_request import RunRequest
    record = await orch.start_run(RunRequest(dsl=doc, query="q"))
    seen = []
    async for event in orch.stream_events(record.id):
        seen.append(event)
        if event.kind == "node_finished" and event.data["component_id"] == "fast3":
            assert "slow" not in node_events(seen, "node_finished")  # no window barrier (§7 item 4)
            gate.set()
    assert node_events(seen, "node_started")[-1] == "end"
    await orch.wait_idle()


async def test_concurrency_is_bounded():
    active = 0
    peak = 0
    full = asyncio.Event()

    class Counting:
        async def chat_stream(self, request):
            from services.orchestrator.core.ports import ChatChunk
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            if active == 3:
                full.set()
            # The first calls hold their slots until three run at once, so the cap is reached however
            # the machine schedules them; with fewer slots the wait times out and the run fails.
            await asyncio.wait_for(full.wait(), 30)
            active -= 1
            yield ChatChunk("text", "x")
            yield ChatChunk("finish")

    branches = {f"l{i}": {"type": "LLM", "params": {"llm_id": "m"}, "down": ["end"]} for i in range(10)}
    doc = dsl({"begin": {"type": "Begin", "down": list(branches)}, **branches, "end": noop()})
    _, events = await run_dsl(make_orchestrator(llm=Counting(), max_concurrency=3), doc, "q")
    assert peak == 3
    assert finished(events)["status"] == RunStatus.SUCCEEDED


async def test_event_order_is_deterministic_for_the_same_completion_order():
    doc = dsl({"begin": {"type": "Begin", "down": ["a", "b", "c"]}, "a": noop(["d"]), "b": noop(["d"]), "c": noop(["d"]), "d": noop()})
    runs = [kinds(ev) + node_events(ev, "node_started") for _, ev in [await run_dsl(make_orchestrator(), doc) for _ in range(3)]]
    assert runs[0] == runs[1] == runs[2]
    assert node_events((await run_dsl(make_orchestrator(), doc))[1], "node_started") == ["begin", "a", "b", "c", "d"]


@st.composite
def random_canvases(draw):
    n = draw(st.integers(min_value=1, max_value=12))
    components = {"begin": {"type": "Begin", "down": []}}
    ids = ["begin"]
    for i in range(n):
        node = f"n{i}"
        parents = draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3, unique=True))
        for p in parents:
            components[p]["down"].append(node)
        components[node] = noop()
        ids.append(node)
    # turn some nodes with >= 2 successors into exclusive Switch routers
    for cid in ids[1:]:
        down = components[cid]["down"]
        if len(down) == 2 and draw(st.booleans()):
            components[cid] = {**switch(down[0], down[1], needle=draw(st.sampled_from(["yes", "no"]))), "down": down}
    return components


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(random_canvases())
async def test_random_canvases_run_each_node_once_after_predecessors(components):
    _, events = await run_dsl(make_orchestrator(), dsl(components), "yes")
    assert finished(events)["status"] == RunStatus.SUCCEEDED
    started = node_events(events, "node_started")
    done = node_events(events, "node_finished")
    skipped = node_events(events, "node_skipped")
    assert len(started) == len(set(started)) and sorted(started) == sorted(done)
    assert set(done).isdisjoint(skipped) and set(done) | set(skipped) == set(components)
    finish_seq = {e.data["component_id"]: e.seq for e in events if e.kind == "node_finished"}
    start_seq = {e.data["component_id"]: e.seq for e in events if e.kind == "node_started"}
    for cid, spec in components.items():
        for d in spec["down"]:
            if d in start_seq and cid in finish_seq:
                assert finish_seq[cid] < start_seq[d]
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(events) + 1))


async def test_loops_are_bounded_and_counters_reported():
    doc = dsl({
        "begin": {"type": "Begin", "down": ["loop"]},
        "loop": {"type": "Loop", "down": ["msg"], "params": {
            "maximum_loop_count": 50,
            "loop_variables": [{"variable": "n", "type": "number", "input_mode": "constant", "value": 0}],
            "loop_termination_condition": [{"variable": "loop@n", "operator": "≥", "input_mode": "constant", "value": 3}]}},
        "li": {"type": "LoopItem", "parent": "loop", "down": ["inc"]},
        "inc": {"type": "VariableAssigner", "parent": "loop", "params": {"variables": [
            {"variable": "loop@n", "operator": "+=", "parameter": 1}]}},
        "msg": {"type": "Message", "params": {"content": ["n={loop@n}"]}},
    })
    _, events = await run_dsl(make_orchestrator(), doc)
    assert finished(events)["outputs"]["content"] == "n=3"
    assert node_events(events, "node_started").count("inc") == 3
    never_ending = dsl({
        "begin": {"type": "Begin", "down": ["loop"]},
        "loop": {"type": "Loop", "params": {"maximum_loop_count": 4}},
        "li": {"type": "LoopItem", "parent": "loop", "down": ["x"]},
        "x": noop(parent="loop"),
    })
    _, events = await run_dsl(make_orchestrator(), never_ending)
    assert node_events(events, "node_started").count("x") == 4
    assert next(e for e in events if e.kind == "node_finished" and e.data["component_id"] == "loop").data["outputs"]["loop_count"] == 4


