"""Tool-call assembly, argument validation with feedback, JSON-in-text tools, structured output repairs."""

from __future__ import annotations

import json

import pytest

from services.llm_gateway.core import structured
from services.llm_gateway.core.tools import ToolCallAssembler
from services.llm_gateway.core.types import (
    ChatRequest, ErrorKind, FinishEvent, FinishReason, Message, StructuredSpec, TextEvent, ToolCall, ToolCallDelta,
    ToolCallEvent, ToolSpec,
)
from tests.llm_gateway.conftest import collect
from tests.support.openai_server import Reply, Stream

WEATHER = ToolSpec("get_weather", "Weather for a city", {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"], "additionalProperties": False})
TIME = ToolSpec("get_time", "Current time", {"type": "object", "properties": {}})


def tc(index, id=None, name=None, arguments=None):
    function = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    call = {"index": index, "function": function}
    if id:
        call.update(id=id, type="function")
    return {"tool_calls": [call]}


@pytest.fixture
def gw(make_gateway, scripted):
    return make_gateway({"m": {"model": "openai/test-model", "api_base": scripted.base_url},
                         "plain": {"model": "openai/plain-model", "api_base": scripted.base_url, "supports_tools": False,
                                   "native_response_format": False},
                         "ds": {"model": "deepseek/deepseek-chat", "api_base": scripted.base_url, "api_key": "k-test"}})


def calls_of(events):
    return [(e.call.id, e.call.name, json.loads(e.call.arguments_json)) for e in events if isinstance(e, ToolCallEvent)]


def test_assembler_handles_all_index_zero_distinct_ids_and_late_names():
    assembler = ToolCallAssembler()
    for delta in [ToolCallDelta(0, "a", "get_weather", '{"ci'), ToolCallDelta(0, None, None, 'ty":"X"}'),
                  ToolCallDelta(0, "b", None, '{"city":"Y"}'), ToolCallDelta(0, None, "get_weather", None),
                  ToolCallDelta(1, "c", "get_time", "")]:
        assembler.feed(delta)
    assert [(c.id, c.name, c.arguments_json) for c in assembler.calls()] == [
        ("a", "get_weather", '{"city":"X"}'), ("b", "get_weather", '{"city":"Y"}'), ("c", "get_time", "{}")]


async def test_streamed_parallel_calls_at_index_zero_with_split_arguments(gw, scripted):
    scripted.queue(Stream(chunks=[
        {"content": "Let me check."},
        tc(0, "call_a", "get_weather", ""), tc(0, arguments='{"city":'), tc(0, arguments='"Paris"}'),
        tc(0, "call_b", "get_weather", '{"city":"Rome"}'),
        tc(1, "call_c", arguments="{}"), tc(1, name="get_time"),
    ], finish_reason="tool_calls"))
    events = await collect(gw, ChatRequest("m", [Message("user", "weather?")], tools=[WEATHER, TIME]))
    assert calls_of(events) == [("call_a", "get_weather", {"city": "Paris"}), ("call_b", "get_weather", {"city": "Rome"}),
                                ("call_c", "get_time", {})]
    assert [e.text for e in events if isinstance(e, TextEvent)] == ["Let me check."]
    assert events[-1].reason == FinishReason.TOOL_CALLS
    body = scripted.chat_bodies[0]
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather", "get_time"]


async def test_invalid_arguments_go_back_to_the_model_which_corrects_them(gw, scripted):
    scripted.queue(Stream(chunks=[tc(0, "call_1", "get_weather", '{"town":"Paris"}')], finish_reason="tool_calls"),
                   Stream(chunks=[tc(0, "call_2", "get_weather", '{"city":"Paris"}')], finish_reason="tool_calls"))
    events = await collect(gw, ChatRequest("m", [Message("user", "weather?")], tools=[WEATHER]))
    assert calls_of(events) == [("call_2", "get_weather", {"city": "Paris"})]
    second = scripted.chat_bodies[1]["messages"]
    assert second[-2]["tool_calls"][0]["function"]["arguments"] == '{"town":"Paris"}'
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "call_1"
    assert "city" in second[-1]["content"] and second[-1]["content"].startswith("Error:")


async def test_models_without_native_tools_get_json_in_text_tool_calls(gw, scripted):
    scripted.queue(Reply(content='```json\n{"tool_call": {"name": "get_weather", "arguments": {"city": "Oslo"}}}\n```'))
    events = await collect(gw, ChatRequest("plain", [Message("user", "weather?")], tools=[WEATHER]))
    assert [(name, args) for _, name, args in calls_of(events)] == [("get_weather", {"city": "Oslo"})]
    body = scripted.chat_bodies[0]
    assert "tools" not in body
    assert body["messages"][0]["role"] == "system" and "get_weather" in body["messages"][0]["content"]
    assert not [e for e in events if isinstance(e, TextEvent)]


async def test_models_without_native_tools_can_still_answer_in_text(gw, scripted):
    scripted.queue(Reply(content="It is sunny."))
    events = await collect(gw, ChatRequest("plain", [Message("user", "weather?")], tools=[WEATHER]))
    assert [e.text for e in events if isinstance(e, TextEvent)] == ["It is sunny."]
    assert events[-1].reason == FinishReason.STOP


async def test_deepseek_gets_its_reasoning_echoed_on_tool_turns_and_others_do_not(gw, scripted):
    history = [Message("user", "weather?"),
               Message("assistant", "", tool_calls=[ToolCall("call_1", "get_weather", '{"city":"Paris"}')],
                       reasoning_content="I should call the tool"),
               Message("tool", "sunny", tool_call_id="call_1", name="get_weather")]
    for model, echoed in (("ds", True), ("m", False)):
        scripted.clear()
        scripted.queue(Reply(content="Sunny."), Reply(content="Sunny."))
        await gw.chat(ChatRequest(model, history, tools=[WEATHER]))  # litellm.acompletion
        await collect(gw, ChatRequest(model, history, tools=[WEATHER]))  # streamed: the litellm_direct path
        plain, streamed = scripted.chat_bodies
        assert plain["messages"] == streamed["messages"] and plain["tools"] == streamed["tools"]
        assistant = plain["messages"][1]
        assert ("reasoning_content" in assistant) is echoed
        if echoed:
            assert assistant["reasoning_content"] == "I should call the tool"


# -- structured output -------------------------------------------------------------------------------
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}


@pytest.mark.parametrize("text,value", [
    ('{"a": 1}', {"a": 1}), ('```json\n{"a": 1}\n```', {"a": 1}), ('Here you go: {"a": 1} hope it helps', {"a": 1}),
    ('{"a": 1}{"b": 2}', {"a": 1}), ('[1, 2]', [1, 2]), ('{"名字": "李"}', {"名字": "李"}),
])
def test_extract_json(text, value):
    found = structured.extract_json(text)
    assert found.ok and found.value == value


@pytest.mark.parametrize("text", ["", "not json", "{broken"])
def test_extract_json_failures(text):
    assert not structured.extract_json(text).ok


def test_validation_messages_name_the_problem():
    assert structured.validate({"name": "x", "age": "old"}, PERSON) == "at age: 'old' is not of type 'integer'"
    assert "required" in structured.validate({"name": "x"}, PERSON)
    assert "Additional properties" in structured.validate({"name": "x", "age": 1, "x": 0}, PERSON)


async def test_structured_output_native_response_format_and_repair_on_second_attempt(gw, scripted):
    scripted.queue(Reply(content='{"name": "Ada", "age": "thirty-six"}'), Reply(content='```json\n{"name": "Ada", "age": 36}\n```'))
    result = await gw.chat(ChatRequest("m", [Message("user", "who?")], structured=StructuredSpec(PERSON, "person", 2)))
    assert result.error is None and result.structured == {"name": "Ada", "age": 36} and result.has_structured
    first, second = scripted.chat_bodies
    assert first["response_format"] == {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    assert "age" in second["messages"][-1]["content"] and "integer" in second["messages"][-1]["content"]
    assert second["messages"][-2] == {"role": "assistant", "content": '{"name": "Ada", "age": "thirty-six"}'}
    assert result.usage.calls == 2


async def test_structured_output_prompt_fallback_and_typed_failure_after_max_repairs(gw, scripted):
    scripted.queue(Reply(content="no"), Reply(content="still no"), Reply(content='{"name": 1}'))
    events = await collect(gw, ChatRequest("plain", [Message("user", "who?")], structured=StructuredSpec(PERSON, "p", 2)))
    finish = events[-1]
    assert isinstance(finish, FinishEvent) and finish.reason == FinishReason.ERROR
    assert finish.error.kind == ErrorKind.INVALID_STRUCTURED_OUTPUT and finish.error.partial_text == '{"name": 1}'
    assert len(scripted.chat_bodies) == 3
    assert "response_format" not in scripted.chat_bodies[0]
    assert "JSON Schema" in scripted.chat_bodies[0]["messages"][0]["content"]


async def test_structured_stream_emits_the_validated_json(gw, scripted):
    scripted.queue(Reply(content='Sure! {"name": "Ada", "age": 36}'))
    events = await collect(gw, ChatRequest("m", [Message("user", "who?")], structured=StructuredSpec(PERSON)))
    assert [json.loads(e.text) for e in events if isinstance(e, TextEvent)] == [{"name": "Ada", "age": 36}]


async def test_tool_turns_are_flattened_to_text_for_models_without_native_tools(gw, scripted):
    history = [Message("user", "weather?"),
               Message("assistant", "", tool_calls=[ToolCall("call_1", "get_weather", '{"city":"Paris"}')]),
               Message("tool", "sunny", tool_call_id="call_1", name="get_weather")]
    scripted.queue(Reply(content="Sunny in Paris."))
    result = await gw.chat(ChatRequest("plain", history, tools=[WEATHER]))
    assert result.text == "Sunny in Paris."
    sent = scripted.chat_bodies[0]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert json.loads(sent[2]["content"]) == {"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    assert sent[3]["content"] == "Result of tool get_weather: sunny"


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "acompletion"])
async def test_a_call_whose_id_arrives_after_its_name_keeps_its_arguments(make_gateway, scripted, direct):
    # Some servers open a call with its name and no id, and send the id with the arguments: one call, not two
    # (the second, nameless, used to be dropped and the tool called with `{}`).
    gw = make_gateway({"m": {"model": "openai/test-model", "api_base": scripted.base_url}}, litellm_direct=direct)
    scripted.queue(Stream(chunks=[tc(0, name="get_weather", arguments=""), tc(0, "call_7", arguments='{"city":'),
                                  tc(0, arguments='"Oslo"}')], finish_reason="tool_calls"))
    events = await collect(gw, ChatRequest("m", [Message("user", "weather?")], tools=[WEATHER]))
    assert calls_of(events) == [("call_7", "get_weather", {"city": "Oslo"})]
    assert len(scripted.chat_bodies) == 1
    assembler = ToolCallAssembler()  # a call without any id, then the next call (named, with an id) at the same index
    for delta in [ToolCallDelta(0, None, "get_time", "{}"), ToolCallDelta(0, "b", "get_weather", '{"city":"Y"}')]:
        assembler.feed(delta)
    assert [(c.name, c.arguments_json) for c in assembler.calls()] == [("get_time", "{}"), ("get_weather", '{"city":"Y"}')]


@pytest.mark.parametrize("text", ["NaN", "-Infinity", '{"a": Infinity}', "1e400", "1" + "0" * 400])
def test_nan_infinity_and_numbers_no_double_holds_are_not_json(text):
    found = structured.extract_json(text)
    assert not found.ok and "not standard JSON" in found.error
    with pytest.raises(ValueError):
        structured.loads(text)


async def test_structured_answers_and_tool_arguments_with_nan_are_repaired_not_passed_on(gw, scripted):
    # Python's json reads NaN and Infinity; JSON has neither, so a client would get text it cannot parse.
    scripted.queue(Reply(content='{"name": "Ada", "age": NaN}'), Reply(content='{"name": "Ada", "age": 36}'))
    events = await collect(gw, ChatRequest("m", [Message("user", "who?")], structured=StructuredSpec(PERSON, "p", 1)))
    assert [json.loads(e.text) for e in events if isinstance(e, TextEvent)] == [{"name": "Ada", "age": 36}]
    assert "NaN is not a JSON value" in scripted.chat_bodies[1]["messages"][-1]["content"]
    scripted.queue(Stream(chunks=[tc(0, "call_1", "get_weather", '{"city": Infinity}')], finish_reason="tool_calls"),
                   Stream(chunks=[tc(0, "call_2", "get_weather", '{"city": "Oslo"}')], finish_reason="tool_calls"))
    events = await collect(gw, ChatRequest("m", [Message("user", "weather?")], tools=[WEATHER]))
    assert calls_of(events) == [("call_2", "get_weather", {"city": "Oslo"})]
    assert "Infinity is not a JSON value" in scripted.chat_bodies[3]["messages"][-1]["content"]
