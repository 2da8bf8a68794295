"""Tools as canvas nodes (spec §5.18-5.21): Retrieval, CodeExec, ExeSQL and the web tools.

The tool implementations live in services/orchestrator/tools; this adapter resolves the node's
arguments and reference-valued params through the one resolver, runs the tool with the run's
reference bucket, and turns a ToolResult into node outputs (or a NodeError for the error policy).
Upstream outages and timeouts are retryable under max_retries; bad input and configuration are not.
"""

from __future__ import annotations

from typing import Any

from services.orchestrator.core.components.base import Component, Outcome
from services.orchestrator.core.components.registry import register
from services.orchestrator.core.errors import NodeError
from services.orchestrator.core.refs import whole_ref

_RETRYABLE = ("TOOL_UPSTREAM_ERROR", "TOOL_TIMEOUT")


def _resolve_param_refs(ctx, value: Any) -> Any:
    """Resolve a value that is a reference (braced or bare); leave anything else as written."""
    return ctx.resolve(value) if whole_ref(value) is not None else value


class ToolNode(Component):
    default_timeout_s = 120.0
    is_tool = True

    async def invoke(self, ctx) -> Outcome:
        from services.orchestrator.tools import default_registry

        runtime = ctx.services.tools
        if runtime is None:
            raise NodeError(f"{self.node.type}: tools are not configured in this orchestrator", reason="NO_TOOLS")
        tool = default_registry().get(self.node.type)
        args = {name: ctx.resolve(value) for name, value in tool.node_arguments(self.params).items()}
        params = dict(self.params)
        if isinstance(params.get("arguments"), dict):  # CodeExec: argument values are references
            params["arguments"] = {k: _resolve_param_refs(ctx, v) if v not in (None, "") else v
                                   for k, v in params["arguments"].items()}
        for key in ("dataset_ids", "kb_ids"):  # Retrieval: ids may be references to dataset names
            if isinstance(params.get(key), list):
                resolved = [_resolve_param_refs(ctx, v) if isinstance(v, str) and "@" in v else v for v in params[key]]
                params[key] = [x for v in resolved for x in (v if isinstance(v, list) else [v]) if x not in (None, "")]
        request_id = f"{ctx.spec.get('run_id', '')}:{self.id}:{ctx.scope}:{ctx.attempt}"
        context = runtime.context(references=ctx.state.reference_bucket(), request_id=request_id)
        result = await tool.invoke(args, params=params, context=context)
        if result.error is not None:
            reason = getattr(result.error, "reason", "TOOL_ERROR")
            raise NodeError(f"{self.node.type}: {result.error.message}", reason=reason, retryable=reason in _RETRYABLE)
        outputs = dict(result.outputs)
        if result.downloads:
            outputs["downloads"] = [d.to_dict() for d in result.downloads]
        return Outcome(outputs=outputs, inputs=args, references=list(result.chunks))


def register_tools() -> list[str]:
    """One registered component class per tool class name."""
    from services.orchestrator.tools import default_registry

    names = default_registry().component_names()
    for name in names:
        register(type(name, (ToolNode,), {"type_name": name, "__doc__": f"The {name} tool as a canvas node."}))
    return names
