"""Registry, stable function names, schemas, config parsing and citations."""

from __future__ import annotations

import itertools
from pathlib import Path

import jsonschema
import pytest

from services.common.errors import InvalidArgumentError
from services.orchestrator.tools import (
    NamedEntry,
    ReferenceBucket,
    ToolRuntime,
    ToolsSettings,
    UnknownToolError,
    assign_function_names,
    default_registry,
    format_knowledge,
)
from services.orchestrator.tools.citations import web_chunks

# Spec §5.21 (plus Bing, which RAGFlow lacks).
EXPECTED_NAMES = {
    "Retrieval": "search_my_dateset",
    "CodeExec": "execute_code",
    "ExeSQL": "execute_sql",
    "TavilySearch": "tavily_search",
    "TavilyExtract": "tavily_extract",
    "Wikipedia": "wikipedia_search",
    "DuckDuckGo": "duckduckgo_search",
    "Google": "google_search",
    "Bing": "bing_search",
    "YahooFinance": "yahoo_finance",
}


def test_registry_has_every_tool_with_its_ragflow_function_name():
    registry = default_registry()
    assert registry.component_names() == sorted(EXPECTED_NAMES)
    for component, name in EXPECTED_NAMES.items():
        tool = registry.get(component)
        assert tool.component_name == component and tool.function_name == name
        spec = tool.function_spec()
        assert spec["type"] == "function" and spec["function"]["name"] == name and spec["function"]["description"]
        jsonschema.Draft202012Validator.check_schema(spec["function"]["parameters"])
        jsonschema.Draft202012Validator.check_schema(tool.params_schema)
        assert spec["function"]["parameters"]["type"] == "object"
        assert set(spec["function"]["parameters"]["required"]) <= set(spec["function"]["parameters"]["properties"])
    with pytest.raises(UnknownToolError) as err:
        registry.get("Jin10")
    assert isinstance(err.value, InvalidArgumentError) and err.value.tool == "Jin10"


def test_node_defaults_follow_ragflow():
    registry = default_registry()
    assert registry.get("TavilySearch").node_arguments({}) == {"query": "{sys.query}"}
    assert registry.get("ExeSQL").node_arguments({}) == {"sql": "{sys.query}"}
    assert registry.get("Retrieval").node_arguments({}) == {"query": ""}
    assert registry.get("TavilySearch").default_params()["max_results"] == 6
    assert registry.get("Retrieval").default_params()["top_n"] == 8
    custom = registry.get("Retrieval").function_spec({"description": "Search the manuals"})
    assert custom["function"]["description"] == "Search the manuals"


async def test_unknown_tool_class_is_a_validation_problem(tmp_path: Path):
    runtime = ToolRuntime(ToolsSettings.from_mapping({}, data_dir=tmp_path, env={}))
    try:
        problems = default_registry().validate("Bingo", {}, runtime.context())
        assert [(p.field, p.description) for p in problems] == [("component_name", "unknown tool class 'Bingo'")]
        assert default_registry().validate("Bing", {}, runtime.context()) == []
    finally:
        await runtime.aclose()


def test_names_are_stable_under_reordering():
    entries = [
        {"component_name": "TavilySearch", "name": "Tavily A", "params": {}},
        {"component_name": "TavilySearch", "name": "Tavily B", "params": {}},
        {"component_name": "Retrieval", "name": "Retrieval", "params": {}},
        {"component_name": "Retrieval", "name": "Manuals", "params": {"function_name": "search_manuals"}},
        {"component_name": "Agent", "name": "Web Search Specialist", "params": {}},
        {"component_name": "Wikipedia", "name": "Wiki", "params": {}},
    ]
    registry = default_registry()
    reference = {p.display_name: p.function_name for p in registry.plan_agent_tools(entries)}
    assert reference == {
        "Tavily A": "tavily_search_Tavily_A",
        "Tavily B": "tavily_search_Tavily_B",
        "Retrieval": "search_my_dateset",
        "Manuals": "search_manuals",
        "Web Search Specialist": "Web_Search_Specialist",
        "Wiki": "wikipedia_search",
    }
    for perm in itertools.permutations(entries):
        assert {p.display_name: p.function_name for p in registry.plan_agent_tools(list(perm))} == reference
    planned = registry.plan_agent_tools(entries)
    assert planned[4].kind == "agent" and planned[4].function_spec() is None
    assert planned[0].function_spec()["function"]["name"] == "tavily_search_Tavily_A"


def test_identical_display_names_fall_back_to_a_params_fingerprint():
    a = NamedEntry("tavily_search", "Search", {"max_results": 3})
    b = NamedEntry("tavily_search", "Search", {"max_results": 9})
    names = assign_function_names([a, b])
    assert names[0] != names[1] and all(n.startswith("tavily_search_Search_") for n in names)
    assert assign_function_names([b, a]) == names[::-1]
    long = assign_function_names([NamedEntry("x" * 80)])[0]
    assert len(long) == 64


def test_config_parsing_and_errors(tmp_path: Path):
    settings = ToolsSettings.from_mapping(
        {"tavily": {"api_key_env": "TV"}, "exesql": {"databases": {"main": {"url_env": "DB_URL"}}}, "mcp": {"servers": {"s": {"url": "http://x/mcp"}}}},
        data_dir=tmp_path,
        env={"TV": "secret-tv", "DB_URL": "sqlite:///a.db", "TAVILY_API_KEY": "ignored"},
    )
    assert settings.web_api("tavily").api_key == "secret-tv"
    assert "secret-tv" not in repr(settings.web_api("tavily"))
    assert settings.web_api("wikipedia").base_url == "https://{language}.wikipedia.org/w/api.php"
    assert settings.retrieval.backend == "embedded" and settings.retrieval.embedded.path == tmp_path / "kb.sqlite"
    assert settings.exesql.databases["main"].url == "sqlite:///a.db" and settings.exesql.allow_writes is False
    assert settings.mcp_servers["s"].transport == "http"
    for bad, field in [
        ({"retrieval": {"backend": "vector"}}, "tools.retrieval.backend"),
        ({"http": {"timeout_s": -1}}, "tools.http.timeout_s"),
        ({"bing": {"base_url": "ftp://x"}}, "tools.bing.base_url"),
        ({"mcp": {"servers": {"s": {}}}}, "tools.mcp.servers.s"),
        ({"exesql": {"databases": {"d": {}}}}, "tools.exesql.databases.d.url"),
        ({"retrieval": {"embedded": {"chunk_tokens": 32, "chunk_overlap": 32}}}, "tools.retrieval.embedded.chunk_overlap"),
    ]:
        with pytest.raises(InvalidArgumentError) as err:
            ToolsSettings.from_mapping(bad, data_dir=tmp_path, env={})
        assert err.value.violations[0].field == field


def test_reference_bucket_ids_are_unique_sequential_and_stable():
    bucket = ReferenceBucket()
    chunks = [{"id": f"c{i}", "content": f"text {i}", "document_id": f"d{i % 3}", "document_name": f"doc{i % 3}"} for i in range(60)]
    first = bucket.add(chunks[:40])
    assert [c["citation_id"] for c in first] == list(range(40))
    second = bucket.add(chunks[20:])
    assert [c["citation_id"] for c in second] == list(range(20, 60))
    snap = bucket.snapshot()
    assert len(snap["chunks"]) == 60 and len({c["citation_id"] for c in snap["chunks"]}) == 60
    assert {d["doc_name"]: d["count"] for d in snap["doc_aggs"]} == {"doc0": 20, "doc1": 20, "doc2": 20}
    assert bucket.chunk(59)["id"] == "c59"
    newer = bucket.snapshot(since=57)
    assert [c["citation_id"] for c in newer["chunks"]] == [57, 58, 59]
    assert sum(d["count"] for d in newer["doc_aggs"]) == 3
    block = format_knowledge(first[:2])
    assert block.startswith("ID: 0\n├── Title: doc0\n└── Content:\ntext 0\n\nID: 1")
    assert format_knowledge(first, max_chars=60).count("ID:") == 1


def test_web_chunks_strip_inline_images_and_cap_length():
    (chunk,) = web_chunks([{"title": "T", "url": "https://u", "content": "a ![img](data:image/png;base64,AAAA) b" + "x" * 20000}], source="s")
    assert "data:image" not in chunk["content"] and len(chunk["content"]) == 10_000
    again = web_chunks([{"title": "T", "url": "https://u", "content": "a ![img](data:image/png;base64,AAAA) b" + "x" * 20000}], source="s")
    assert again[0]["id"] == chunk["id"]
    other = web_chunks([{"title": "T", "url": "https://v", "content": "a b"}], source="s")
    assert other[0]["id"] != chunk["id"]
