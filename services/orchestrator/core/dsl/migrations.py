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


def _renamed(value: Any, table: dict[str, str]) -> Any:
    """`value` through a rename table; anything that is not text (a malformed id) as it is."""
    return table.get(value, value) if isinstance(value, str) else value


def normalize_chunker_dsl(dsl: Any) -> Any:
    """§1.5 A: component and id renames, applied everywhere ids can appear."""
    if not isinstance(dsl, dict) or not isinstance(dsl.get("components"), dict):
        return dsl
    if not any(
        isinstance(e, dict) and (_name_of(e) in COMPONENT_RENAMES or cid.split(":", 1)[0] in COMPONENT_RENAMES)
        for cid, e in dsl["components"].items()
    ):
        return dsl  # nothing to migrate (the common case): no copy
    dsl = copy.deepcopy(dsl)
    id_map: dict[str, str] = {}
    for cid, entry in dsl["components"].items():
        obj = entry.get("obj") if isinstance(entry, dict) and isinstance(entry.get("obj"), dict) else {}
        name = _name_of(entry)
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
                    entry[key] = [_renamed(x, id_map) for x in entry[key]]
            if "parent_id" in entry:
                entry["parent_id"] = _renamed(entry["parent_id"], id_map)
        components[id_map.get(cid, cid)] = entry
    dsl["components"] = components
    if isinstance(dsl.get("path"), list):
        dsl["path"] = [_renamed(x, id_map) for x in dsl["path"]]
    graph = dsl.get("graph")
    if isinstance(graph, dict):  # display data: entries of another shape are left as they are
        for node in graph["nodes"] if isinstance(graph.get("nodes"), list) else []:
            if not isinstance(node, dict):
                continue
            for key, table in (("id", id_map), ("parentId", id_map), ("type", NODE_TYPE_RENAMES)):
                if key in node:
                    node[key] = _renamed(node[key], table)
            data = node.get("data") if isinstance(node.get("data"), dict) else {}
            if "label" in data:
                data["label"] = _renamed(data["label"], COMPONENT_RENAMES)
            if "name" in data:
                data["name"] = _renamed(data["name"], COMPONENT_RENAMES)
            if "form" in data:
                data["form"] = _rewrite_strings(data["form"], id_map)
        olds = sorted(id_map, key=len, reverse=True)
        for edge in graph["edges"] if isinstance(graph.get("edges"), list) else []:
            if not isinstance(edge, dict):
                continue
            for key in ("source", "target"):
                if key in edge:
                    edge[key] = _renamed(edge[key], id_map)
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
        if isinstance(legacy_tools, list) and legacy_tools and not params.get("tools"):
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
        categories = params.get("category_description")
        for category in categories.values() if isinstance(categories, dict) else ():
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


# What a G0 Answer shows of the node before it: tools' formatted text, a model's content.
_SHOWN_OUTPUT = {"ExeSQL": "formalized_content", "Retrieval": "formalized_content", "TavilySearch": "formalized_content",
                 "TavilyExtract": "formalized_content", "Wikipedia": "formalized_content", "DuckDuckGo": "formalized_content",
                 "Google": "formalized_content", "Bing": "formalized_content", "YahooFinance": "report"}
AWAIT_SUFFIX = ":await"
MESSAGE_FIELD = "message"


def _downstream_ids(entry: Any) -> list[str]:
    raw = entry.get("downstream") if isinstance(entry, dict) else None
    if isinstance(raw, str):
        return [raw] if raw else []
    return [str(v) for v in raw if isinstance(v, (str, int)) and str(v)] if isinstance(raw, list) else []


def _name_of(entry: Any) -> str:
    obj = entry.get("obj") if isinstance(entry, dict) else None
    return str(obj.get("component_name") or "") if isinstance(obj, dict) else ""


def _reaches(components: dict[str, Any], start: list[str]) -> set[str]:
    """Nodes reachable from `start` (following downstream)."""
    seen: set[str] = set()
    pending = list(start)
    while pending:
        node = pending.pop()
        if node in seen or node not in components:
            continue
        seen.add(node)
        pending.extend(_downstream_ids(components[node]))
    return seen


def migrate_g0_conversations(components: dict[str, Any], notes: list[str]) -> None:
    """G0 Answers on a cycle, in place: Answer -> Message (shows what the cycle produced) followed by a
    UserFillUp `<id>:await` that waits for the user's next message, so the cycle passes through a
    node that waits and loads as a conversation loop (dsl/conversation.py). Edges that entered the
    Answer from outside the cycle (Begin) enter the waiting node: the first turn starts by waiting
    for (or taking) the user's message. G0 ExeSQL also gets RAGFlow's model repair of failing SQL."""
    g0 = any(_name_of(e) in G0_MAPPINGS for e in components.values())
    if not g0:
        return
    for entry in components.values():
        if _name_of(entry) == "ExeSQL":
            if not isinstance(entry["obj"].get("params"), dict):
                entry["obj"]["params"] = {}
            params = entry["obj"]["params"]
            params.setdefault("repair_with_llm", True)
            if "loop" in params and "repair_attempts" not in params:
                params["repair_attempts"] = params["loop"]
            if params.get("top_n") and not params.get("max_records"):
                params["max_records"] = params["top_n"]
    order = list(components)
    inserted: dict[str, tuple[str, dict[str, Any]]] = {}
    for cid in order:
        entry = components[cid]
        if _name_of(entry) != "Answer" or cid + AWAIT_SUFFIX in components:
            continue
        cycle = _reaches(components, _downstream_ids(entry))
        if cid not in cycle:
            continue  # a one-turn Answer: migrate_g0 makes it a Message
        sources = [s for s in components if cid in _downstream_ids(components[s])]
        for s in entry.get("upstream") or [] if isinstance(entry.get("upstream"), list) else []:
            if s in components and s not in sources and cid in _downstream_ids(components[s]):
                sources.append(s)
        in_cycle = [s for s in sources if s in cycle]
        outside = [s for s in sources if s not in cycle]
        wait_id = cid + AWAIT_SUFFIX
        prologue = next((str((components[s]["obj"].get("params") or {}).get("prologue") or "")
                         for s in outside if _name_of(components[s]) == "Begin"), "")
        shown = "".join("{%s@%s}" % (s, _SHOWN_OUTPUT.get(_name_of(components[s]), "content")) for s in in_cycle)
        entry["obj"]["component_name"] = "Message"
        params = entry["obj"].get("params") if isinstance(entry["obj"].get("params"), dict) else {}
        params["content"] = [shown or "{sys.query}"]
        entry["obj"]["params"] = params
        wait = {
            "obj": {"component_name": "UserFillUp", "params": {
                "enable_tips": True, "tips": prologue or "Please enter your next message.",
                "inputs": {MESSAGE_FIELD: {"name": MESSAGE_FIELD, "type": "paragraph", "optional": False}},
                "query_field": MESSAGE_FIELD}},
            "downstream": _downstream_ids(entry),
            "upstream": [cid, *outside],
        }
        for target in wait["downstream"]:
            up = components.get(target, {}).get("upstream") if isinstance(components.get(target), dict) else None
            if isinstance(up, list):
                components[target]["upstream"] = [wait_id if u == cid else u for u in up]
        for source in outside:
            components[source]["downstream"] = [wait_id if d == cid else d for d in _downstream_ids(components[source])]
        entry["downstream"] = [wait_id]
        entry["upstream"] = in_cycle
        inserted[cid] = (wait_id, wait)
        notes.append(f"{cid}: G0 Answer in a conversation loop migrated to Message + UserFillUp {wait_id}")
    if inserted:
        rebuilt: dict[str, Any] = {}
        for cid in order:
            rebuilt[cid] = components[cid]
            if cid in inserted:
                rebuilt[inserted[cid][0]] = inserted[cid][1]
        components.clear()
        components.update(rebuilt)
