"""The gRPC surface over a real server on port 0: every RPC, typed errors, no secrets."""

from __future__ import annotations

import asyncio
import logging

import grpc
import pytest
from agentcanvas.v1 import llm_gateway_pb2 as pb
from agentcanvas.v1 import llm_gateway_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common import errors, status
from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.settings import Config
from services.common.structs import from_value, to_struct
from services.llm_gateway.app import build_definition
from tests.support.openai_server import Fail, Reply, Stream

SECRET = "sk-supersecret-key-123456"
AUTH = [("authorization", "Bearer t1")]


async def assert_upstream_abandoned(scripted) -> None:
    """The cancelled call's upstream request was dropped: the scripted server's write failed (an event
    set by its thread; the timeout is a safety net against a hang, not a timing assertion)."""
    assert await asyncio.to_thread(scripted.disconnected.wait, 20), "upstream stream was not abandoned"
    assert len(scripted.chat_bodies) == 1


@pytest.fixture
async def stub(scripted, tmp_path, litellm_module):
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({
        "auth": {"embedded": False, "tokens": [{"token": "t1", "tenant": "acme", "user": "alice"}]},
        "gateway": {
            "embedded": {"enabled": False},
            "models": {
                "": {"model": "openai/test-model", "api_base": scripted.base_url, "api_key": SECRET},
                "test@OpenAI-API-Compatible": {"model": "openai/test-model", "api_base": scripted.base_url, "api_key": SECRET},
                "claude-sonnet-4-5@Anthropic": {"model": "anthropic/claude-sonnet-4-5", "api_key": SECRET},
                "claude-local": {"model": "anthropic/claude-sonnet-4-5", "api_base": scripted.root_url, "api_key": SECRET},
            },
        },
    })
    running = await start_server(build_definition(config), config, authenticator=TokenAuthenticator.from_config(config, env={}))
    await running.ready.wait()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    yield llm_gateway_pb2_grpc.LlmGatewayStub(channel), channel
    await channel.close()
    await running.stop(0)


def user(text="hi"):
    return [pb.ChatMessage(role="user", content=text)]


async def test_health_is_serving(stub):
    _, channel = stub
    reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service="agentcanvas.v1.LlmGateway"))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_chat_stream_over_grpc_ends_with_exactly_one_finish(stub, scripted):
    client, _ = stub
    scripted.queue(Stream(chunks=[{"reasoning_content": "R"}, {"content": "Paris"}]))
    events = [e async for e in client.ChatStream(pb.ChatRequest(model="", messages=user(), with_reasoning=True), metadata=AUTH)]
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds == ["think_start", "think_delta", "think_end", "text_delta", "usage", "finish"]
    assert events[-1].finish.reason == pb.FINISH_REASON_STOP and events[-1].finish.model == "openai/test-model"
    assert events[-2].usage.total_tokens == 15


async def test_stream_errors_are_typed_finish_events_not_grpc_failures(stub, scripted):
    client, _ = stub
    scripted.queue(Stream(chunks=[{"content": "Hel"}, {"content": "lo"}], drop_after=1))
    events = [e async for e in client.ChatStream(pb.ChatRequest(model="", messages=user()), metadata=AUTH)]
    finish = events[-1].finish
    assert finish.reason == pb.FINISH_REASON_ERROR
    assert finish.error.kind == pb.CHAT_ERROR_KIND_STREAM_INTERRUPTED and finish.error.partial_text == "Hel"


async def test_chat_returns_text_reasoning_and_structured(stub, scripted):
    client, _ = stub
    scripted.queue(Reply(content='<think>hmm</think>{"city": "Paris"}'))
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    reply = await client.Chat(pb.ChatRequest(model="test@OpenAI-API-Compatible", messages=user(), with_reasoning=True,
                                             response_format=pb.ResponseFormat(json_schema=to_struct(schema), name="c")),
                              metadata=AUTH)
    assert reply.reasoning == "hmm" and from_value(reply.structured) == {"city": "Paris"}
    assert reply.finish_reason == pb.FINISH_REASON_STOP and reply.usage.calls == 1


async def test_thinking_and_generation_reach_the_provider(stub, scripted):
    client, _ = stub
    scripted.queue(Reply(content="ok"))
    await client.Chat(pb.ChatRequest(
        model="", messages=user(), thinking=pb.ThinkingConfig(mode=pb.THINKING_MODE_EFFORT, effort=pb.REASONING_EFFORT_HIGH),
        generation=pb.GenerationConfig(temperature=0.2, max_tokens=50, stop=["END"])), metadata=AUTH)
    body = scripted.chat_bodies[-1]
    assert (body["reasoning_effort"], body["temperature"], body["max_tokens"], body["stop"]) == ("high", 0.2, 50, ["END"])


@pytest.mark.parametrize("model,code", [("nope@Nowhere", grpc.StatusCode.INVALID_ARGUMENT),
                                        ("qwen-plus@Tongyi-Qianwen", grpc.StatusCode.FAILED_PRECONDITION),
                                        ("m@VLLM", grpc.StatusCode.FAILED_PRECONDITION)])
async def test_unknown_or_unconfigured_models_fail_before_streaming(stub, model, code, monkeypatch):
    monkeypatch.delenv("DASHSCOPE_API_KEY", raising=False)
    client, _ = stub
    for call in (client.Chat(pb.ChatRequest(model=model, messages=user()), metadata=AUTH),):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == code and model in caught.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in client.ChatStream(pb.ChatRequest(model=model, messages=user()), metadata=AUTH):
            pass
    assert caught.value.code() == code


async def test_bad_requests_name_the_field(stub):
    client, _ = stub
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.Chat(pb.ChatRequest(model="", messages=[pb.ChatMessage(role="robot", content="x")]), metadata=AUTH)
    converted = status.from_rpc_error(caught.value)
    assert isinstance(converted, errors.InvalidArgumentError)
    assert [v.field for v in converted.violations] == ["messages[0].role"]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.Chat(pb.ChatRequest(model=""), metadata=AUTH)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("generation,field", [
    (pb.GenerationConfig(temperature=-0.1), "generation.temperature"),
    (pb.GenerationConfig(temperature=2.5), "generation.temperature"),
    (pb.GenerationConfig(temperature=float("nan")), "generation.temperature"),
    (pb.GenerationConfig(top_p=1.5), "generation.top_p"),
    (pb.GenerationConfig(top_p=-0.5), "generation.top_p"),
    (pb.GenerationConfig(max_tokens=-1), "generation.max_tokens"),
    (pb.GenerationConfig(max_tokens=0), "generation.max_tokens"),
    (pb.GenerationConfig(presence_penalty=2.5), "generation.presence_penalty"),
    (pb.GenerationConfig(frequency_penalty=-3), "generation.frequency_penalty"),
    (pb.GenerationConfig(frequency_penalty=float("inf")), "generation.frequency_penalty"),
    (pb.GenerationConfig(stop=["END", ""]), "generation.stop[1]"),
])
async def test_out_of_range_sampling_is_invalid_argument_naming_the_field(stub, scripted, generation, field):
    client, _ = stub
    request = pb.ChatRequest(model="", messages=user(), generation=generation)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.Chat(request, metadata=AUTH)
    converted = status.from_rpc_error(caught.value)
    assert isinstance(converted, errors.InvalidArgumentError) and field in caught.value.details()
    assert [v.field for v in converted.violations] == [field]
    for call in (client.ChatStream, client.ChatStreamBatched):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in call(request, metadata=AUTH):
                pass
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field in caught.value.details()
    assert scripted.chat_bodies == []  # nothing reached the provider


async def test_every_bad_sampling_field_is_reported_and_the_bounds_are_accepted(stub, scripted):
    client, _ = stub
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.Chat(pb.ChatRequest(model="", messages=user(), generation=pb.GenerationConfig(
            temperature=3, top_p=2, max_tokens=-5)), metadata=AUTH)
    fields = [v.field for v in status.from_rpc_error(caught.value).violations]
    assert fields == ["generation.temperature", "generation.top_p", "generation.max_tokens"]
    scripted.queue(Reply(content="ok"))
    reply = await client.Chat(pb.ChatRequest(model="", messages=user(), generation=pb.GenerationConfig(
        temperature=2, top_p=0, max_tokens=1, presence_penalty=-2, frequency_penalty=2, seed=-1)), metadata=AUTH)
    assert reply.text == "ok"
    body = scripted.chat_bodies[-1]
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (2, 0, 1)


async def test_missing_token_is_unauthenticated(stub):
    client, _ = stub
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.ListModels(pb.ListModelsRequest())
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_list_models_reports_configuration_without_keys(stub):
    client, _ = stub
    reply = await client.ListModels(pb.ListModelsRequest(), metadata=AUTH)
    by_id = {m.llm_id: m for m in reply.models}
    assert set(by_id) == {"", "test@OpenAI-API-Compatible", "claude-sonnet-4-5@Anthropic", "claude-local"}
    assert by_id[""].is_default and not by_id["test@OpenAI-API-Compatible"].is_default
    assert by_id["claude-sonnet-4-5@Anthropic"].provider == "Anthropic" and by_id["claude-sonnet-4-5@Anthropic"].supports_reasoning
    assert SECRET not in str(reply)


async def test_count_tokens_with_trimming(stub):
    client, _ = stub
    messages = [pb.ChatMessage(role="system", content="Be brief.")] + [
        pb.ChatMessage(role="user" if i % 2 == 0 else "assistant", content="word " * 100) for i in range(6)
    ] + [pb.ChatMessage(role="user", content="last?")]
    reply = await client.CountTokens(pb.CountTokensRequest(model="", messages=messages, max_tokens=150), metadata=AUTH)
    assert reply.tokenizer == "cl100k_base" and reply.tokens > 600
    assert 0 < reply.trimmed_tokens <= 150
    assert reply.trimmed_messages[0].content == "Be brief." and reply.trimmed_messages[-1].content == "last?"
    claude = await client.CountTokens(pb.CountTokensRequest(model="claude-sonnet-4-5@Anthropic", messages=messages), metadata=AUTH)
    assert claude.tokenizer == "claude" and not claude.trimmed_messages


async def test_keys_never_appear_in_errors_or_logs(stub, scripted, caplog):
    client, _ = stub
    caplog.set_level(logging.DEBUG)
    scripted.queue(Fail(401, body={"error": {"message": f"Incorrect API key provided: {SECRET}"}}))
    reply = await client.Chat(pb.ChatRequest(model="", messages=user()), metadata=AUTH)
    assert reply.error.kind == pb.CHAT_ERROR_KIND_AUTH
    assert SECRET not in reply.error.message
    assert SECRET not in caplog.text
    assert scripted.requests[-1].headers.get("authorization") == f"Bearer {SECRET}"


async def test_client_cancellation_stops_the_upstream_request(stub, scripted):
    client, _ = stub
    scripted.queue(Stream(chunks=[{"content": "word "}] * 400, chunk_delay_s=0.02))
    call = client.ChatStream(pb.ChatRequest(model="", messages=user()), metadata=AUTH)
    first = await call.read()
    assert first.WhichOneof("event") == "text_delta"
    call.cancel()
    await assert_upstream_abandoned(scripted)


async def test_batched_stream_carries_exactly_the_events_of_chat_stream(stub, scripted):
    client, _ = stub
    chunks = [{"reasoning_content": "why "}] * 50 + [{"content": "word "}] * 300
    request = pb.ChatRequest(model="", messages=user(), with_reasoning=True)
    scripted.queue(Stream(chunks=chunks))
    plain = [e async for e in client.ChatStream(request, metadata=AUTH)]
    scripted.queue(Stream(chunks=chunks))
    batches = [b async for b in client.ChatStreamBatched(request, metadata=AUTH)]
    flat = [e for b in batches for e in b.events]
    assert all(b.events for b in batches)
    assert flat == plain
    assert [e.WhichOneof("event") for e in flat].count("finish") == 1 and flat[-1].WhichOneof("event") == "finish"
    assert sum(e.WhichOneof("event") == "text_delta" for e in flat) == 300


async def test_batched_stream_fails_like_chat_stream_before_streaming(stub):
    client, _ = stub
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in client.ChatStreamBatched(pb.ChatRequest(model="nope@Nowhere", messages=user()), metadata=AUTH):
            pass
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "nope@Nowhere" in caught.value.details()


async def test_batched_stream_cancellation_stops_the_upstream_request(stub, scripted):
    client, _ = stub
    scripted.queue(Stream(chunks=[{"content": "word "}] * 400, chunk_delay_s=0.02))
    call = client.ChatStreamBatched(pb.ChatRequest(model="", messages=user()), metadata=AUTH)
    first = await call.read()
    assert first.events[0].WhichOneof("event") == "text_delta"
    call.cancel()
    await assert_upstream_abandoned(scripted)


async def test_signed_thinking_blocks_over_grpc_and_back(stub, scripted):
    client, _ = stub
    thinking = pb.ThinkingConfig(mode=pb.THINKING_MODE_ENABLED)
    tool = pb.ToolDefinition(name="get_weather", parameters=to_struct({"type": "object", "properties": {"city": {"type": "string"}}}))
    reply_script = Reply(reasoning_content="Use the tool.", signature="c2ln", redacted_thinking=["RU5D"],
                         tool_calls=[{"id": "toolu_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}])
    scripted.queue(reply_script)
    reply = await client.Chat(pb.ChatRequest(model="claude-local", messages=user("Weather?"), thinking=thinking, tools=[tool]),
                              metadata=AUTH)
    expected = [pb.ThinkingBlock(thinking="Use the tool.", signature="c2ln"), pb.ThinkingBlock(redacted_data="RU5D")]
    assert list(reply.thinking_blocks) == expected and reply.finish_reason == pb.FINISH_REASON_TOOL_CALLS
    scripted.queue(reply_script)
    events = [e async for e in client.ChatStream(pb.ChatRequest(model="claude-local", messages=user("Weather?"),
                                                                thinking=thinking, tools=[tool]), metadata=AUTH)]
    assert [e.thinking_block for e in events if e.WhichOneof("event") == "thinking_block"] == expected
    scripted.queue(Reply(content="Sunny."))
    history = user("Weather?") + [
        pb.ChatMessage(role="assistant", tool_calls=reply.tool_calls, thinking_blocks=reply.thinking_blocks),
        pb.ChatMessage(role="tool", tool_call_id=reply.tool_calls[0].id, name="get_weather", content="sunny")]
    await client.Chat(pb.ChatRequest(model="claude-local", messages=history, thinking=thinking, tools=[tool]), metadata=AUTH)
    assert scripted.chat_bodies[-1]["messages"][1]["content"][:2] == [
        {"type": "thinking", "thinking": "Use the tool.", "signature": "c2ln"}, {"type": "redacted_thinking", "data": "RU5D"}]
