"""DSL migrations: RAGFlow's chunker renames (spec §1.5 A), the G1 upgrades and the G0 mappings.

Every function is pure: it takes a deep copy and returns the migrated document plus notes describing
what changed (shown by ValidateCanvas) and problems it could not fix.
"""

from __future__ import annotations

import copy
import re
from typing import Any

COMPONENT_RENAMES = {"Splitter": "TokenChunker", "HierarchicalMerger": "TitleChunker", "PDFGenerator": "DocGenerator"}
NODE_TYPE_RENAMES = {"splitterNode": "chunkerNode"}
LEGACY_OPERATOR_NAMES = {"Splitter": "Token Chunker", "HierarchicalMerger": "Title Chunker", "PDFGenerator": "Doc Generator"}

_MIGRATION_REF = re.compile(r"(\{+\s*)([A-Za-z0-9:_-]+)(@[A-Za-z0-9_.-]+\s*\}+)")

# G0 components with a faithful mapping onto current ones.
G0_MAPPINGS = ("Answer", "Generate")
# G0 components without one; they are reported.
G0_UNMAPPED = frozenset({"Relevant", "RewriteQuestion", "KeywordExtract", "Baidu", "BaiduFanyi", "Concentrator", "Template"})


def _rewrite_strings(value: Any, id_map: dict[str, str]) -> Any:
    if isinstance(value, str):
        if value in id_map:
            return id_map[value]
        return _MIGRATION_REF.sub(lambda m: m.group(1) + id_map.get(m.group(2), m.group(2)) + m.group(3), value)
    if isinstance(value, list):
        return [_rewrite_strings(v, id_map) for v in value]
    if isinstance(value, dict):
        return {k: _rewrite_strings(v, id_map) for k, v in value.items()}
    return value


def normalize_chunker_dsl(dsl: Any) -> Any:
    """§1.5 A: component and id renames, applied everywhere ids can appear."""
    if not isinstance(dsl, dict) or not isinstance(dsl.get("components"), dict):
        return dsl
    if not any(
        isinstance(e, dict) and ((e.get("obj") or {}).get("component_name") in COMPONENT_RENAMES or cid.split(":", 1)[0] in COMPONENT_RENAMES)
        for cid, e in dsl["components"].items()
    ):
        return dsl  # nothing to migrate (the common case): no copy
    dsl = copy.deepcopy(dsl)
    id_map: dict[str, str] = {}
    for cid, entry in dsl["components"].items():
        obj = entry.get("obj", {}) if isinstance(entry, dict) else {}
        name = obj.get("component_name")
        if name in COMPONENT_RENAMES:
            obj["component_name"] = COMPONENT_RENAMES[name]
        for old, new in COMPONENT_RENAMES.items():
            if cid.startswith(old + ":"):
                id_map[cid] = new + cid[len(old):]
    components = {}
    for cid, entry in dsl["components"].items():
        entry = _rewrite_strings(entry, id_map) if isinstance(entry, dict) else entry
        if isinstance(entry, dict):
            for key in ("downstream", "upstream"):
                if isinstance(entry.get(key), list):
                    entry[key] = [id_map.get(x, x) for x in entry[key]]
            if entry.get("parent_id") in id_map:
                entry["parent_id"] = id_map[entry["parent_id"]]
        components[id_map.get(cid, cid)] = entry
    dsl["components"] = components
    if isinstance(dsl.get("path"), list):
        dsl["path"] = [id_map.get(x, x) for x in dsl["path"]]
    graph = dsl.get("graph")
    if isinstance(graph, dict):
        for node in graph.get("nodes", []) or []:
            node["id"] = id_map.get(node.get("id"), node.get("id"))
            if node.get("parentId") in id_map:
                node["parentId"] = id_map[node["parentId"]]
            node["type"] = NODE_TYPE_RENAMES.get(node.get("type"), node.get("type"))
            data = node.get("data") or {}
            label = data.get("label")
            if label in COMPONENT_RENAMES:
                data["label"] = COMPONENT_RENAMES[label]
            if data.get("name") in LEGACY_OPERATOR_NAMES.values() or data.get("name") in COMPONENT_RENAMES:
                data["name"] = COMPONENT_RENAMES.get(data["name"], data["name"])
            if "form" in data:
                data["form"] = _rewrite_strings(data["form"], id_map)
        olds = sorted(id_map, key=len, reverse=True)
        for edge in graph.get("edges", []) or []:
            edge["source"] = id_map.get(edge.get("source"), edge.get("source"))
            edge["target"] = id_map.get(edge.get("target"), edge.get("target"))
            if isinstance(edge.get("id"), str):
                for old in olds:
                    edge["id"] = edge["id"].replace(old, id_map[old])
    for key in ("history", "messages", "reference"):
        if key in dsl:
            dsl[key] = _rewrite_strings(dsl[key], id_map)
    return dsl


def upgrade_g1(params: dict[str, Any], component: str, notes: list[str], cid: str) -> None:
    """G1 parameter shapes → G2, in place."""
    if component in ("Agent", "LLM"):
        legacy_tools = params.pop("llm_enabled_tools", None)
        if legacy_tools and not params.get("tools"):
            params["tools"] = [
                {"component_name": t.get("component_name", ""), "name": t.get("component_name", ""), "params": t.get("params", {})}
                if isinstance(t, dict)
                else {"component_name": str(t), "name": str(t), "params": {}}
                for t in legacy_tools
            ]
            notes.append(f"{cid}: llm_enabled_tools upgraded to tools")
        legacy_schema = params.pop("output_structure", None)
        if legacy_schema:
            outputs = params.setdefault("outputs", {})
            if isinstance(outputs, dict) and not outputs.get("structured"):
                outputs["structured"] = legacy_schema if isinstance(legacy_schema, dict) else {"value": legacy_schema}
                notes.append(f"{cid}: output_structure upgraded to outputs.structured")
    if component == "Categorize":
        for category in (params.get("category_description") or {}).values():
            if not isinstance(category, dict):
                continue
            if isinstance(category.get("to"), str):
                category["to"] = [category["to"]] if category["to"] else []
            if isinstance(category.get("examples"), str):
                category["examples"] = [line for line in category["examples"].split("\n") if line.strip()]


def migrate_g0(cid: str, entry: dict[str, Any], components: dict[str, Any], notes: list[str]) -> bool:
    """Map one G0 component onto current ones in place; False when there is no mapping."""
    obj = entry["obj"]
    name = obj.get("component_name")
    params = obj.setdefault("params", {})
    if name == "Generate":
        obj["component_name"] = "LLM"
        prompt = params.pop("prompt", "")
        params.setdefault("sys_prompt", prompt)
        params.setdefault("prompts", [{"role": "user", "content": "{sys.query}"}])
        notes.append(f"{cid}: G0 Generate migrated to LLM")
        return True
    if name == "Answer":
        # Answer shows its upstream's answer to the user; in a one-turn run that is a Message.
        sources = [u for u in entry.get("upstream", []) if u in components]
        obj["component_name"] = "Message"
        params["content"] = ["".join("{%s@content}" % u for u in sources) or "{sys.query}"]
        notes.append(f"{cid}: G0 Answer migrated to Message")
        return True
    if name == "Message" and "messages" in params and not params.get("content"):
        params["content"] = list(params.pop("messages") or [])
        notes.append(f"{cid}: legacy Message.messages migrated to content")
        return True
    return False
