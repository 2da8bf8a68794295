"""Every tool the RAGFlow corpus (tests/fixtures/ragflow_dsl) uses is known, validates, gets a stable
name, and runs against the local API servers with schema-generic arguments (as a scripted model
would send them) or with its node defaults."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


from services.orchestrator.tools import ReferenceBucket, ToolRuntime, default_registry
from tests.orchestrator_tools.conftest import make_settings
from tests.support.web_apis import WebApis

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ragflow_dsl"
NOT_RUN_HERE = {"CodeExec", "ExeSQL"}  # covered by their own suites (sandbox servicer, real databases)


def _agents(node: Any) -> Iterator[dict[str, Any]]:
    """Agent params objects, including sub-agents nested in tool lists."""
    if isinstance(node, dict):
        if node.get("component_name") == "Agent" and isinstance(node.get("params"), dict):
            yield node["params"]
        for value in node.values():
            yield from _agents(value)
    elif isinstance(node, list):
        for value in node:
            yield from _agents(value)


def _tool_nodes(dsl: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    components = (dsl.get("dsl") or dsl).get("components") or {}
    for component in components.values():
        obj = component.get("obj") or {}
        if obj.get("component_name") in default_registry():
            yield obj["component_name"], obj.get("params") or {}


def _generic_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for name in schema.get("required", []):
        spec = schema["properties"][name]
        if "enum" in spec:
            args[name] = spec["enum"][0]
        elif spec.get("type") == "integer":
            args[name] = 1
        elif spec.get("type") == "array":
            args[name] = []
        elif name == "urls":
            args[name] = "https://example.com/article"
        elif name == "stock_code":
            args[name] = "AAPL"
        else:
            args[name] = "renewable energy"
    return args


def _corpus() -> list[tuple[str, dict[str, Any]]]:
    return [(path.name, json.loads(path.read_text())) for path in sorted(FIXTURES.rglob("*.json"))]


def test_corpus_is_present():
    names = [name for name, _ in _corpus()]
    assert "web_search_assistant.json" in names and "deep_research.json" in names


async def test_every_corpus_tool_is_known_named_and_runs(web_apis: WebApis, tmp_path: Path):
    registry = default_registry()
    runtime = ToolRuntime(make_settings(web_apis.tools_config(), tmp_path))
    runtime.kb.add_text("energy.md", "Renewable energy comes from wind, sun and water. Solar panels turn light into power.")
    seen: set[str] = set()
    try:
        for file_name, dsl in _corpus():
            for agent in _agents(dsl):
                entries = agent.get("tools") or []
                for entry in entries:
                    if entry.get("component_name") != "Agent":
                        problems = registry.validate(entry["component_name"], entry.get("params"), runtime.context())
                        assert problems == [], (file_name, entry["component_name"], problems)
                planned = registry.plan_agent_tools(entries)
                names = [p.function_name for p in planned]
                assert len(names) == len(set(names)), (file_name, names)
                assert [p.function_name for p in registry.plan_agent_tools(list(reversed(entries)))] == names[::-1]
                for plan in planned:
                    if plan.kind != "tool" or plan.component_name in NOT_RUN_HERE:
                        continue
                    seen.add(plan.component_name)
                    spec = plan.function_spec()
                    bucket = ReferenceBucket()
                    result = await plan.tool.invoke(
                        _generic_arguments(spec["function"]["parameters"]), params=plan.params, context=runtime.context(references=bucket)
                    )
                    assert result.ok, (file_name, plan.component_name, result.error)
                    assert result.content
            for component, params in _tool_nodes(dsl):
                seen.add(component)
                assert registry.validate(component, params, runtime.context()) == [], (file_name, component)
                if component in NOT_RUN_HERE:
                    continue
                tool = registry.get(component)
                args = {k: ("renewable energy" if v in ("{sys.query}", "sys.query", "") else v) for k, v in tool.node_arguments(params).items()}
                args = args or {"query": "renewable energy"}
                result = await tool.invoke(args, params=params, context=runtime.context())
                assert result.ok, (file_name, component, result.error)
    finally:
        await runtime.aclose()
    assert {"TavilySearch", "TavilyExtract", "Google", "Bing", "DuckDuckGo", "Wikipedia", "Retrieval", "ExeSQL"} <= seen
