"""Loader, migrations and ValidateCanvas over RAGFlow's own templates and hand-made bad DSLs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.common.errors import FailedPreconditionError, InvalidArgumentError
from services.orchestrator.core.dsl.loader import load
from services.orchestrator.core.dsl.migrations import normalize_chunker_dsl
from services.orchestrator.core.dsl.validate import load_for_run, validate
from tests.orchestrator.support.harness import dsl

FIXTURES = Path(__file__).parents[1] / "fixtures" / "ragflow_dsl"
PIPELINES = {"advanced_ingestion_pipeline", "chunk_summary", "compiler", "title_chunker"}


def _fixture(kind: str, name: str):
    return json.loads((FIXTURES / kind / f"{name}.json").read_text())


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*/*.json")), ids=lambda p: p.stem)
def test_every_fixture_loads_or_is_refused_clearly(path):
    document = json.loads(path.read_text())
    if path.stem in PIPELINES:
        with pytest.raises(FailedPreconditionError, match="ingestion pipeline"):
            validate(document)
        return
    result = validate(document)
    assert result.canvas is not None
    codes = {p.code for p in result.problems}
    assert "UNKNOWN_COMPONENT" not in codes, result.problems  # Agent/Retrieval/... are known
    assert result.canvas.begin_id == "begin"
    assert result.canvas.dsl["path"] == []
    assert isinstance(result.canvas.dsl["retrieval"], list)


def test_g1_shapes_are_upgraded():
    result = load(_fixture("examples", "categorize_and_agent_with_tavily"))
    agent = result.canvas.nodes["agent:0"]
    assert agent.params["tools"] and "llm_enabled_tools" not in agent.params
    # Categorize branches only via `to`; they become edges
    assert {e.target for e in result.canvas.edges if e.source == "categorize:0"} == {"message:0", "agent:0"}


def test_missing_globals_variables_history_and_graph_are_tolerated():
    canvas = load(dsl({"begin": {"type": "Begin", "down": ["m"]}, "m": {"type": "Message", "params": {"content": ["{sys.query}"]}}})).canvas
    assert canvas.globals["sys.conversation_turns"] == 0 and canvas.globals["sys.history"] == []
    assert canvas.nodes["m"].name == ""
    assert canvas.dsl["variables"] == {} and canvas.dsl["history"] == []


def test_env_variables_get_typed_defaults():
    doc = dsl({"begin": {"type": "Begin"}}, variables={
        "n": {"name": "n", "type": "number"}, "flags": {"name": "flags", "type": "array<string>"},
        "o": {"name": "o", "type": "object"}, "s": {"name": "s", "type": "string", "value": "x"}})
    g = load(doc).canvas.globals
    assert (g["env.n"], g["env.flags"], g["env.o"], g["env.s"]) == (0, [], {}, "x")


def test_g0_components_are_migrated_or_reported():
    doc = dsl({
        "begin": {"type": "Begin", "down": ["generate:0"]},
        "generate:0": {"type": "Generate", "params": {"llm_id": "m", "prompt": "Be nice"}, "down": ["answer:0"]},
        "answer:0": {"type": "Answer", "down": ["kw:0"]},
        "kw:0": {"type": "KeywordExtract"},
    })
    result = validate(doc)
    assert result.canvas.nodes["generate:0"].type == "LLM"
    assert result.canvas.nodes["generate:0"].params["sys_prompt"] == "Be nice"
    assert result.canvas.nodes["answer:0"].type == "Message"
    assert [(p.component_id, p.code) for p in result.problems] == [("kw:0", "LEGACY_COMPONENT")]


def test_chunker_migration_renames_components_ids_and_references():
    doc = {"components": {"Splitter:a": {"obj": {"component_name": "Splitter", "params": {"x": "{Splitter:a@chunks}"}},
                                         "downstream": [], "upstream": []}},
           "graph": {"nodes": [{"id": "Splitter:a", "type": "splitterNode", "data": {"label": "Splitter", "name": "mine"}}],
                     "edges": [{"id": "e-Splitter:a", "source": "Splitter:a", "target": "x"}]}}
    out = normalize_chunker_dsl(doc)
    entry = out["components"]["TokenChunker:a"]
    assert entry["obj"]["component_name"] == "TokenChunker"
    assert entry["obj"]["params"]["x"] == "{TokenChunker:a@chunks}"
    assert out["graph"]["nodes"][0]["type"] == "chunkerNode" and out["graph"]["nodes"][0]["data"]["name"] == "mine"
    assert out["graph"]["edges"][0]["id"] == "e-TokenChunker:a"
    assert doc["components"].get("Splitter:a")  # pure: the input is untouched


def test_validate_reports_every_problem_per_node_in_one_pass():
    doc = dsl({
        "begin": {"type": "Begin", "down": ["a", "ghost"]},
        "a": {"type": "Frobnicate", "down": ["b"]},
        "b": {"type": "Switch", "params": {"conditions": []}, "down": ["c"]},
        "c": {"type": "Message", "params": {"content": ["{Missing:1@content}"]}, "down": ["b"]},
        "lonely": {"type": "Message", "params": {"content": ["x"]}},
    })
    problems = {(p.component_id, p.code) for p in validate(doc).problems}
    assert ("begin", "DANGLING_REFERENCE") in problems  # downstream 'ghost'
    assert ("a", "UNKNOWN_COMPONENT") in problems
    assert ("b", "BAD_PARAM") in problems
    assert ("c", "DANGLING_REFERENCE") in problems
    assert ("lonely", "UNREACHABLE") in problems
    assert any(code == "CYCLE" for _, code in problems)


def test_run_with_bad_dsl_raises_invalid_argument_naming_each_node():
    doc = dsl({"begin": {"type": "Begin", "down": ["m"]}, "m": {"type": "Message", "params": {}}, "x": {"type": "Nope"}})
    with pytest.raises(InvalidArgumentError) as info:
        load_for_run(doc)
    fields = {v.field for v in info.value.violations}
    assert "components.m.params.content" in fields
    assert "components.x.obj.component_name" in fields


def test_loops_inside_containers_are_not_cycles():
    doc = dsl({
        "begin": {"type": "Begin", "down": ["loop"]},
        "loop": {"type": "Loop", "params": {"maximum_loop_count": 2}},
        "li": {"type": "LoopItem", "parent": "loop", "down": ["body"]},
        "body": {"type": "StringTransform", "parent": "loop", "params": {"method": "merge", "script": "x"}, "down": ["li"]},
    })
    assert validate(doc).problems == []


def test_unsupported_but_known_components_are_failed_precondition_at_run():
    doc = dsl({"begin": {"type": "Begin", "down": ["r"]}, "r": {"type": "Browser", "params": {"prompts": "{sys.query}"}}})
    with pytest.raises(FailedPreconditionError):
        load_for_run(doc)
