"""ValidateCanvas: every problem, per node, in one pass (spec §7 item 25)."""

from __future__ import annotations

from typing import Any

from services.common.errors import FailedPreconditionError, FieldViolation, InvalidArgumentError, with_article
from services.orchestrator.core.components import registry
from services.orchestrator.core.components.base import common_problems
from services.orchestrator.core.dsl.loader import CanvasProblem, LoadResult, load, unwrap
from services.orchestrator.core.dsl.model import CONTAINERS, CanvasSpec
from services.orchestrator.core.refs import ALIASES, NOT_TEMPLATES, find_refs, whole_ref

_RUNTIME_GLOBALS = ("sys.chat_template_kwargs",)


def validate(document: Any, tool_context: Any = None) -> LoadResult:
    """Every problem of a DSL. `tool_context` (a tools ToolContext) adds the tools' own param checks."""
    result = load(document)
    if result.canvas is None:
        return result
    canvas = result.canvas
    problems = result.problems
    lowered = {n.lower(): n for n in canvas.nodes}
    outputs = _output_names(canvas)
    for node in canvas.nodes.values():
        cls = registry.get(node.type)
        if cls is None:
            if node.type not in registry.KNOWN_UNIMPLEMENTED and not any(p.component_id == node.id and p.code == "LEGACY_COMPONENT" for p in problems):
                problems.append(CanvasProblem(node.id, "obj.component_name", "UNKNOWN_COMPONENT", f"unknown component '{node.type}'"))
            elif node.type in registry.KNOWN_UNIMPLEMENTED:
                problems.append(CanvasProblem(node.id, "obj.component_name", "UNSUPPORTED",
                                              f"component {node.type} is recognised but not supported by this orchestrator yet"))
        else:
            for field, message in [*common_problems(node.params), *cls.check(node.params)]:
                problems.append(CanvasProblem(node.id, f"params.{field}", "BAD_PARAM", message))
            for field, message in cls.unsupported(node.params):
                problems.append(CanvasProblem(node.id, f"params.{field}", "UNSUPPORTED", message))
            if getattr(cls, "is_tool", False):
                from services.orchestrator.tools import default_registry

                if tool_context is not None:
                    for problem in default_registry().validate(node.type, node.params, tool_context):
                        problems.append(CanvasProblem(node.id, f"params.{problem.field}", "BAD_PARAM", problem.description))
                for problem in default_registry().unsupported(node.type, node.params, tool_context):
                    problems.append(CanvasProblem(node.id, f"params.{problem.field}", "UNSUPPORTED", problem.description))
            if node.type == "Agent":
                if tool_context is not None:
                    for field, message in _agent_tool_problems(node.params, tool_context):
                        problems.append(CanvasProblem(node.id, f"params.{field}", "BAD_PARAM", message))
                for field, message in _agent_tool_unsupported(node.params, tool_context):
                    problems.append(CanvasProblem(node.id, f"params.{field}", "UNSUPPORTED", message))
        if node.type in CONTAINERS and not canvas.start_child(node.id):
            problems.append(CanvasProblem(node.id, "components", "BAD_CONTAINER", f"{node.type} has no {CONTAINERS[node.type]} child"))
        _check_refs(canvas, node.id, problems, lowered, outputs)
    _check_scopes(canvas, problems)
    _check_reachability(canvas, problems)
    _check_cycles(canvas, problems)
    _in_dsl_order(problems, document)
    return result


def _in_dsl_order(problems: list[CanvasProblem], document: Any) -> None:
    """Canvas-level problems first, then each component's in the order the DSL lists the components
    (a stable sort: one component's problems keep the order they were found in). Components the
    loader made (conversation loops) come last."""
    dsl, _ = unwrap(document)
    components = dsl.get("components") if isinstance(dsl, dict) else None
    position = {cid: index for index, cid in enumerate(components if isinstance(components, dict) else ())}
    problems.sort(key=lambda p: -1 if not p.component_id else position.get(p.component_id, len(position)))


def _agent_tool_problems(params: dict[str, Any], tool_context: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Each tool entry's own param checks, and MCP servers that are not configured (sub-agents too).
    Unknown tool classes are reported by Agent.check. A server that is configured but does not
    answer fails the node at run time (retryable), not the load."""
    from services.orchestrator.tools import default_registry

    registry = default_registry()
    problems: list[tuple[str, str]] = []
    for i, entry in enumerate(params.get("tools") or [] if isinstance(params.get("tools"), list) else []):
        if not isinstance(entry, dict):
            continue
        component = str(entry.get("component_name") or "")
        sub_params = entry.get("params") if isinstance(entry.get("params"), dict) else {}
        if component == "Agent":
            problems.extend(_agent_tool_problems(sub_params, tool_context, f"{prefix}tools[{i}].params."))
        elif component in registry:
            problems.extend((f"{prefix}tools[{i}].params.{p.field}", p.description)
                            for p in registry.validate(component, sub_params, tool_context))
    servers = tool_context.settings.mcp_servers
    for i, entry in enumerate(params.get("mcp") or [] if isinstance(params.get("mcp"), list) else []):
        server_id = str((entry or {}).get("mcp_id") or "") if isinstance(entry, dict) else ""
        if server_id not in servers:
            problems.append((f"{prefix}mcp[{i}].mcp_id",
                             f"MCP server '{server_id}' is not configured (tools.mcp.servers)"))
    return problems


def _agent_tool_unsupported(params: dict[str, Any], tool_context: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Params of an Agent's tool entries (sub-agents' too) set to something the tool cannot do."""
    from services.orchestrator.tools import default_registry

    registry = default_registry()
    problems: list[tuple[str, str]] = []
    for i, entry in enumerate(params.get("tools") if isinstance(params.get("tools"), list) else []):
        if not isinstance(entry, dict):
            continue
        sub_params = entry.get("params") if isinstance(entry.get("params"), dict) else {}
        if entry.get("component_name") == "Agent":
            problems.extend(_agent_tool_unsupported(sub_params, tool_context, f"{prefix}tools[{i}].params."))
        else:
            problems.extend((f"{prefix}tools[{i}].params.{p.field}", p.description)
                            for p in registry.unsupported(str(entry.get("component_name") or ""), sub_params, tool_context))
    return problems


async def check_mcp_servers(result: LoadResult, tool_context: Any) -> None:
    """ValidateCanvas only: Agents' configured MCP servers that do not answer `tools/list` within
    `tools.mcp.connect_timeout_s` become per-node problems (RunCanvas does not wait for this; the
    node fails, retryably, when it runs)."""
    if result.canvas is None or tool_context is None:
        return
    servers = tool_context.settings.mcp_servers
    for node in result.canvas.nodes.values():
        entries = node.params.get("mcp") if node.type == "Agent" else None
        for index, entry in enumerate(entries if isinstance(entries, list) else []):
            server_id = str((entry or {}).get("mcp_id") or "") if isinstance(entry, dict) else ""
            if server_id not in servers:
                continue  # reported by validate()
            problem = await tool_context.runtime.mcp.check(server_id)
            if problem is not None:
                param = problem.as_param_problem(index)
                result.problems.append(CanvasProblem(node.id, f"params.{param.field}", "BAD_PARAM", param.description))


def _output_names(canvas: CanvasSpec) -> dict[str, set[str] | None]:
    """Per component, the output names a reference may read (None: any). A VariableAssigner's
    targets count as outputs of the components they write to."""
    names: dict[str, set[str] | None] = {}
    for node in canvas.nodes.values():
        cls = registry.get(node.type)
        names[node.id] = cls.output_names(node.params) if cls is not None else None
    lowered = {n.lower(): n for n in canvas.nodes}
    for node in canvas.nodes.values():
        variables = node.params.get("variables") if node.type == "VariableAssigner" else None
        for item in variables if isinstance(variables, list) else []:
            target = whole_ref(str(item.get("variable") or "")) if isinstance(item, dict) else None
            owner = lowered.get(target.root.lower()) if target is not None and target.path else None
            if owner is not None and names.get(owner) is not None:
                names[owner].add(target.path[0])
    return names


def _output_problem(canvas: CanvasSpec, target_id: str, ref, outputs: dict[str, set[str] | None]) -> str | None:
    """Why `ref` (to component `target_id`) names an output that component never produces, or None."""
    allowed = outputs.get(target_id)
    if allowed is None or not ref.path or ref.path[0].startswith("_"):
        return None
    target = canvas.nodes[target_id]
    name = ref.path[0]
    if name not in allowed:
        listed = ", ".join(sorted(n for n in allowed if not n.startswith("_"))) or "none"
        return f"'{ref.expr}' reads output '{name}', which {target_id} ({target.type}) does not produce (its outputs: {listed})"
    cls = registry.get(target.type)
    fields = cls.output_fields(target.params, name) if cls is not None and len(ref.path) > 1 else None
    if fields is not None and ref.path[1] not in fields:
        return (f"'{ref.expr}' reads '{ref.path[1]}' of {target_id}'s {name} output, which its schema does not define "
                f"(its properties: {', '.join(sorted(fields))})")
    return None


def _check_refs(canvas: CanvasSpec, node_id: str, problems: list[CanvasProblem], lowered: dict[str, str],
                outputs: dict[str, set[str] | None]) -> None:
    node = canvas.nodes[node_id]
    in_iteration = bool(node.parent_id) and canvas.nodes[node.parent_id].type == "Iteration"
    for key, value in node.params.items():
        if key in NOT_TEMPLATES or (key in ("outputs", "inputs") and node.type != "Iteration"):
            continue
        for ref in find_refs(value):
            if ref.root in ALIASES:
                if not in_iteration:
                    continue  # literal text outside an Iteration body
            elif ref.root == "env":
                if ".".join((ref.root, *ref.path[:1])) not in canvas.globals:
                    problems.append(CanvasProblem(node_id, f"params.{key}", "DANGLING_REFERENCE", f"unknown variable '{ref.expr}'"))
            elif ref.root == "sys":
                if not _known_sys(canvas, ref.path):
                    problems.append(CanvasProblem(node_id, f"params.{key}", "DANGLING_REFERENCE",
                                                  f"unknown system variable '{ref.expr}' (known: "
                                                  + ", ".join(sorted(_sys_names(canvas))) + ")"))
            elif ref.root not in canvas.nodes and ref.root.lower() not in lowered:
                problems.append(CanvasProblem(node_id, f"params.{key}", "DANGLING_REFERENCE",
                                              f"'{ref.expr}' references unknown component '{ref.root}'"))
            else:
                message = _output_problem(canvas, ref.root if ref.root in canvas.nodes else lowered[ref.root.lower()],
                                          ref, outputs)
                if message is not None:
                    problems.append(CanvasProblem(node_id, f"params.{key}", "DANGLING_REFERENCE", message))


def _sys_names(canvas: CanvasSpec) -> set[str]:
    """sys.* globals a reference may name: the spec's (back-filled by the loader, so in every canvas's
    globals), the runtime-only ones, and any sys.* key the DSL's own globals declare."""
    return {k for k in canvas.globals if k.startswith("sys.")} | set(_RUNTIME_GLOBALS)


def _known_sys(canvas: CanvasSpec, path: tuple[str, ...]) -> bool:
    # The resolver takes the longest dotted prefix that is a key ("sys.files" + "0"), so does this.
    names = _sys_names(canvas)
    return any(".".join(("sys", *path[:i])) in names for i in range(1, len(path) + 1))


def _check_scopes(canvas: CanvasSpec, problems: list[CanvasProblem]) -> None:
    """Each component runs in the scope of its parent container (or the top level), and the runner follows
    only edges within a scope: a parent that is no container, a parent chain that comes back to the node,
    or an edge between scopes would leave components that silently never run. A Conversation (the
    loader's, for conversation loops) is entered from outside at its waiting node, and a container may
    name its own children."""
    nodes = canvas.nodes
    for node in nodes.values():
        parent = nodes.get(node.parent_id)
        if parent is not None and parent.type not in CONTAINERS:
            problems.append(CanvasProblem(node.id, "parent_id", "BAD_CONTAINER",
                                          f"parent '{parent.id}' is {with_article(parent.type)}, not a container (Iteration or Loop)"))
            continue
        seen = {node.id}
        while parent is not None and parent.id not in seen:
            seen.add(parent.id)
            parent = nodes.get(parent.parent_id)
        if parent is not None:
            problems.append(CanvasProblem(node.id, "parent_id", "BAD_CONTAINER", "its chain of parent_ids goes round in a ring"))
    for edge in canvas.edges:
        source, target = nodes[edge.source], nodes[edge.target]
        if source.parent_id == target.parent_id or target.parent_id == source.id:
            continue
        if "Conversation" in (getattr(nodes.get(source.parent_id), "type", ""), getattr(nodes.get(target.parent_id), "type", "")):
            continue
        where = {node.id: f"inside '{node.parent_id}'" if node.parent_id else "at the top level" for node in (source, target)}
        problems.append(CanvasProblem(source.id, "downstream", "BAD_DSL",
                                      f"the edge to '{target.id}' crosses a container boundary ({where[source.id]} → "
                                      f"{where[target.id]}); edges join components of the same container"))


def _check_reachability(canvas: CanvasSpec, problems: list[CanvasProblem]) -> None:
    if not canvas.begin_id:
        return
    successors: dict[str, list[str]] = {}
    for edge in canvas.edges:
        successors.setdefault(edge.source, []).append(edge.target)
    reached: set[str] = set()
    pending = [canvas.begin_id]
    while pending:
        current = pending.pop()
        if current in reached:
            continue
        reached.add(current)
        pending.extend(successors.get(current, ()))
        if canvas.nodes[current].type in CONTAINERS:
            start = canvas.start_child(current)
            if start:
                pending.append(start)
            # a conversation's turns may start at any of its waiting nodes (dsl/conversation.py)
            if canvas.nodes[current].type == "Conversation":
                pending.extend(str(w) for w in canvas.nodes[current].params.get("waiting") or [] if w in canvas.nodes)
    for node in canvas.nodes.values():
        if node.id not in reached:
            problems.append(CanvasProblem(node.id, "upstream", "UNREACHABLE", "no path from Begin reaches this component"))


def _check_cycles(canvas: CanvasSpec, problems: list[CanvasProblem]) -> None:
    scopes = {""} | {n.id for n in canvas.nodes.values() if n.type in CONTAINERS}
    for scope in scopes:
        adjacency: dict[str, list[str]] = {n: [] for n in canvas.scope_nodes(scope)}
        for edge in canvas.scope_edges(scope):
            adjacency[edge.source].append(edge.target)
        colour: dict[str, int] = {}
        for start in adjacency:
            if colour.get(start):
                continue
            stack = [(start, iter(adjacency[start]))]
            colour[start] = 1
            trail = [start]
            while stack:
                node, children = stack[-1]
                child = next(children, None)
                if child is None:
                    colour[node] = 2
                    stack.pop()
                    trail.pop()
                elif colour.get(child) == 1:
                    cycle = trail[trail.index(child):]
                    problems.append(CanvasProblem(child, "downstream", "CYCLE",
                                                  "cycle outside a loop container: " + " -> ".join([*cycle, child])))
                elif not colour.get(child):
                    colour[child] = 1
                    trail.append(child)
                    stack.append((child, iter(adjacency[child])))


def load_for_run(document: Any, tool_context: Any = None) -> CanvasSpec:
    """Load and validate for execution: INVALID_ARGUMENT with one violation per problem, or
    FAILED_PRECONDITION when the DSL is valid but uses something this orchestrator cannot run."""
    result = validate(document, tool_context)
    blocking = [p for p in result.problems if p.code != "UNSUPPORTED"]
    if blocking or result.canvas is None:
        violations = [FieldViolation(_field(p), f"{p.code}: {p.message}") for p in blocking]
        summary = "; ".join(f"{v.field}: {v.description}" for v in violations[:5])
        more = f" (+{len(violations) - 5} more)" if len(violations) > 5 else ""
        raise InvalidArgumentError(f"invalid canvas: {summary}{more}", violations=violations, reason="INVALID_CANVAS")
    unsupported = [p for p in result.problems if p.code == "UNSUPPORTED"]
    if unsupported:
        raise FailedPreconditionError(
            "canvas uses unsupported features: " + "; ".join(f"{p.component_id}: {p.message}" for p in unsupported[:5]),
            reason="UNSUPPORTED_COMPONENT",
        )
    return result.canvas


def _field(problem: CanvasProblem) -> str:
    return f"components.{problem.component_id}.{problem.field}" if problem.component_id else problem.field
