"""Agent: the LLM with a tool loop (spec §5.8, fixes §7 items 21 and 24).

Without tools or MCP servers an Agent is an LLM (core/components/llm.py). With tools:

* Tools come from `params.tools` (built-in tool classes, or `Agent` entries for sub-agents) and
  `params.mcp` (tools of configured MCP servers). `ToolRegistry.plan_agent_tools` gives each a
  function name that does not depend on list order.
* The loop makes at most `max_rounds` model calls that may ask for tools (`tool_choice: auto`). All
  calls of one response run concurrently; a tool failure becomes error text for the model (RAGFlow
  behaviour), never a node failure. When every round asked for tools, `Exceed max rounds: N` is
  appended and one last call is made without tools.
* Reasoning and text of every round stream as they arrive (think events, MessageDelta). Text that
  accompanies tool calls stays in the Message (a blank line before the next round's text) but not in
  the Agent's `content`, which is the last round's answer; no piece is sent twice.
* A sub-agent is called with `user_prompt` (+ `reasoning`, `context`); it runs its own loop without
  streaming and emits its own NodeStarted / NodeFinished with `parent_id` = the calling agent, id
  `<agent id>--><name>`.
* Retrieval and web tools add their chunks to the run's reference bucket (sequential, unique
  citation ids); the chunks are returned as the node's references (journaled) and MessageEnd carries
  the bucket. CodeExec artifacts become `downloads` (MessageEnd) and markdown links in `content`.
* Model errors raise NodeError and so fall under the node's error policy (max_retries, default
  value, goto).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from services.common.logging import redact_text
from services.orchestrator.core import events as ev
from services.orchestrator.core.components.base import Outcome, Problem, number_problem
from services.orchestrator.core.components.llm import LLM, parse_json_answer, structured_schema, with_citation_prompt
from services.orchestrator.core.components.registry import register
from services.orchestrator.core.dsl.model import NodeSpec
from services.orchestrator.core.errors import NodeError

logger = logging.getLogger(__name__)

AGENT_ARGUMENTS = {
    "type": "object",
    "properties": {
        "user_prompt": {"type": "string", "description": "The task or question for this agent."},
        "reasoning": {"type": "string", "description": "Why this agent is called (optional)."},
        "context": {"type": "string", "description": "Background the agent needs (optional)."},
    },
    "required": ["user_prompt"],
}
MAX_TOOL_RESULT_CHARS = 20_000
CITABLE_WEB_TOOLS = ("TavilySearch", "TavilyExtract", "Wikipedia", "DuckDuckGo", "Google", "Bing")


def tool_entries(params: dict[str, Any]) -> list[dict[str, Any]]:
    tools = params.get("tools")
    return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []


def mcp_entries(params: dict[str, Any]) -> list[dict[str, Any]]:
    mcp = params.get("mcp")
    return [m for m in mcp if isinstance(m, dict)] if isinstance(mcp, list) else []


def check_tools(params: dict[str, Any], prefix: str = "tools") -> list[Problem]:
    """Static problems of an Agent's tool list, sub-agents included (unknown class, bad entries)."""
    from services.orchestrator.tools import default_registry

    registry = default_registry()
    problems: list[Problem] = []
    raw = params.get("tools")
    if raw is not None and not isinstance(raw, list):
        return [(prefix, "tools must be a list of {component_name, name, params}")]
    for i, entry in enumerate(raw or []):
        if not isinstance(entry, dict) or not entry.get("component_name"):
            problems.append((f"{prefix}[{i}]", "each tool needs a component_name"))
            continue
        component = str(entry["component_name"])
        sub_params = entry.get("params") if isinstance(entry.get("params"), dict) else {}
        if component == "Agent":
            problems.extend(check_tools(sub_params, f"{prefix}[{i}].params.tools"))
        elif component not in registry:
            problems.append((f"{prefix}[{i}].component_name", f"unknown tool class '{component}'"))
    return problems


def parse_arguments(raw: str) -> dict[str, Any]:
    """Lenient: surrounding fences/whitespace are tolerated; the result must be a JSON object."""
    text = (raw or "").strip()
    if not text:
        return {}
    try:
        value = parse_json_answer(text)
    except ValueError as exc:
        raise ValueError(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("arguments must be a JSON object")
    return value


@dataclass
class LoopResult:
    text: str
    references: list[dict[str, Any]] = field(default_factory=list)
    downloads: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


@register
class Agent(LLM):
    type_name = "Agent"
    refine_by_default = True
    default_timeout_s = 1200.0

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        rounds = number_problem(params, "max_rounds", int, low=0, blank_is_default=True)
        return [*super().check(params), *check_tools(params), *([rounds] if rounds else [])]

    def has_tools(self) -> bool:
        return bool(tool_entries(self.params) or mcp_entries(self.params))

    async def invoke(self, ctx) -> Outcome:
        if not self.has_tools():
            return await super().invoke(ctx)
        if ctx.services.llm is None:
            raise NodeError("no model gateway is configured", reason="NO_GATEWAY")
        if ctx.services.tools is None:
            raise NodeError(f"{self.id}: tools are not configured in this orchestrator", reason="NO_TOOLS")
        messages = self._with_citation_prompt(ctx, await self.refined(ctx, self._messages(ctx)))
        schema = structured_schema(self.params)
        stream = None
        if self.wants_stream(ctx):
            stream = ctx.stream_of(self.id)
            if stream is None or stream.closed or stream.text_so_far():
                stream = ctx.open_stream()
        result = await self.run_loop(ctx, messages, stream)
        if self.second_pass_wanted():
            result.text = await self.cite_second_pass(ctx, result.text, stream)
        content = self._with_artifact_links(result.text, result.downloads)
        if stream is not None:
            if content != result.text:
                stream.push("text", content[len(result.text):])
            stream.downloads = list(result.downloads)
            stream.close()
        outputs: dict[str, Any] = {"content": content}
        if result.downloads:
            outputs["downloads"] = result.downloads
        if schema is not None:
            outputs["structured"] = await self._to_structured(ctx, messages, result.text, schema)
        return Outcome(outputs=outputs, inputs={"messages": messages, "tool_calls": result.tool_calls},
                       references=result.references)

    # -- the tool loop ------------------------------------------------------------------------------
    async def run_loop(self, ctx, messages: list[dict[str, Any]], stream) -> LoopResult:
        from services.orchestrator.tools import default_registry
        from services.orchestrator.tools.errors import ToolError
        from services.orchestrator.tools.mcp_tools import mcp_tools_for

        runtime = ctx.services.tools
        tool_context = runtime.context(references=ctx.state.reference_bucket(), request_id=self._request_id(ctx))
        mcp_tools = []
        try:
            for entry in mcp_entries(self.params):
                mcp_tools.extend(await mcp_tools_for(entry, tool_context))
        except ToolError as exc:
            raise NodeError(f"{self.id}: MCP tools unavailable: {exc.message}", reason=exc.reason,
                            retryable=exc.reason in ("TOOL_UPSTREAM_ERROR", "TOOL_TIMEOUT")) from None
        planned = default_registry().plan_agent_tools(tool_entries(self.params), mcp_tools)
        by_name = {p.function_name: p for p in planned}
        specs = []
        for p in planned:
            if p.kind == "agent":
                description = str(p.params.get("description") or f"Agent {p.display_name}")
                specs.append({"type": "function", "function": {"name": p.function_name, "description": description,
                                                               "parameters": AGENT_ARGUMENTS}})
            else:
                specs.append(p.tool.function_spec(p.params, name=p.function_name))
        result = LoopResult(text="")
        history = list(messages)
        max_rounds = max(int(self.param("max_rounds", 5) or 5), 1)
        for index in range(max_rounds):
            text, calls, thinking_blocks = await self._round(ctx, history, specs, stream, index)
            if not calls:
                result.text = text
                return result
            # Signed reasoning goes back with the turn it came from: Anthropic rejects a tool loop
            # with extended thinking without it (the gateway strips it for other providers).
            turn = {"role": "assistant", "content": text, "tool_calls": calls}
            if thinking_blocks:
                turn["thinking_blocks"] = thinking_blocks
            history.append(turn)
            answers = await asyncio.gather(*(self._call_tool(ctx, by_name, call, tool_context, result) for call in calls))
            for call, answer in zip(calls, answers):
                history.append({"role": "tool", "tool_call_id": call["id"], "name": call["name"], "content": answer})
        history.append({"role": "user", "content": f"Exceed max rounds: {max_rounds}"})
        result.text, _, _ = await self._round(ctx, history, None, stream, max_rounds)
        return result

    async def _round(self, ctx, messages, specs, stream, index: int) -> tuple[str, list[dict[str, Any]], list[dict[str, str]]]:
        request = self._request(ctx, messages, None)
        request.request_id = f"{request.request_id}:round{index}"
        if specs:
            request.tools = specs
            request.tool_choice = "auto"
        # Text streams into the Message as it arrives, in every round: whether a round asks for tools
        # is known only when its response ends (the gateway sends whole tool calls last). Text of a
        # round that then calls tools ("Let me look that up.") stays in the Message as what the user
        # saw, set off from the next round's text by a blank line; the Agent's `content` is the last
        # round's text only. Each piece is pushed exactly once.
        # With `citation_second_pass` the text is held back instead: the pass decides what is shown.
        separator = "\n\n" if stream is not None and stream.text_so_far() else ""
        thinking_blocks: list[dict[str, str]] = []
        pieces, calls = await self._consume(ctx, request, stream, live_text=not self.second_pass_wanted(),
                                            text_prefix=separator, thinking_blocks=thinking_blocks)
        return "".join(pieces), calls, thinking_blocks

    async def _call_tool(self, ctx, by_name, call: dict[str, Any], tool_context, result: LoopResult) -> str:
        name = str(call.get("name", ""))
        planned = by_name.get(name)
        record: dict[str, Any] = {"name": name, "arguments": call.get("arguments", "")}
        result.tool_calls.append(record)
        if planned is None:
            record["error"] = f"unknown tool '{name}'"
            return f"ERROR: unknown tool '{name}'; available: {', '.join(sorted(by_name))}"
        try:
            args = parse_arguments(str(call.get("arguments") or ""))
        except ValueError as exc:
            record["error"] = str(exc)
            return f"ERROR: {exc}"
        if planned.kind == "agent":
            return await self._call_sub_agent(ctx, planned, args)
        params = dict(planned.params)
        if planned.component_name == "CodeExec" and isinstance(params.get("arguments"), dict):
            # Reference-valued arguments resolve against the run, as in node mode.
            from services.orchestrator.core.components.tool_node import _resolve_param_refs

            params["arguments"] = {k: _resolve_param_refs(ctx, v) if v not in (None, "") else v for k, v in params["arguments"].items()}
        request_id = f"{self._request_id(ctx)}:{name}:{len(result.tool_calls)}"
        context = ctx.services.tools.context(references=tool_context.references, request_id=request_id)
        outcome = await planned.tool.invoke(args, params=params, context=context)
        result.references.extend(outcome.chunks)
        result.downloads.extend(d.to_dict() for d in outcome.downloads)
        if outcome.error is not None:
            record["error"] = outcome.error.message
        text = outcome.content or json.dumps(outcome.outputs, ensure_ascii=False, default=str)
        # The model never sees a configured secret, whatever a tool's upstream put in its answer.
        return redact_text(text)[:MAX_TOOL_RESULT_CHARS]

    async def _call_sub_agent(self, ctx, planned, args: dict[str, Any]) -> str:
        sub_id = f"{self.id}-->{planned.display_name.replace(' ', '_')}"
        node = NodeSpec(id=sub_id, type="Agent", params=dict(planned.params), downstream=[], upstream=[self.id],
                        parent_id=self.id, name=planned.display_name)
        sub = Agent(node)
        header = {"component_id": sub_id, "component_name": planned.display_name, "component_type": "Agent",
                  "parent_id": self.id}
        ctx.emit(ev.NODE_STARTED, {**header, "thoughts": "", "attempt": 1})
        started = time.perf_counter()
        messages = sub.sub_agent_messages(ctx, args)
        finished: dict[str, Any] = {**header, "inputs": {"messages": messages}, "attempt": 1}
        try:
            # Chunks the sub-agent's tools retrieve land in the run's bucket (cited by the answer).
            if sub.has_tools():
                text = (await sub.run_loop(ctx, messages, None)).text
            else:
                text = await sub._call(ctx, sub._request(ctx, messages, None), None)
            finished["outputs"] = {"content": text}
        except NodeError as exc:
            finished.update(outputs={}, error={"reason": exc.reason, "message": exc.message, "component_id": sub_id})
            finished["elapsed_ms"] = int((time.perf_counter() - started) * 1000)
            ctx.emit(ev.NODE_FINISHED, finished)
            return f"ERROR: {exc.message}"
        finished["elapsed_ms"] = int((time.perf_counter() - started) * 1000)
        ctx.emit(ev.NODE_FINISHED, finished)
        return text

    def sub_agent_messages(self, ctx, args: dict[str, Any]) -> list[dict[str, Any]]:
        """The sub-agent's own system prompt and history window, and one user turn from the call."""
        prompt = str(args.get("user_prompt") or self.param("user_prompt", "") or "")
        sections = []
        if args.get("reasoning"):
            sections.append(f"REASONING:\n{args['reasoning']}")
        if args.get("context"):
            sections.append(f"CONTEXT:\n{args['context']}")
        user = "\n\n".join([*sections, f"QUERY:\n{prompt}"]) if sections else prompt
        messages: list[dict[str, Any]] = []
        system = ctx.render(str(self.param("sys_prompt", "")))
        if system.strip():
            messages.append({"role": "system", "content": system})
        messages.extend(self._history(ctx))
        messages.append({"role": "user", "content": user.strip() or "(no task given)"})
        return messages

    def _with_citation_prompt(self, ctx, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """With `cite` (default on) and either a tool that returns citable chunks or chunks already in
        the run (a Retrieval node before this agent), ask for [ID:n] markers. The instruction is added
        before the first call, so chunks retrieved in this very turn are cited too (§7 item 21)."""
        citable = {"Retrieval", *CITABLE_WEB_TOOLS}
        if not self.param("cite", True):
            return messages
        if self.cites(ctx) or any(t.get("component_name") in citable for t in tool_entries(self.params)):
            return with_citation_prompt(messages)
        return messages

    # -- results --------------------------------------------------------------------------------------
    async def _to_structured(self, ctx, messages, text: str, schema: dict[str, Any]) -> Any:
        try:
            return parse_json_answer(text)
        except ValueError:
            pass
        follow_up = [*messages, {"role": "assistant", "content": text},
                     {"role": "user", "content": "Format the answer above as JSON that matches the requested schema."}]
        outcome = await self._structured(ctx, follow_up, schema)
        return outcome.outputs["structured"]

    @staticmethod
    def _with_artifact_links(text: str, downloads: list[dict[str, Any]]) -> str:
        links = []
        for item in downloads:
            target = f"attachment://{item.get('doc_id', '')}"
            if target in text:
                continue
            name = str(item.get("filename", "file"))
            image = str(item.get("mime_type", "")).startswith("image/")
            links.append(f"{'!' if image else ''}[{name}]({target})")
        return text + ("\n\n" + "\n".join(links) if links else "")

    def _request_id(self, ctx) -> str:
        return f"{ctx.spec.get('run_id', '')}:{self.id}:{ctx.scope}:{ctx.attempt}"
