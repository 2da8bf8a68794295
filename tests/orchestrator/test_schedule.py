"""The pure readiness logic (core/schedule.py), alone and over random DAGs."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.orchestrator.core.dsl.model import EXCEPTION, Edge
from services.orchestrator.core.schedule import Frontier, NodeState, ScheduleError


def test_all_of_join_waits_for_every_parallel_branch():
    f = Frontier(["s", "a", "b", "j"], [Edge("s", "a"), Edge("s", "b"), Edge("a", "j"), Edge("b", "j")], ["s"])
    assert f.take_ready() == ["s"]
    f.complete("s")
    assert f.take_ready() == ["a", "b"]
    assert f.complete("a").ready == []
    assert f.complete("b").ready == ["j"]


def test_any_of_join_after_an_exclusive_router_with_skips():
    edges = [Edge("r", "x"), Edge("r", "y"), Edge("x", "x2"), Edge("x2", "j"), Edge("y", "j")]
    f = Frontier(["r", "x", "x2", "y", "j"], edges, ["r"])
    f.take_ready()
    step = f.complete("r", taken=["y"])
    assert step.ready == ["y"]
    assert [s for s, _ in step.skipped] == ["x", "x2"]
    f.take_ready()
    assert f.complete("y").ready == ["j"]


def test_all_branches_not_taken_skips_the_join_and_beyond():
    f = Frontier(["r", "a", "j", "k"], [Edge("r", "a"), Edge("a", "j"), Edge("j", "k")], ["r"])
    f.take_ready()
    step = f.complete("r", taken=[])
    assert [s for s, _ in step.skipped] == ["a", "j", "k"]
    assert f.idle


def test_exception_edges_only_on_failure():
    edges = [Edge("n", "ok"), Edge("n", "bad", EXCEPTION)]
    f = Frontier(["n", "ok", "bad"], edges, ["n"])
    f.take_ready()
    step = f.complete("n", exception=True)
    assert step.ready == ["bad"] and [s for s, _ in step.skipped] == ["ok"]


def test_release_lets_a_consumer_start_before_the_producer_completes():
    f = Frontier(["p", "m", "other"], [Edge("p", "m"), Edge("p", "other")], ["p"])
    f.take_ready()
    assert f.release("p", ["m"]).ready == ["m"]
    assert f.take_ready() == ["m"]
    assert f.complete("p").ready == ["other"]  # the released edge is not sent twice


def test_no_node_is_scheduled_or_completed_twice():
    f = Frontier(["a", "b"], [Edge("a", "b")], ["a"])
    f.take_ready()
    f.complete("a")
    with pytest.raises(ScheduleError):
        f.complete("a")
    assert f.take_ready() == ["b"]
    assert f.take_ready() == []


@st.composite
def dags(draw):
    n = draw(st.integers(min_value=2, max_value=14))
    edges = []
    for target in range(1, n):
        sources = draw(st.lists(st.integers(min_value=0, max_value=target - 1), min_size=1, max_size=3, unique=True))
        edges += [Edge(f"n{s}", f"n{target}") for s in sources]
    routers = draw(st.sets(st.integers(min_value=0, max_value=n - 1), max_size=3))
    seed = draw(st.integers(min_value=0, max_value=10_000))
    return n, edges, routers, seed


@settings(max_examples=200, deadline=None)
@given(dags())
def test_random_dags_each_node_once_after_its_predecessors(case):
    n, edges, routers, seed = case
    rng = random.Random(seed)
    order = [f"n{i}" for i in range(n)]
    f = Frontier(order, edges, ["n0"])
    done: list[str] = []
    skipped: set[str] = set()
    taken_edges: set[tuple[str, str]] = set()
    running: list[str] = []
    while True:
        running += f.take_ready()
        if not running:
            break
        node = running.pop(rng.randrange(len(running)))
        outs = [e.target for e in edges if e.source == node]
        choice = None
        if int(node[1:]) in routers and outs:
            choice = [rng.choice(outs)]  # exclusive router: exactly one branch
        step = f.complete(node, choice)
        done.append(node)
        taken_edges |= {(node, t) for t in (choice if choice is not None else outs)}
        skipped |= {s for s, _ in step.skipped}
    assert len(done) == len(set(done))
    assert not (set(done) & skipped)
    assert set(done) | skipped == set(order)  # everything is decided: ran or skipped
    position = {node: i for i, node in enumerate(done)}
    for node in done:
        preds = [e.source for e in edges if e.target == node]
        # only after every predecessor finished or was skipped, and at least one edge was taken
        assert all(p in skipped or position[p] < position[node] for p in preds)
        assert node == "n0" or any((p, node) in taken_edges for p in preds)
    for node in skipped:
        assert f.state(node) is NodeState.SKIPPED
        assert not any((p, node) in taken_edges for p in [e.source for e in edges if e.target == node])
