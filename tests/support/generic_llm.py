"""A generic scripted model for ScriptedOpenAIServer: one behaviour for every canvas, no per-template script.

    server = ScriptedOpenAIServer(default=generic_reply)

Per request (OpenAI chat-completions body):
* tools offered and no tool result in the conversation yet → one response calling EVERY offered
  tool once, with arguments built from its JSON schema (`schema_value`);
* a JSON schema requested (`response_format.json_schema`, as the gateway sends it) → a valid value
  of that schema; an `enum` picks one member, chosen from the last user text (so Categorize picks
  one of its categories); without a schema, a prompt listing categories as `- name: ...` lines gets
  `{"category": <one of them>}`;
* a multi-turn rewrite prompt (a `Last question: ...` line) → that question, which is standalone already;
* otherwise → a think block (`reasoning_content`) and then a text answer quoting the last user text.

Every answer carries usage. Tool calls get ids unique within the response.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.support.openai_server import Reply

ANSWER_PREFIX = "Generic answer"
THINK_PREFIX = "Let me think about"
_WORD = "renewable energy"
_SCRIPT = {
    "python": "def main():\n    return {'result': 42}\n",
    "javascript": "function main() {\n  return {result: 42};\n}\n",
}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def _pick(options: list[Any], seed: str) -> Any:
    """Deterministic for a seed, whatever order the options arrive in (protobuf Structs do not keep
    map order, so a canvas's category order may differ between processes)."""
    ordered = sorted(options, key=lambda o: json.dumps(o, sort_keys=True))
    return ordered[int(hashlib.sha256(seed.encode()).hexdigest(), 16) % len(ordered)]


def schema_value(schema: dict[str, Any], name: str = "", seed: str = "", siblings: dict[str, Any] | None = None) -> Any:
    """A value that satisfies `schema` (the JSON-schema subset tools and structured outputs use)."""
    if not isinstance(schema, dict):
        return _WORD
    if "enum" in schema and schema["enum"]:
        return _pick(list(schema["enum"]), seed or name)
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema_value(schema[key][0], name, seed)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in schema:
        value: dict[str, Any] = {}
        props = schema.get("properties") or {}
        # Every property, so optional fields are exercised too; code last, so it matches `lang`.
        for prop in sorted(props, key=lambda p: p.lower() in ("script", "code")):
            value[prop] = schema_value(props[prop], prop, seed, value)
        return {prop: value[prop] for prop in props}
    if kind == "array":
        return [schema_value(schema.get("items") or {"type": "string"}, name, seed)]
    if kind == "integer":
        return max(int(schema.get("minimum", 1)), 1)
    if kind == "number":
        return float(max(schema.get("minimum", 1), 1))
    if kind == "boolean":
        return True
    lowered = name.lower()
    if "url" in lowered:
        return "https://example.com/article"
    if lowered in ("script", "code"):
        lang = str((siblings or {}).get("lang") or "python")
        return _SCRIPT.get(lang, _SCRIPT["python"])
    if lowered in ("stock_code", "symbol", "ticker"):
        return "AAPL"
    if lowered in ("sql",):
        return "SELECT 1"
    return _WORD


def _requested_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format")
    if isinstance(fmt, dict):
        spec = fmt.get("json_schema")
        if isinstance(spec, dict) and isinstance(spec.get("schema"), dict):
            return spec["schema"]
        if fmt.get("type") == "json_object":
            return {"type": "object", "properties": {"answer": {"type": "string"}}}
    return None


def _prompt_categories(messages: list[dict[str, Any]]) -> list[str]:
    """Category names listed as `- name: description` lines in a prompt that asks to classify into categories."""
    for message in messages:
        text = _text_of(message.get("content"))
        if "classify" in text.lower() and "categor" in text.lower():
            names = [line[2:].split(":", 1)[0].strip() for line in text.splitlines() if line.startswith("- ")]
            if names:
                return [n for n in names if n]
    return []


def _question_to_rewrite(text: str) -> str:
    """The question of a multi-turn rewrite prompt (its `Last question: ...` line), else ""."""
    for line in reversed(text.splitlines()):
        if line.startswith("Last question:"):
            return line.removeprefix("Last question:").strip()
    return ""


def generic_reply(body: dict[str, Any]) -> Reply:
    messages = body.get("messages") or []
    user = last_user_text(body)
    tools = [t.get("function", t) for t in body.get("tools") or [] if isinstance(t, dict)]
    has_results = any(m.get("role") == "tool" for m in messages)
    if tools and not has_results:
        calls = []
        for index, tool in enumerate(tools):
            params = tool.get("parameters") or {"type": "object", "properties": {}}
            args = schema_value(params, seed=user)
            calls.append({"id": f"call_{index}_{tool['name']}"[:40], "name": tool["name"],
                          "arguments": json.dumps(args, ensure_ascii=False)})
        return Reply(content="", tool_calls=calls, finish_reason="tool_calls",
                     reasoning_content=f"{THINK_PREFIX} which tools to use.")
    schema = _requested_schema(body)
    if schema is not None:
        return Reply(content=json.dumps(schema_value(schema, seed=user), ensure_ascii=False))
    question = _question_to_rewrite(user)
    if question:  # asked for a standalone version of a follow-up question: the question itself is one
        return Reply(content=question)
    categories = _prompt_categories(messages)
    if categories:  # a classification prompt without a native schema: name one listed category
        return Reply(content=json.dumps({"category": _pick(categories, user)}))
    excerpt = " ".join(user.split())[:120]
    return Reply(content=f"{ANSWER_PREFIX} to: {excerpt}", reasoning_content=f"{THINK_PREFIX} the request.")
