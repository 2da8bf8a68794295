"""The generic scripted model: schema-valid tool arguments and JSON, category picks, think + text."""

from __future__ import annotations

import json

from tests.support.generic_llm import ANSWER_PREFIX, THINK_PREFIX, generic_reply, schema_value


def test_tool_calls_cover_every_offered_tool_with_schema_valid_arguments():
    body = {"messages": [{"role": "user", "content": "hello"}], "tools": [
        {"type": "function", "function": {"name": "execute_code", "parameters": {"type": "object", "properties": {
            "script": {"type": "string"}, "lang": {"type": "string", "enum": ["javascript"]}}, "required": ["script"]}}},
        {"type": "function", "function": {"name": "google_search", "parameters": {"type": "object", "properties": {
            "q": {"type": "string"}, "num": {"type": "integer", "minimum": 5}, "tags": {"type": "array", "items": {"type": "string"}}}}}},
    ]}
    reply = generic_reply(body)
    calls = {c["name"]: json.loads(c["arguments"]) for c in reply.tool_calls}
    assert set(calls) == {"execute_code", "google_search"}
    assert calls["execute_code"]["lang"] == "javascript" and "function main" in calls["execute_code"]["script"]
    assert calls["google_search"]["num"] == 5 and calls["google_search"]["tags"] == ["renewable energy"]
    assert len({c["id"] for c in reply.tool_calls}) == 2


def test_answers_after_tool_results_with_think_then_text():
    body = {"messages": [{"role": "user", "content": "hello"}, {"role": "tool", "content": "x", "tool_call_id": "1"}],
            "tools": [{"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}]}
    reply = generic_reply(body)
    assert not reply.tool_calls and reply.content.startswith(ANSWER_PREFIX)
    assert reply.reasoning_content.startswith(THINK_PREFIX)


def test_json_schema_and_category_prompts():
    schema = {"type": "object", "properties": {"category": {"type": "string", "enum": ["a", "b"]}}}
    body = {"messages": [{"role": "user", "content": "q"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}
    assert json.loads(generic_reply(body).content)["category"] in ("a", "b")
    prompt = {"messages": [{"role": "system", "content": "Classify into one category:\n- billing: money\n- tech: bugs"},
                           {"role": "user", "content": "q"}]}
    assert json.loads(generic_reply(prompt).content)["category"] in ("billing", "tech")
    assert schema_value({"type": "object", "properties": {"n": {"type": "number"}, "ok": {"type": "boolean"}}}) == {"n": 1.0, "ok": True}
