"""ChatStream and Chat through litellm over real HTTP: think events, usage, retries, typed errors."""

from __future__ import annotations

import pytest

from services.llm_gateway.core.types import (
    ChatRequest, ErrorKind, FinishEvent, FinishReason, Message, TextEvent, ThinkDeltaEvent, Thinking, ThinkingMode,
    UsageEvent,
)
from tests.llm_gateway.conftest import collect, shape
from tests.support.openai_server import Fail, Hang, Reply, Stream


def req(model="m", text="hi", **kw) -> ChatRequest:
    return ChatRequest(model=model, messages=[Message("user", text)], **kw)


@pytest.fixture(params=[True, False], ids=["direct", "acompletion"])
def gw(request, make_gateway, scripted):
    """Every case runs on both provider paths: litellm's provider layer direct, and litellm.acompletion."""
    return make_gateway(litellm_direct=request.param, models={"m": {"model": "openai/test-model", "api_base": scripted.base_url},
                         "r1": {"model": "openai/deepseek-r1-distill-qwen-7b", "api_base": scripted.base_url},
                         "vllm": {"model": "hosted_vllm/some-model", "api_base": scripted.base_url},
                         "backup": {"model": "openai/backup-model", "api_base": scripted.base_url}})


async def test_reasoning_content_field_becomes_typed_think_events(gw, scripted):
    scripted.queue(Stream(chunks=[{"reasoning_content": "Let me"}, {"reasoning_content": " think"}, {"content": "Paris"},
                                  {"content": "."}]))
    events = await collect(gw, req())
    assert shape(events) == [("start",), ("think", "Let me think"), ("end", False), ("text", "Paris."), ("usage",),
                             ("finish", FinishReason.STOP, None)]


async def test_vllm_reasoning_field_is_read_too(gw, scripted):
    scripted.queue(Stream(chunks=[{"reasoning": "R"}, {"content": "A"}]))
    assert shape(await collect(gw, req("vllm")))[:4] == [("start",), ("think", "R"), ("end", False), ("text", "A")]


async def test_inline_tags_split_across_chunks_are_parsed(gw, scripted):
    scripted.queue(Stream(chunks=[{"content": "<thi"}, {"content": "nk>R"}, {"content": "</thi"}, {"content": "nk>A"}]))
    assert shape(await collect(gw, req()))[:4] == [("start",), ("think", "R"), ("end", False), ("text", "A")]


async def test_implicit_open_family_reasoning_is_not_shown_as_answer(gw, scripted):
    scripted.queue(Stream(chunks=[{"content": "Reasoning here"}, {"content": "</think>"}, {"content": "Answer"}]))
    assert shape(await collect(gw, req("r1")))[:4] == [("start",), ("think", "Reasoning here"), ("end", False), ("text", "Answer")]


async def test_implicit_open_family_with_a_reasoning_field_keeps_the_answer(gw, scripted):
    # An R1 distill behind vLLM's reasoning parser: the whole answer used to end up as reasoning (truncated).
    scripted.queue(Stream(chunks=[{"reasoning_content": "Reasoning here"}, {"content": "Answer"}]))
    assert shape(await collect(gw, req("r1"))) == [("start",), ("think", "Reasoning here"), ("end", False), ("text", "Answer"),
                                                   ("usage",), ("finish", FinishReason.STOP, None)]
    scripted.queue(Reply(content="Answer", reasoning_content="Reasoning here"))
    result = await gw.chat(req("r1"))
    assert (result.text, result.reasoning) == ("Answer", "Reasoning here")


async def test_literal_tag_in_content_stays_text_with_reasoning_fields(gw, scripted):
    scripted.queue(Stream(chunks=[{"reasoning_content": "R"}, {"content": "Use <think>"}, {"content": " tags"}]))
    assert shape(await collect(gw, req()))[:4] == [("start",), ("think", "R"), ("end", False), ("text", "Use <think> tags")]


async def test_unclosed_block_with_length_finish_is_truncated(gw, scripted):
    scripted.queue(Stream(chunks=[{"content": "<think>long"}, {"content": " reasoning"}], finish_reason="length"))
    assert shape(await collect(gw, req())) == [("start",), ("think", "long reasoning"), ("end", True), ("usage",),
                                               ("finish", FinishReason.LENGTH, None)]


async def test_with_reasoning_false_suppresses_think_events(gw, scripted):
    scripted.queue(Stream(chunks=[{"reasoning_content": "R"}, {"content": "<b>A</b>"}]))
    assert shape(await collect(gw, req(with_reasoning=False)))[:1] == [("text", "<b>A</b>")]


async def test_non_streaming_chat_returns_text_and_reasoning_separately(gw, scripted):
    scripted.queue(Reply(content="<think>plan</think>The answer"))
    result = await gw.chat(req())
    assert (result.text, result.reasoning, result.finish_reason) == ("The answer", "plan", FinishReason.STOP)
    scripted.queue(Reply(content="Answer", reasoning_content="field reasoning"))
    result = await gw.chat(req())
    assert (result.text, result.reasoning) == ("Answer", "field reasoning")
    assert scripted.chat_bodies[-1].get("stream") in (None, False)
    scripted.queue(Reply(content="Answer", reasoning_content="hidden"))
    assert (await gw.chat(req(with_reasoning=False))).reasoning == ""


async def test_usage_reports_reasoning_and_cached_tokens(gw, scripted):
    usage = {"prompt_tokens": 30, "completion_tokens": 20, "total_tokens": 50,
             "completion_tokens_details": {"reasoning_tokens": 12}, "prompt_tokens_details": {"cached_tokens": 8}}
    scripted.queue(Stream(chunks=[{"reasoning_content": "R"}, {"content": "A"}], usage=usage))
    events = await collect(gw, req())
    (u,) = [e.usage for e in events if isinstance(e, UsageEvent)]
    assert (u.prompt_tokens, u.completion_tokens, u.reasoning_tokens, u.cached_tokens, u.total_tokens, u.calls) == (30, 20, 12, 8, 50, 1)


async def test_cumulative_usage_on_every_chunk_is_counted_once(gw, scripted):
    usage = {"prompt_tokens": 7, "completion_tokens": 9, "total_tokens": 16}
    scripted.queue(Stream(chunks=[{"content": "a"}, {"content": "b"}, {"content": "c"}], usage=usage, usage_every_chunk=True))
    (u,) = [e.usage for e in await collect(gw, req()) if isinstance(e, UsageEvent)]
    assert (u.prompt_tokens, u.completion_tokens) == (7, 9)


async def test_cost_comes_from_the_local_cost_map(make_gateway, scripted):
    gw = make_gateway({"gpt": {"model": "openai/gpt-4o", "api_base": scripted.base_url, "api_key": "sk-test-not-real"}})
    scripted.queue(Reply(content="x", usage={"prompt_tokens": 1000, "completion_tokens": 1000, "total_tokens": 2000}))
    result = await gw.chat(req("gpt"))
    assert result.usage.cost_usd == pytest.approx(0.0025 + 0.01)


# -- retries and typed errors ------------------------------------------------------------------------
async def test_429_with_retry_after_is_retried_and_the_wait_honours_it(gw, scripted, sleeps):
    scripted.queue(Fail(429, retry_after=1.5), Reply(content="ok"))
    events = await collect(gw, req())
    assert shape(events)[-1] == ("finish", FinishReason.STOP, None)
    assert len(scripted.chat_bodies) == 2
    assert sleeps.delays and sleeps.delays[0] >= 1.5


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_5xx_is_retried_with_growing_backoff(gw, scripted, sleeps, status):
    scripted.queue(Fail(status), Fail(status), Reply(content="ok"))
    assert shape(await collect(gw, req()))[0] == ("text", "ok")
    assert len(scripted.chat_bodies) == 3
    assert len(sleeps.delays) == 2 and all(0 < d <= 4.0 for d in sleeps.delays)


@pytest.mark.parametrize("status,kind", [(400, ErrorKind.BAD_REQUEST), (401, ErrorKind.AUTH), (403, ErrorKind.AUTH),
                                         (404, ErrorKind.MODEL_NOT_FOUND)])
async def test_client_errors_are_not_retried(gw, scripted, sleeps, status, kind):
    scripted.queue(Fail(status, body={"error": {"message": "rate limit server timeout 429 500", "type": "x"}}))
    events = await collect(gw, req())
    finish = events[-1]
    assert isinstance(finish, FinishEvent) and finish.reason == FinishReason.ERROR
    assert finish.error.kind == kind and finish.error.http_status == status and not finish.error.retryable
    assert len(scripted.chat_bodies) == 1 and sleeps.delays == []


async def test_a_500_whose_message_mentions_400_is_still_a_server_error(gw, scripted):
    scripted.queue(*[Fail(500, body={"error": {"message": "bad request req_4001 invalid key"}})] * 4)
    finish = (await collect(gw, req()))[-1]
    assert finish.error.kind == ErrorKind.SERVER and finish.error.retryable
    assert len(scripted.chat_bodies) == 4  # max_attempts


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "acompletion"])
async def test_timeouts_are_retried(make_gateway, scripted, sleeps, direct):
    # The hang outlasts any timeout (the server releases it when it stops); the retried call's answer
    # gets 2 s, plenty for a loaded machine.
    gw = make_gateway({"m": {"model": "openai/test-model", "api_base": scripted.base_url}}, request_timeout_s=2.0,
                      litellm_direct=direct)
    scripted.queue(Hang(600), Reply(content="ok"))
    events = await collect(gw, req())
    assert shape(events)[0] == ("text", "ok") and len(sleeps.delays) == 1


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "acompletion"])
async def test_connection_refused_is_a_retryable_connection_error(make_gateway, sleeps, direct):
    gw = make_gateway({"m": {"model": "openai/test-model", "api_base": "http://127.0.0.1:9/v1"}}, litellm_direct=direct,
                      retry={"max_attempts": 2, "initial_backoff_s": 0.01})
    finish = (await collect(gw, req()))[-1]
    assert finish.error.kind == ErrorKind.CONNECTION and finish.error.retryable and len(sleeps.delays) == 1


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "acompletion"])
async def test_total_retry_wait_is_bounded(make_gateway, scripted, sleeps, direct):
    gw = make_gateway({"m": {"model": "openai/test-model", "api_base": scripted.base_url}}, litellm_direct=direct,
                      retry={"max_attempts": 10, "max_total_wait_s": 3.0})
    scripted.queue(*[Fail(429, retry_after=2)] * 10)
    finish = (await collect(gw, req()))[-1]
    assert finish.error.kind == ErrorKind.RATE_LIMITED
    assert sum(sleeps.delays) <= 3.0 and len(scripted.chat_bodies) == 2


async def test_drop_after_output_is_never_silently_retried(gw, scripted, sleeps):
    scripted.queue(Stream(chunks=[{"content": "Hello "}, {"content": "wor"}, {"content": "ld"}], drop_after=2))
    events = await collect(gw, req())
    finish = events[-1]
    assert [e.text for e in events if isinstance(e, TextEvent)] == ["Hello ", "wor"]
    assert finish.reason == FinishReason.ERROR and finish.error.kind == ErrorKind.STREAM_INTERRUPTED
    assert finish.error.partial_text == "Hello wor"
    assert len(scripted.chat_bodies) == 1 and sleeps.delays == []
    assert sum(isinstance(e, FinishEvent) for e in events) == 1


async def test_drop_before_any_output_is_retried(gw, scripted):
    scripted.queue(Stream(chunks=[{"content": "x"}], drop_after=0), Reply(content="fine"))
    assert shape(await collect(gw, req()))[0] == ("text", "fine")
    assert len(scripted.chat_bodies) == 2


async def test_done_without_finish_reason_is_a_typed_incomplete_stream(gw, scripted):
    scripted.queue(Stream(chunks=[{"content": "partial"}], finish_reason=None))
    finish = (await collect(gw, req()))[-1]
    assert finish.error.kind == ErrorKind.INCOMPLETE_STREAM and finish.error.partial_text == "partial"


async def test_error_object_inside_a_200_stream_is_a_typed_error_not_text(gw, scripted):
    scripted.queue(Stream(chunks=[{"content": "a"}], error_chunk={"message": "engine died", "code": 500}))
    events = await collect(gw, req())
    assert events[-1].reason == FinishReason.ERROR
    assert "engine died" not in "".join(e.text for e in events if isinstance(e, TextEvent))


async def test_fallback_model_is_used_when_the_primary_fails_before_output(gw, scripted, sleeps):
    scripted.queue(Fail(401), Reply(content="from backup"))
    events = await collect(gw, req(fallback_models=["backup"]))
    assert shape(events)[0] == ("text", "from backup")
    assert events[-1].model == "openai/backup-model"
    assert [b["model"] for b in scripted.chat_bodies] == ["test-model", "backup-model"]


async def test_chat_reports_errors_in_the_result(gw, scripted):
    scripted.queue(Fail(400))
    result = await gw.chat(req())
    assert result.finish_reason == FinishReason.ERROR and result.error.kind == ErrorKind.BAD_REQUEST


async def test_history_think_blocks_are_removed_and_unknown_keys_never_sent(gw, scripted):
    history = [Message("user", "q1"), Message("assistant", "<think>old reasoning</think>old answer", reasoning_content="r"),
               Message("user", "q2")]
    scripted.queue(Reply(content="ok"))
    await gw.chat(ChatRequest(model="m", messages=history, thinking=Thinking(ThinkingMode.DEFAULT)))
    body = scripted.chat_bodies[-1]
    assert body["messages"][1] == {"role": "assistant", "content": "old answer"}
    assert not {"llm_id", "model_type", "request_id"} & set(body)


async def test_reasoning_and_content_in_one_delta_keep_their_order(gw, scripted):
    scripted.queue(Stream(chunks=[{"reasoning_content": "R", "content": "A"}, {"content": "B"}]))
    assert shape(await collect(gw, req()))[:4] == [("start",), ("think", "R"), ("end", False), ("text", "AB")]


async def test_missing_provider_usage_is_estimated(gw, scripted):
    scripted.queue(Stream(chunks=[{"content": "hello world"}], send_usage=False))
    (u,) = [e.usage for e in await collect(gw, req()) if isinstance(e, UsageEvent)]
    assert u.prompt_tokens > 0 and u.completion_tokens > 0 and u.calls == 1


async def test_anthropic_thinking_blocks_stream_as_think_events(make_gateway, scripted):
    gw = make_gateway({"claude": {"model": "anthropic/claude-sonnet-4-5", "api_base": scripted.root_url, "api_key": "k-test"}})
    scripted.queue(Reply(content="Paris.", reasoning_content="The user asks about France.", chunk_size=5))
    events = await collect(gw, req("claude", thinking=Thinking(ThinkingMode.ENABLED)))
    assert shape(events) == [("start",), ("think", "The user asks about France."), ("end", False), ("text", "Paris."),
                             ("ThinkingBlockEvent",), ("usage",), ("finish", FinishReason.STOP, None)]
    assert scripted.chat_bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 2048}


async def test_repeated_deltas_and_empty_think_blocks_end_to_end(gw, scripted):
    scripted.queue(Stream(chunks=[{"content": "<think>"}, {"content": " \n"}, {"content": "</think>\n\n"}, {"content": "ha"},
                                  {"content": "ha"}, {"content": "!"}]))
    assert shape(await collect(gw, req())) == [("text", "haha!"), ("usage",), ("finish", FinishReason.STOP, None)]


async def test_many_identical_chunks_are_content_on_both_paths(gw, scripted):
    # litellm.acompletion used to end such a stream after 100 repeats ("the model is repeating the same chunk")
    scripted.queue(Stream(chunks=[{"content": "| --- "}] * 150))
    events = await collect(gw, req())
    assert shape(events) == [("text", "| --- " * 150), ("usage",), ("finish", FinishReason.STOP, None)]


@pytest.mark.parametrize("text", ["<think>Let me see.</think>The answer is 4.", "\n<think>a<b</think>\n\nx</think>y",
                                  "<think>unclosed at the end", "plain <think>literal</think> text"])
async def test_any_chunking_through_litellm_matches_the_non_streamed_answer(gw, scripted, text):
    import random

    rng = random.Random(text)
    scripted.queue(Reply(content=text))
    whole = await gw.chat(req(with_reasoning=True))
    for _ in range(6):
        cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randint(1, 8))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        scripted.queue(Stream(chunks=[{"content": p} for p in pieces]))
        events = await collect(gw, req(with_reasoning=True))
        streamed_text = "".join(e.text for e in events if isinstance(e, TextEvent))
        streamed_reasoning = "".join(e.text for e in events if isinstance(e, ThinkDeltaEvent))
        assert (streamed_text, streamed_reasoning) == (whole.text, whole.reasoning), pieces


async def test_direct_path_streams_over_one_pooled_connection(make_gateway, scripted):
    gw = make_gateway({"m": {"model": "openai/test-model", "api_base": scripted.base_url}})
    for i in range(5):
        scripted.queue(Stream(chunks=[{"content": f"answer {i}"}]))
        assert shape(await collect(gw, req()))[0] == ("text", f"answer {i}")
    assert gw.provider.direct_calls == 5
    assert len(scripted.chat_bodies) == 5 and scripted.connections == 1  # each body read to its end, then reused


async def test_non_openai_providers_and_non_streamed_calls_use_acompletion(make_gateway, scripted):
    gw = make_gateway({"m": {"model": "openai/test-model", "api_base": scripted.base_url},
                       "claude": {"model": "anthropic/claude-sonnet-4-5", "api_base": scripted.root_url, "api_key": "k"}})
    scripted.queue(Reply(content="plain"), Reply(content="from claude"))
    assert (await gw.chat(req())).text == "plain"
    assert shape(await collect(gw, req("claude")))[0] == ("text", "from claude")
    assert gw.provider.direct_calls == 0


async def test_models_litellm_bridges_to_the_responses_api_leave_the_direct_path(make_gateway, scripted):
    gw = make_gateway({"pro": {"model": "openai/gpt-5-pro", "api_base": scripted.base_url},
                       "m": {"model": "openai/test-model", "api_base": scripted.base_url}})
    await collect(gw, req("pro"))
    assert gw.provider.direct_calls == 0 and scripted.requests[-1].path == "/v1/responses"  # litellm's own choice
    scripted.queue(Stream(chunks=[{"content": "chat"}]))
    assert shape(await collect(gw, req("m")))[0] == ("text", "chat")
    assert gw.provider.direct_calls == 1 and scripted.requests[-1].path == "/v1/chat/completions"
