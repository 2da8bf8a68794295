"""Tool calls: assembling streamed deltas, validating arguments, and the JSON-in-text fallback.

Assembly keys calls by id, not only by index: some providers (Gemini's OpenAI layer, several
servers) send every parallel call at index 0 with distinct ids. A delta without an id continues the
call last seen at its index; a name arriving in a later delta is still picked up.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import jsonschema

from services.llm_gateway.core import structured
from services.llm_gateway.core.structured import extract_json
from services.llm_gateway.core.types import Message, ThinkingBlock, ToolCall, ToolCallDelta, ToolSpec


NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""Tool names every provider family here accepts (OpenAI's rule; Anthropic and Gemini accept it too)."""


class ToolCallAssembler:
    def __init__(self) -> None:
        self._calls: list[dict[str, Any]] = []
        self._by_id: dict[str, dict[str, Any]] = {}
        self._last_at_index: dict[int, dict[str, Any]] = {}

    def feed(self, delta: ToolCallDelta) -> None:
        call: dict[str, Any] | None = None
        index = delta.index if delta.index is not None else 0
        if delta.id:
            call = self._by_id.get(delta.id)
            last = self._last_at_index.get(index)
            if call is None and last is not None and not last["id"] and not (delta.name and last["name"]):
                # a late id for the call begun without one at this index: the same call, not a new one (a delta
                # that names a tool again starts the next call)
                call = last
                call["id"] = delta.id
                self._by_id[delta.id] = call
            elif call is None:
                call = {"id": delta.id, "name": "", "arguments": []}
                self._by_id[delta.id] = call
                self._calls.append(call)
        else:
            call = self._last_at_index.get(index)
            if call is None:
                call = {"id": "", "name": "", "arguments": []}
                self._calls.append(call)
        self._last_at_index[index] = call
        if delta.name:
            call["name"] = delta.name if not call["name"] else call["name"]
        if delta.arguments:
            call["arguments"].append(delta.arguments)

    def calls(self) -> list[ToolCall]:
        out = []
        for call in self._calls:
            if not call["name"]:
                continue
            arguments = "".join(call["arguments"]).strip() or "{}"
            out.append(ToolCall(id=call["id"] or f"call_{uuid.uuid4().hex[:12]}", name=call["name"], arguments_json=arguments))
        return out


def validate_call(call: ToolCall, tools: list[ToolSpec]) -> str | None:
    """None when the call is valid, else a message the model can act on."""
    spec = next((t for t in tools if t.name == call.name), None)
    if spec is None:
        return f"Unknown tool {call.name!r}. Available tools: {', '.join(t.name for t in tools)}."
    try:
        arguments = structured.loads(call.arguments_json)
    except json.JSONDecodeError as exc:
        return f"Arguments for {call.name} are not valid JSON ({exc.msg} at position {exc.pos}). Send a JSON object."
    except ValueError as exc:  # nested too deep (never handed to the recursive parser), NaN, Infinity
        return f"Arguments for {call.name} are not usable JSON ({exc}). Send a plain JSON object."
    if not isinstance(arguments, dict):
        return f"Arguments for {call.name} must be a JSON object, got {type(arguments).__name__}."
    if spec.parameters:
        try:
            errors = sorted(jsonschema.Draft202012Validator(spec.parameters).iter_errors(arguments), key=lambda e: list(e.path))
        except Exception:  # a schema problem only validation finds: the arguments cannot be checked, pass them on
            return None
        if errors:
            where = "/".join(str(p) for p in errors[0].path) or "(root)"
            return f"Arguments for {call.name} do not match its schema at {where}: {errors[0].message}"
    return None


def openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.parameters or {"type": "object", "properties": {}}}}
            for t in tools]


def tool_choice_param(choice: str) -> Any:
    if choice in ("", "auto"):
        return None
    if choice in ("none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


# -- models without native tools ---------------------------------------------------------------------
def text_tools_prompt(tools: list[ToolSpec]) -> str:
    """System-prompt addendum describing tools for models that cannot call them natively."""
    lines = ["You can call tools. To call one, answer with ONLY a JSON object of the form",
             '{"tool_call": {"name": "<tool name>", "arguments": {...}}}',
             "and nothing else. Otherwise answer normally. Tools:"]
    for tool in tools:
        lines.append(f"- {tool.name}: {tool.description} Arguments JSON Schema: {json.dumps(tool.parameters)}")
    return "\n".join(lines)


_TOOL_KEYS = ("tool_call", "tool_calls", "function_call")


def parse_text_tool_calls(text: str, tools: list[ToolSpec]) -> list[ToolCall]:
    """Tool calls written as JSON in the answer text ({"tool_call": {...}} or {"name":..,"arguments":..})."""
    if "{" not in text:
        return []
    found = extract_json(text)
    if not found.ok:
        return []
    value = found.value
    raw_calls: list[Any] = []
    if isinstance(value, dict):
        for key in _TOOL_KEYS:
            if key in value:
                inner = value[key]
                raw_calls = inner if isinstance(inner, list) else [inner]
                break
        else:
            if "name" in value and ("arguments" in value or "parameters" in value):
                raw_calls = [value]
    names = {t.name for t in tools}
    calls = []
    for raw in raw_calls:
        if not isinstance(raw, dict) or raw.get("name") not in names:
            continue
        arguments = raw.get("arguments", raw.get("parameters", {}))
        arguments_json = arguments if isinstance(arguments, str) else json.dumps(arguments)
        calls.append(ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=str(raw["name"]), arguments_json=arguments_json))
    return calls


def feedback_messages(calls: list[ToolCall], problems: dict[str, str], native: bool,
                      blocks: list[ThinkingBlock] | None = None) -> list[Message]:
    """The assistant turn with the bad calls (and its signed thinking blocks) plus the validator's
    message, so the model can retry."""
    if native:
        out = [Message(role="assistant", tool_calls=list(calls), thinking_blocks=list(blocks or []))]
        for call in calls:
            text = problems.get(call.id) or "Not executed: another call in this turn had invalid arguments. Call again."
            out.append(Message(role="tool", tool_call_id=call.id, name=call.name, content="Error: " + text))
        return out
    summary = json.dumps({"tool_call": [{"name": c.name, "arguments": c.arguments_json} for c in calls]})
    return [Message(role="assistant", content=summary),
            Message(role="user", content="Your tool call was invalid: " + " ".join(problems.values())
                    + " Answer again with a corrected tool call.")]

