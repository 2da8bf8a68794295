"""Hostile input and provider misbehaviour over real gRPC: bad requests are INVALID_ARGUMENT naming the field
before anything reaches the provider; provider garbage ends the stream with a typed error, never INTERNAL, a
traceback or a key in a message or log line."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from agentcanvas.v1 import llm_gateway_pb2 as pb
from agentcanvas.v1 import llm_gateway_pb2_grpc

from services.common import errors, status
from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.settings import Config
from services.common.structs import to_struct
from services.llm_gateway.app import build_definition
from services.llm_gateway.core.structured import MAX_JSON_DEPTH
from tests.support.openai_server import Fail, Hang, Reply, ScriptedOpenAIServer, Stream, _ChunkedWriter

SECRET = "sk-hostile-secret-key-987654"
AUTH = [("authorization", "Bearer t1")]
OBJ = {"type": "object", "properties": {"a": {"type": "string"}}}


@dataclass
class RawSSE(Stream):
    """A 200 text/event-stream whose body is exactly these lines (malformed SSE on purpose)."""

    raw: list[str | bytes] = field(default_factory=list)


@dataclass
class RawReply(Reply):
    """A non-streamed 200 answer whose JSON body is exactly `payload`."""

    payload: Any = None


class RawScriptedServer(ScriptedOpenAIServer):
    """The scripted server, plus raw SSE bodies and raw JSON answers."""

    def _send_stream(self, handler, stream, body):
        if not isinstance(stream, RawSSE):
            return super()._send_stream(handler, stream, body)
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        out = _ChunkedWriter(handler.wfile)
        for line in stream.raw:
            out.write(line if isinstance(line, bytes) else line.encode())
        out.close()

    def _completion(self, reply):
        return reply.payload if isinstance(reply, RawReply) else super()._completion(reply)


def sse(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    chunk = {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    return "data: " + json.dumps({**chunk, **extra}) + "\n\n"


DONE = "data: [DONE]\n\n"


@pytest.fixture
def raw_server():
    with RawScriptedServer() as server:
        yield server


async def _serve(server: ScriptedOpenAIServer, tmp_path, direct: bool, retry: dict[str, Any]):
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({
        "auth": {"embedded": False, "tokens": [{"token": "t1", "tenant": "acme", "user": "alice"}]},
        "gateway": {
            "embedded": {"enabled": False}, "litellm_direct": direct, "retry": retry,
            "models": {
                "": {"model": "openai/test-model", "api_base": server.base_url, "api_key": SECRET},
                "other": {"model": "openai/other-model", "api_base": server.base_url, "api_key": SECRET},
            },
        },
    })
    running = await start_server(build_definition(config), config, authenticator=TokenAuthenticator.from_config(config, env={}))
    await running.ready.wait()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    return running, channel


@pytest.fixture(params=[True, False], ids=["direct", "acompletion"])
async def client(request, raw_server, tmp_path, litellm_module):
    running, channel = await _serve(raw_server, tmp_path, request.param, {"max_attempts": 1})
    yield llm_gateway_pb2_grpc.LlmGatewayStub(channel)
    await channel.close()
    await running.stop(0)


@pytest.fixture(params=[True, False], ids=["direct", "acompletion"])
async def retrying_client(request, raw_server, tmp_path, litellm_module):
    """Retries with a negligible backoff (the outcome, not the wait, is asserted) and a 5 s budget of waits."""
    running, channel = await _serve(raw_server, tmp_path, request.param, {
        "max_attempts": 3, "initial_backoff_s": 0.001, "max_backoff_s": 0.001, "max_total_wait_s": 5})
    yield llm_gateway_pb2_grpc.LlmGatewayStub(channel)
    await channel.close()
    await running.stop(0)


def user(text: str = "hi") -> list[pb.ChatMessage]:
    return [pb.ChatMessage(role="user", content=text)]


def tool(name: str = "t", parameters: dict[str, Any] | None = None) -> pb.ToolDefinition:
    return pb.ToolDefinition(name=name, parameters=to_struct(OBJ if parameters is None else parameters))


async def stream(client, request: pb.ChatRequest) -> list[pb.ChatEvent]:
    return [e async for e in client.ChatStream(request, metadata=AUTH)]


# -- bad input: INVALID_ARGUMENT naming the field, nothing sent ------------------------------------------------
BAD_REQUESTS = [
    ("tool_schema_invalid", pb.ChatRequest(tools=[tool(parameters={"type": "notatype"})]), "tools[0].parameters"),
    ("tool_schema_wrong_shape", pb.ChatRequest(tools=[tool(parameters={"type": "object", "properties": 5})]), "tools[0].parameters"),
    ("tool_schema_unresolvable_ref", pb.ChatRequest(tools=[tool(parameters={"$ref": "#/$defs/missing"})]), "tools[0].parameters"),
    ("tool_schema_remote_ref", pb.ChatRequest(tools=[tool(parameters={"$ref": "http://127.0.0.1:9/s.json"})]), "tools[0].parameters"),
    ("tool_schema_nan", pb.ChatRequest(tools=[tool(parameters={"type": "number", "maximum": float("nan")})]),
     "tools[0].parameters.maximum"),
    ("tool_duplicate_name", pb.ChatRequest(tools=[tool("t"), tool("t")]), "tools[1].name"),
    ("tool_name_with_space", pb.ChatRequest(tools=[tool("my tool")]), "tools[0].name"),
    ("tool_name_65_chars", pb.ChatRequest(tools=[tool("a" * 65)]), "tools[0].name"),
    ("tool_choice_unknown_tool", pb.ChatRequest(tools=[tool("t")], tool_choice="nope"), "tool_choice"),
    ("tool_choice_without_tools", pb.ChatRequest(tool_choice="required"), "tool_choice"),
    ("schema_invalid", pb.ChatRequest(response_format=pb.ResponseFormat(json_schema=to_struct({"type": "bogus"}))),
     "response_format.json_schema"),
    ("schema_infinity", pb.ChatRequest(response_format=pb.ResponseFormat(
        json_schema=to_struct({"type": "object", "properties": {"n": {"maximum": float("inf")}}}))),
     "response_format.json_schema.properties.n.maximum"),
    ("response_format_without_schema", pb.ChatRequest(response_format=pb.ResponseFormat(name="person", max_repairs=1)),
     "response_format.json_schema"),
    ("max_repairs_negative", pb.ChatRequest(response_format=pb.ResponseFormat(json_schema=to_struct(OBJ), max_repairs=-1)),
     "response_format.max_repairs"),
    ("max_repairs_huge", pb.ChatRequest(response_format=pb.ResponseFormat(json_schema=to_struct(OBJ), max_repairs=10**6)),
     "response_format.max_repairs"),
    ("thinking_mode_unknown", pb.ChatRequest(thinking=pb.ThinkingConfig(mode=99)), "thinking.mode"),
    ("thinking_effort_unknown", pb.ChatRequest(thinking=pb.ThinkingConfig(mode=pb.THINKING_MODE_EFFORT, effort=7)),
     "thinking.effort"),
    ("thinking_budget_negative", pb.ChatRequest(thinking=pb.ThinkingConfig(mode=pb.THINKING_MODE_BUDGET, budget_tokens=-5)),
     "thinking.budget_tokens"),
    ("thinking_budget_zero", pb.ChatRequest(thinking=pb.ThinkingConfig(mode=pb.THINKING_MODE_BUDGET)), "thinking.budget_tokens"),
    ("fallback_repeated", pb.ChatRequest(fallback_models=["other", "other"]), "fallback_models[1]"),
    ("fallback_is_primary", pb.ChatRequest(model="other", fallback_models=["other"]), "fallback_models[0]"),
    ("fallback_unknown", pb.ChatRequest(fallback_models=["no-such-model"]), "fallback_models[0]"),
    ("model_with_whitespace", pb.ChatRequest(model=" other "), "model"),
    ("empty_content_part", pb.ChatRequest(messages=[pb.ChatMessage(role="user", parts=[pb.ContentPart()])]), "messages[0].parts[0]"),
    ("tool_turn_without_call_id", pb.ChatRequest(messages=user() + [pb.ChatMessage(role="tool", content="42")]),
     "messages[1].tool_call_id"),
    ("history_call_without_name", pb.ChatRequest(messages=user() + [
        pb.ChatMessage(role="assistant", tool_calls=[pb.ToolCall(id="c", arguments_json="{}")])]),
     "messages[1].tool_calls[0].name"),
    ("history_call_without_id", pb.ChatRequest(messages=user() + [
        pb.ChatMessage(role="assistant", tool_calls=[pb.ToolCall(name="t", arguments_json="{}")])]),
     "messages[1].tool_calls[0].id"),
    ("image_on_a_system_turn", pb.ChatRequest(messages=[
        pb.ChatMessage(role="system", parts=[pb.ContentPart(image_url="data:image/png;base64,AA==")])] + user()),
     "messages[0].parts[0]"),
    ("history_arguments_too_deep", pb.ChatRequest(messages=user() + [
        pb.ChatMessage(role="assistant", tool_calls=[pb.ToolCall(id="c", name="t", arguments_json="[" * 100_000)])]),
     "messages[1].tool_calls[0].arguments_json"),
]


@pytest.mark.parametrize("request_,field_path", [(r, f) for _, r, f in BAD_REQUESTS], ids=[n for n, _, _ in BAD_REQUESTS])
async def test_bad_input_is_invalid_argument_naming_the_field(client, raw_server, request_, field_path):
    request = pb.ChatRequest()
    request.CopyFrom(request_)
    if not request.messages:
        request.messages.extend(user())
    for call in (client.Chat(request, metadata=AUTH),):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        converted = status.from_rpc_error(caught.value)
        assert isinstance(converted, errors.InvalidArgumentError), caught.value.details()
        assert field_path in [v.field for v in converted.violations]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stream(client, request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field_path in caught.value.details()
    assert raw_server.chat_bodies == []


async def test_valid_tool_names_schemas_and_choices_are_accepted(client, raw_server):
    schema = {"$defs": {"city": {"type": "string"}}, "type": "object", "properties": {"city": {"$ref": "#/$defs/city"}}}
    raw_server.queue(Reply(tool_calls=[{"name": "get-weather_2", "arguments": '{"city": "Paris"}'}]))
    reply = await client.Chat(pb.ChatRequest(model="", messages=user(), tools=[tool("get-weather_2", schema), tool("x" * 64)],
                                             tool_choice="get-weather_2"), metadata=AUTH)
    assert [(c.name, c.arguments_json) for c in reply.tool_calls] == [("get-weather_2", '{"city": "Paris"}')]
    assert raw_server.chat_bodies[-1]["tool_choice"] == {"type": "function", "function": {"name": "get-weather_2"}}


# -- provider misbehaviour: typed error events, never INTERNAL -----------------------------------------------
async def test_malformed_sse_before_output_is_a_server_error_on_both_paths(client, raw_server):
    for body in (["data: {not json\n\n", sse(finish="stop"), DONE], ["data: 5\n\n", DONE], ['data: {"choices": "x"}\n\n', DONE],
                 [b'data: {"choices": [{"delta": {"content": "\xff"}}]}\n\n', DONE]):
        raw_server.queue(RawSSE(raw=body))
        events = await stream(client, pb.ChatRequest(model="", messages=user()))
        finish = events[-1].finish
        assert (finish.reason, finish.error.kind) == (pb.FINISH_REASON_ERROR, pb.CHAT_ERROR_KIND_SERVER), body
        assert "Traceback" not in finish.error.message


async def test_malformed_sse_after_output_is_stream_interrupted_with_the_partial_text(client, raw_server):
    raw_server.queue(RawSSE(raw=[sse({"content": "Hel"}), "data: {not json\n\n", sse(finish="stop"), DONE]))
    finish = (await stream(client, pb.ChatRequest(model="", messages=user())))[-1].finish
    assert finish.error.kind == pb.CHAT_ERROR_KIND_STREAM_INTERRUPTED and finish.error.partial_text == "Hel"


@pytest.mark.parametrize("body", [[], [DONE], [": keep-alive\n\n", DONE]], ids=["empty", "done-only", "comment-only"])
async def test_a_200_stream_with_nothing_in_it_is_incomplete_on_both_paths(client, raw_server, body):
    # litellm.acompletion used to turn these into a STOP with no text: an answer nobody gave.
    raw_server.queue(RawSSE(raw=body))
    finish = (await stream(client, pb.ChatRequest(model="", messages=user())))[-1].finish
    assert (finish.reason, finish.error.kind) == (pb.FINISH_REASON_ERROR, pb.CHAT_ERROR_KIND_INCOMPLETE_STREAM)
    raw_server.queue(RawSSE(raw=[sse(finish="stop"), DONE]))  # the provider's own empty answer is one
    assert (await stream(client, pb.ChatRequest(model="", messages=user())))[-1].finish.reason == pb.FINISH_REASON_STOP


async def test_stream_without_done_or_finish_reason_is_incomplete(client, raw_server):
    raw_server.queue(RawSSE(raw=[sse({"content": "a"})]))
    finish = (await stream(client, pb.ChatRequest(model="", messages=user())))[-1].finish
    assert finish.error.kind == pb.CHAT_ERROR_KIND_INCOMPLETE_STREAM and finish.error.partial_text == "a"
    raw_server.queue(RawSSE(raw=[sse({"content": "a"}), sse(finish="stop")]))  # finish reason, no [DONE]: complete
    events = await stream(client, pb.ChatRequest(model="", messages=user()))
    assert events[-1].finish.reason == pb.FINISH_REASON_STOP


async def test_garbage_usage_figures_are_clamped_not_fatal(client, raw_server, caplog):
    caplog.set_level(logging.WARNING)
    raw_server.queue(RawSSE(raw=[sse({"content": "a"}), sse(finish="stop", usage={"prompt_tokens": 10**30, "completion_tokens": -5}),
                                 DONE]))
    events = await stream(client, pb.ChatRequest(model="", messages=user()))
    usage = next(e.usage for e in events if e.WhichOneof("event") == "usage")
    assert events[-1].finish.reason == pb.FINISH_REASON_STOP
    assert (usage.prompt_tokens, usage.completion_tokens) == (2**31 - 1, 0)
    assert "Traceback" not in caplog.text


async def test_non_string_tool_call_fields_from_the_provider_do_not_crash(client, raw_server):
    call = {"index": 0, "id": 7, "function": {"name": 5, "arguments": {"a": "x"}}}
    raw_server.queue(RawSSE(raw=[sse({"content": 5, "tool_calls": [call]}), sse(finish="tool_calls"), DONE]),
                     Reply(content="done"))
    events = await stream(client, pb.ChatRequest(model="", messages=user(), tools=[tool("t")]))
    # the unknown tool "5" (direct path) goes back to the model once; litellm drops such a delta: either way an answer
    assert events[-1].finish.reason == pb.FINISH_REASON_STOP


async def test_finish_tool_calls_without_a_readable_call_is_stop(client, raw_server):
    raw_server.queue(RawSSE(raw=[sse({"content": "plain"}), sse({"tool_calls": [{"index": 0, "function": "x"}]}),
                                 sse(finish="tool_calls"), DONE]))
    events = await stream(client, pb.ChatRequest(model="", messages=user(), tools=[tool("t")]))
    assert [e.text_delta.text for e in events if e.WhichOneof("event") == "text_delta"] == ["plain"]
    assert events[-1].finish.reason == pb.FINISH_REASON_STOP


async def test_non_streamed_answer_without_choices_is_a_server_error(client, raw_server):
    raw_server.queue(RawReply(payload={"id": "x", "object": "chat.completion", "choices": []}))
    reply = await client.Chat(pb.ChatRequest(model="", messages=user()), metadata=AUTH)
    assert reply.finish_reason == pb.FINISH_REASON_ERROR and reply.error.kind == pb.CHAT_ERROR_KIND_SERVER


async def test_provider_error_messages_carry_no_traceback(client, raw_server):
    raw_server.queue(RawReply(payload={"id": "x", "object": "chat.completion",
                                       "choices": [{"index": 0, "message": None, "finish_reason": "stop"}]}))
    reply = await client.Chat(pb.ChatRequest(model="", messages=user()), metadata=AUTH)
    assert reply.error.kind == pb.CHAT_ERROR_KIND_SERVER
    assert "Traceback" not in reply.error.message and ".py" not in reply.error.message


# The direct path only: litellm's own response parsing (the acompletion path) would recurse into such text.
@pytest.mark.parametrize("client", [True], ids=["direct"], indirect=True)
async def test_deeply_nested_json_from_the_model_is_refused_without_recursion(client, raw_server):
    deep = "[" * 50_000 + "]" * 50_000
    # tool arguments: refused by validation (never parsed) and sent back to the model, which then answers
    raw_server.queue(Reply(tool_calls=[{"name": "t", "arguments": deep}], chunk_size=100_000), Reply(content="fine"))
    events = await stream(client, pb.ChatRequest(model="", messages=user(), tools=[tool("t")]))
    assert [e.text_delta.text for e in events if e.WhichOneof("event") == "text_delta"] == ["fine"]
    assert f"deeper than {MAX_JSON_DEPTH}" in raw_server.chat_bodies[1]["messages"][-1]["content"]
    # structured output: a typed INVALID_STRUCTURED_OUTPUT after the repairs
    raw_server.queue(Reply(content=deep, chunk_size=100_000), Reply(content=deep, chunk_size=100_000))
    events = await stream(client, pb.ChatRequest(model="", messages=user(), response_format=pb.ResponseFormat(
        json_schema=to_struct(OBJ), max_repairs=1)))
    error = events[-1].finish.error
    assert error.kind == pb.CHAT_ERROR_KIND_INVALID_STRUCTURED_OUTPUT and "deeper than" in error.message


LONE = '"a\\ud800b"'  # JSON text of a string with a lone surrogate: valid JSON syntax, but no UTF-8 string


def raw_delta(delta_json: str, finish: str = "null") -> str:
    return 'data: {"choices": [{"index": 0, "delta": %s, "finish_reason": %s}]}\n\n' % (delta_json, finish)


async def test_a_lone_surrogate_escape_from_the_provider_is_a_malformed_event_not_internal(client, raw_server):
    # gRPC strings are UTF-8: such text used to end the stream with INTERNAL. Now it is malformed, like invalid UTF-8.
    for delta in ('{"content": %s}' % LONE, '{"reasoning_content": %s}' % LONE,
                  '{"tool_calls": [{"index": 0, "id": "c", "function": {"name": "t", "arguments": %s}}]}' % LONE):
        raw_server.queue(RawSSE(raw=[raw_delta(delta), sse(finish="stop"), DONE]))
        finish = (await stream(client, pb.ChatRequest(model="", messages=user(), with_reasoning=True, tools=[tool("t")])))[-1].finish
        assert (finish.reason, finish.error.kind) == (pb.FINISH_REASON_ERROR, pb.CHAT_ERROR_KIND_SERVER), delta
        assert "lone surrogate" in finish.error.message
    raw_server.queue(RawSSE(raw=[sse({"content": "Hel"}), raw_delta('{"content": %s}' % LONE), sse(finish="stop"), DONE]))
    finish = (await stream(client, pb.ChatRequest(model="", messages=user())))[-1].finish
    assert finish.error.kind == pb.CHAT_ERROR_KIND_STREAM_INTERRUPTED and finish.error.partial_text == "Hel"
    raw_server.queue(RawSSE(raw=['data: {"error": {"message": %s, "code": 500}}\n\n' % LONE]))
    finish = (await stream(client, pb.ChatRequest(model="", messages=user())))[-1].finish
    assert finish.error.kind == pb.CHAT_ERROR_KIND_SERVER and "a?b" in finish.error.message
    raw_server.queue(RawReply(payload={"id": "x", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "a\ud800b"}, "finish_reason": "stop"}]}))
    reply = await client.Chat(pb.ChatRequest(model="", messages=user()), metadata=AUTH)
    assert reply.error.kind == pb.CHAT_ERROR_KIND_SERVER and "lone surrogate" in reply.error.message


async def test_structured_json_with_a_lone_surrogate_escape_reaches_the_client_escaped(client, raw_server):
    request = pb.ChatRequest(model="", messages=user(), response_format=pb.ResponseFormat(json_schema=to_struct(OBJ)))
    raw_server.queue(Reply(content='{"a": "x\\ud800"}'))
    events = await stream(client, request)
    assert [json.loads(e.text_delta.text) for e in events if e.WhichOneof("event") == "text_delta"] == [{"a": "x\ud800"}]
    raw_server.queue(Reply(content='{"a": "x\\ud800"}'))
    reply = await client.Chat(request, metadata=AUTH)
    assert reply.finish_reason == pb.FINISH_REASON_STOP and reply.structured.struct_value["a"] == "x?"


async def test_a_null_delta_is_empty_and_a_mistyped_field_is_a_malformed_event(client, raw_server):
    raw_server.queue(RawSSE(raw=[raw_delta("null"), sse({"content": "a"}), sse(finish="stop"), DONE]))
    events = await stream(client, pb.ChatRequest(model="", messages=user()))
    assert [e.text_delta.text for e in events if e.WhichOneof("event") == "text_delta"] == ["a"]
    assert events[-1].finish.reason == pb.FINISH_REASON_STOP  # the direct path used to fail it as CONNECTION
    # litellm (acompletion) trips over a reasoning object with a TypeError: the provider's fault, not BAD_REQUEST
    raw_server.queue(RawSSE(raw=[raw_delta('{"reasoning_content": {"x": 1}, "content": "a"}'), sse(finish="stop"), DONE]))
    finish = (await stream(client, pb.ChatRequest(model="", messages=user())))[-1].finish
    assert finish.reason == pb.FINISH_REASON_STOP or finish.error.kind == pb.CHAT_ERROR_KIND_SERVER, finish
    assert "expected str" not in finish.error.message


async def test_the_key_is_in_no_error_or_log_line_across_failures(client, raw_server, caplog):
    caplog.set_level(logging.DEBUG)
    raw_server.queue(RawSSE(raw=["data: {not json\n\n"]), RawReply(payload={"choices": []}))
    texts = [(await stream(client, pb.ChatRequest(model="", messages=user())))[-1].finish.error.message,
             (await client.Chat(pb.ChatRequest(model="", messages=user()), metadata=AUTH)).error.message]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.Chat(pb.ChatRequest(model="", messages=user(), tools=[tool("bad name")]), metadata=AUTH)
    texts.append(caught.value.details())
    assert all(texts) and not any(SECRET in t for t in texts)
    assert SECRET not in caplog.text


async def test_429_without_retry_after_is_retried_with_the_gateways_backoff(retrying_client, raw_server):
    raw_server.queue(Fail(429), Reply(content="ok"))
    events = await stream(retrying_client, pb.ChatRequest(model="", messages=user()))
    assert events[-1].finish.reason == pb.FINISH_REASON_STOP and len(raw_server.chat_bodies) == 2


async def test_429_whose_retry_after_exceeds_the_wait_budget_is_returned_not_waited(retrying_client, raw_server):
    raw_server.queue(Fail(429, retry_after=3600))
    events = await stream(retrying_client, pb.ChatRequest(model="", messages=user()))
    error = events[-1].finish.error
    assert (error.kind, error.retryable, error.http_status) == (pb.CHAT_ERROR_KIND_RATE_LIMITED, True, 429)
    assert len(raw_server.chat_bodies) == 1


async def test_the_callers_deadline_ends_a_hanging_provider_call(client, raw_server):
    raw_server.queue(Hang(3600))  # released when the scripted server stops
    for call in (client.ChatStream(pb.ChatRequest(model="", messages=user()), metadata=AUTH, timeout=0.5),):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in call:
                pass
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert len(raw_server.chat_bodies) == 1
