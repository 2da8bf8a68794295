"""Load a RAGFlow DSL (template wrapper or bare) into a normalised CanvasSpec (spec §1, §6).

Problems found while loading are collected, never raised one by one, so ValidateCanvas can report
every one of them. Only an ingestion pipeline is refused outright (FailedPreconditionError).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from services.common.errors import FailedPreconditionError
from services.orchestrator.core.components import registry
from services.orchestrator.core.dsl.conversation import CONVERSATION, fold
from services.orchestrator.core.dsl.migrations import (G0_UNMAPPED, migrate_g0, migrate_g0_conversations,
                                                       normalize_chunker_dsl, upgrade_g1)
from services.orchestrator.core.values import plain_copy
from services.orchestrator.core.dsl.model import CONTAINERS, EXCEPTION, NORMAL, ROUTERS, CanvasSpec, Edge, NodeSpec

SYS_DEFAULTS: dict[str, Any] = {
    "sys.query": "",
    "sys.user_id": "",
    "sys.conversation_turns": 0,
    "sys.files": [],
    "sys.history": [],
    "sys.date": "",
}
PIPELINE_TYPES = ("ingestion pipeline", "dataflow")
_ITEM_TYPES = frozenset(t for t in CONTAINERS.values() if t)
RESERVED_TYPES = frozenset({CONVERSATION})  # made by the loader only (dsl/conversation.py)


@dataclass
class CanvasProblem:
    component_id: str
    field: str
    code: str
    message: str


@dataclass
class LoadResult:
    canvas: CanvasSpec | None
    problems: list[CanvasProblem] = field(default_factory=list)


def env_default(definition: Any) -> Any:
    """Typed default of an env variable (spec §3.7)."""
    if not isinstance(definition, dict):
        return ""
    if definition.get("value") is not None:
        return definition["value"]
    kind = str(definition.get("type", "string")).lower()
    if kind == "number":
        return 0
    if kind == "boolean":
        return False
    if kind == "object":
        return {}
    if kind.startswith("array"):
        return []
    return ""


def unwrap(document: Any) -> tuple[dict[str, Any], str]:
    """(dsl, canvas_type) from a template wrapper or a bare DSL."""
    if isinstance(document, dict) and isinstance(document.get("dsl"), dict) and "components" not in document:
        return document["dsl"], str(document.get("canvas_type") or "")
    return document, ""


def _ids(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list):
        return [str(v) for v in value if isinstance(v, (str, int)) and str(v)]
    return []


def _normalise_params(component: str, params: dict[str, Any]) -> None:
    if component in ("LLM", "Agent", "Categorize") and isinstance(params.get("prompts"), str):
        params["prompts"] = [{"role": "user", "content": params["prompts"]}]  # §1.5 B3
    if component == "Retrieval" and not params.get("dataset_ids") and params.get("kb_ids"):
        kb_ids = params["kb_ids"]  # §1.5 B4
        params["dataset_ids"] = list(kb_ids) if isinstance(kb_ids, list) else [kb_ids]
    if component == "CodeExec":
        params["lang"] = {"python3": "python", "javascript": "nodejs"}.get(params.get("lang"), params.get("lang"))


def _router_targets(node: NodeSpec) -> list[str]:
    if node.type == "Switch":
        conditions = node.params.get("conditions")
        targets = [t for cond in conditions if isinstance(cond, dict) for t in _ids(cond.get("to"))] \
            if isinstance(conditions, list) else []
        return targets + _ids(node.params.get("end_cpn_ids"))
    if node.type == "Categorize":
        categories = node.params.get("category_description")
        return [t for c in categories.values() if isinstance(c, dict) for t in _ids(c.get("to"))] \
            if isinstance(categories, dict) else []
    return []


def load(document: Any) -> LoadResult:
    problems: list[CanvasProblem] = []
    dsl, canvas_type = unwrap(document)
    if not isinstance(dsl, dict) or not isinstance(dsl.get("components"), dict) or not dsl["components"]:
        return LoadResult(None, [CanvasProblem("", "components", "BAD_DSL", "the DSL needs a non-empty 'components' object")])
    names = {
        e["obj"].get("component_name")
        for e in dsl["components"].values()
        if isinstance(e, dict) and isinstance(e.get("obj"), dict) and isinstance(e["obj"].get("component_name"), str)
    }
    if canvas_type.lower() in PIPELINE_TYPES or names & registry.PIPELINE_COMPONENTS:
        raise FailedPreconditionError(
            "this is an ingestion pipeline (dataflow) canvas; it runs on the ingestion runner, not the agent orchestrator",
            reason="INGESTION_PIPELINE",
        )
    dsl = plain_copy(dsl)
    # Entries get the shape every migration relies on first (obj.component_name text, params an
    # object, edge lists of ids): a malformed entry is a problem of its own, never a load crash.
    for cid, entry in list(dsl["components"].items()):
        if not isinstance(entry, dict) or not isinstance(entry.get("obj"), dict) or not isinstance(entry["obj"].get("component_name"), str):
            problems.append(CanvasProblem(cid, "obj.component_name", "BAD_DSL", "a component entry needs obj.component_name"))
            del dsl["components"][cid]
            continue
        if not isinstance(entry["obj"].get("params"), dict):
            entry["obj"]["params"] = {}
        for key in ("downstream", "upstream"):
            entry[key] = list(dict.fromkeys(_ids(entry.get(key))))
    dsl = normalize_chunker_dsl(dsl)
    notes: list[str] = []
    components: dict[str, Any] = dsl["components"]
    migrate_g0_conversations(components, notes)
    for cid, entry in list(components.items()):
        obj = entry["obj"]
        migrate_g0(cid, entry, components, notes)
        name = obj["component_name"]
        if name in RESERVED_TYPES:
            problems.append(CanvasProblem(cid, "obj.component_name", "BAD_DSL",
                                          f"{name} is made by the loader for conversation loops; it cannot be written in a DSL"))
            del components[cid]
            continue
        if name in G0_UNMAPPED:
            problems.append(CanvasProblem(cid, "obj.component_name", "LEGACY_COMPONENT",
                                          f"legacy (G0) component {name} has no current equivalent"))
        upgrade_g1(obj["params"], name, notes, cid)
        _normalise_params(name, obj["params"])
        for key in ("downstream", "upstream"):
            entry[key] = list(dict.fromkeys(_ids(entry.get(key))))
    # Top-level keys (§1.5 B1, B2; §1.5 C retrieval object; fix: every sys.* key is back-filled).
    globals_ = dsl.get("globals") if isinstance(dsl.get("globals"), dict) else {}
    for key, default in SYS_DEFAULTS.items():
        globals_.setdefault(key, copy.deepcopy(default))
    variables = dsl.get("variables") if isinstance(dsl.get("variables"), dict) else {}
    for name, definition in variables.items():
        globals_.setdefault(f"env.{name}", env_default(definition))
    for key in [k for k in globals_ if k.startswith("env.")]:
        if globals_[key] is None:
            globals_[key] = env_default(variables.get(key[4:], {}))
    dsl["globals"], dsl["variables"] = globals_, variables
    dsl["history"] = dsl["history"] if isinstance(dsl.get("history"), list) else []
    dsl["retrieval"] = dsl["retrieval"] if isinstance(dsl.get("retrieval"), list) else []
    dsl["path"] = []  # runtime state lives in the run journal, never in the DSL (§7 item 6)
    display = {}
    graph = dsl.get("graph")
    if isinstance(graph, dict) and isinstance(graph.get("nodes"), list):  # display names only
        for gnode in graph["nodes"]:
            if isinstance(gnode, dict) and isinstance(gnode.get("id"), str) and isinstance(gnode.get("data"), dict):
                display[gnode["id"]] = str(gnode["data"].get("name") or "")
    nodes = {
        cid: NodeSpec(
            id=cid,
            type=entry["obj"]["component_name"],
            params=entry["obj"]["params"],
            downstream=entry["downstream"],
            upstream=entry["upstream"],
            parent_id=str(entry.get("parent_id") or ""),
            name=display.get(cid, ""),
        )
        for cid, entry in components.items()
    }
    canvas = CanvasSpec(nodes=nodes, edges=[], globals=globals_, variables=variables, dsl=dsl, notes=notes)
    canvas.edges = _edges(canvas, problems)
    begins = [n.id for n in nodes.values() if n.type == "Begin"]
    if not begins:
        problems.append(CanvasProblem("", "components", "NO_BEGIN", "the canvas has no Begin component"))
    elif len(begins) > 1:
        problems.append(CanvasProblem(begins[1], "obj.component_name", "MULTIPLE_BEGIN", "a canvas has exactly one Begin"))
    canvas.begin_id = begins[0] if begins else ""
    for node in nodes.values():
        if node.parent_id and node.parent_id not in nodes:
            problems.append(CanvasProblem(node.id, "parent_id", "DANGLING_REFERENCE", f"parent '{node.parent_id}' does not exist"))
            node.parent_id = ""
    fold(canvas, problems)  # cycles through a node that waits for the user are conversation loops
    return LoadResult(canvas, problems)


def _edges(canvas: CanvasSpec, problems: list[CanvasProblem]) -> list[Edge]:
    edges: list[Edge] = []
    seen: set[tuple[str, str]] = set()
    nodes = canvas.nodes

    def add(source: str, target: str, kind: str, where: str) -> None:
        if target not in nodes:
            problems.append(CanvasProblem(source, where, "DANGLING_REFERENCE", f"'{target}' is not a component of this canvas"))
            return
        src = nodes[source]
        # Loop-back edges from a body to its own container's start are implicit in our container model.
        if src.parent_id and (target == src.parent_id or (nodes[target].parent_id == src.parent_id and nodes[target].type in _ITEM_TYPES)):
            return
        if (source, target) in seen:
            return
        seen.add((source, target))
        edges.append(Edge(source, target, kind))

    for node in nodes.values():
        for i, target in enumerate(node.downstream):
            add(node.id, target, NORMAL, f"downstream[{i}]")
        if node.type in ROUTERS:
            for target in _router_targets(node):
                add(node.id, target, NORMAL, "params")
        method = node.params.get("exception_method")
        if method == "goto":
            for i, target in enumerate(_ids(node.params.get("exception_goto"))):
                if (node.id, target) in seen:
                    problems.append(CanvasProblem(node.id, f"params.exception_goto[{i}]", "BAD_PARAM",
                                                  f"'{target}' is both a normal and an exception target"))
                    continue
                add(node.id, target, EXCEPTION, f"params.exception_goto[{i}]")
    return edges
