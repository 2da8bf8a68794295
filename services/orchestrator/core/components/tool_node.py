"""Tools as canvas nodes (spec §5.18-5.21): Retrieval, CodeExec, ExeSQL and the web tools.

The tool implementations live in services/orchestrator/tools; this adapter resolves the node's
arguments and reference-valued params through the one resolver, runs the tool with the run's
reference bucket, and turns a ToolResult into node outputs (or a NodeError for the error policy).
Upstream outages and timeouts are retryable under max_retries; bad input and configuration are not.
"""

from __future__ import annotations

from typing import Any

from services.common.errors import with_article
from services.orchestrator.core.components.base import Component, Outcome
from services.orchestrator.core.components.llm import LLM, parse_json_answer, refine_question
from services.orchestrator.core.components.registry import register
from services.orchestrator.core.dsl.model import NodeSpec
from services.orchestrator.core.errors import NodeError
from services.orchestrator.core.refs import whole_ref

_RETRYABLE = ("TOOL_UPSTREAM_ERROR", "TOOL_TIMEOUT")
# ExeSQL failures a model can fix by rewriting the statement (not outages or configuration). A
# statement refused as not read-only is among them: the rewrite is checked again, so it cannot write.
_REPAIRABLE = ("TOOL_BAD_INPUT", "TOOL_EXECUTION_FAILED", "TOOL_NOT_ALLOWED")
SQL_SCHEMA = {"type": "object", "properties": {"sql": {"type": "string", "description": "the corrected SQL statement"}},
              "required": ["sql"]}
SQL_REPAIR_PROMPT = ("You repair SQL statements. The statement below failed on {db} database. Rewrite it (or, if it "
                     "is a question in plain language, write the SQL that answers it) and reply with JSON "
                     '{{"sql": "<the statement>"}} only, without explanation.')


def _count(value: Any, *, default: int) -> int:
    """A non-negative count from a DSL param; missing or unreadable values take the default."""
    if value is None or value == "":
        return default
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return default


def _resolve_param_refs(ctx, value: Any) -> Any:
    """Resolve a value that is a reference (braced or bare); leave anything else as written."""
    return ctx.resolve(value) if whole_ref(value) is not None else value


class ToolNode(Component):
    default_timeout_s = 120.0
    is_tool = True
    durable_start = True

    @classmethod
    def output_names(cls, params: dict[str, Any]) -> set[str] | None:
        from services.orchestrator.tools import default_registry

        outputs = params.get("outputs")  # CodeExec's business output is declared here
        return {*default_registry().get(cls.type_name).output_names, "downloads",
                *(outputs if isinstance(outputs, dict) else ())}

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
        if self.node.type == "Retrieval" and params.get("refine_multiturn") and isinstance(args.get("query"), str):
            args = await self._refine_query(ctx, args, params)
        context = runtime.context(references=ctx.state.reference_bucket(), request_id=request_id)
        result = await tool.invoke(args, params=params, context=context)
        if result.error is not None and self.node.type == "ExeSQL" and params.get("repair_with_llm"):
            result, args = await self._repair_sql(ctx, tool, args, params, result, request_id)
        if result.error is not None:
            reason = getattr(result.error, "reason", "TOOL_ERROR")
            # A ToolError's message already starts with its tool's name ("ExeSQL: ..."): name it once.
            message = result.error.message
            if not message.startswith(f"{self.node.type}:"):
                message = f"{self.node.type}: {message}"
            raise NodeError(message, reason=reason, retryable=reason in _RETRYABLE)
        outputs = dict(result.outputs)
        if result.downloads:
            outputs["downloads"] = [d.to_dict() for d in result.downloads]
        return Outcome(outputs=outputs, inputs=args, references=list(result.chunks))

    def _model(self, params: dict[str, Any]) -> LLM:
        """The node's `llm_id` as an LLM component, for the model calls this tool node makes itself."""
        return LLM(NodeSpec(id=self.id, type="LLM", params={"llm_id": params.get("llm_id", "")}, downstream=[], upstream=[]))

    async def _refine_query(self, ctx, args: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        """`refine_multiturn`: with earlier turns in the session, the model rewrites the last question
        into a standalone one from the history window (`message_history_window_size` user/assistant
        pairs, default 13), and that is what is searched. Without history, or without a model, the
        question is searched as asked."""
        window = int(params.get("message_history_window_size", 13) or 0)
        refined = await refine_question(self._model(params), ctx, args["query"], window)
        return {**args, "query": refined, "question": args["query"].strip()} if refined else args

    async def _repair_sql(self, ctx, tool, args: dict[str, Any], params: dict[str, Any], result, request_id: str):
        """RAGFlow G0 ExeSQL: a failing statement (or a question typed instead of SQL) goes to the model
        with the error, and the rewrite runs again, up to `repair_attempts` (G0 `loop`, default 3)
        times. The model's usage counts for this node."""
        if ctx.services.llm is None:
            return result, args
        model = self._model(params)
        attempts = _count(params.get("repair_attempts"), default=3)  # 0 turns the repair off
        repairs: list[dict[str, Any]] = []
        for index in range(attempts):
            if result.error is None or getattr(result.error, "reason", "") not in _REPAIRABLE:
                break
            messages = [{"role": "system", "content": SQL_REPAIR_PROMPT.format(db=with_article(str(params.get("db_type") or "SQL")))},
                        {"role": "user", "content": f"Statement:\n{args.get('sql', '')}\n\nError:\n{result.error.message}"}]
            answer = await model.side_call(ctx, messages, f"repair{index}", schema=SQL_SCHEMA)
            try:
                sql = str(parse_json_answer(answer).get("sql") or "")
            except (ValueError, AttributeError):
                sql = ""
            if not sql.strip():
                break
            repairs.append({"sql": sql, "error": result.error.message})
            args = {**args, "sql": sql}
            context = ctx.services.tools.context(references=ctx.state.reference_bucket(), request_id=f"{request_id}:repair{index}")
            result = await tool.invoke(args, params=params, context=context)
        if repairs:
            args = {**args, "repairs": repairs}
        return result, args


def register_tools() -> list[str]:
    """One registered component class per tool class name."""
    from services.orchestrator.tools import default_registry

    names = default_registry().component_names()
    for name in names:
        register(type(name, (ToolNode,), {"type_name": name, "__doc__": f"The {name} tool as a canvas node."}))
    return names
