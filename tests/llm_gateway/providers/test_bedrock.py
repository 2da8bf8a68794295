"""Amazon Bedrock Converse (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html,
API_runtime_Converse.html, CommonErrors), with a Bedrock API key as bearer token.

ConverseStream answers `application/vnd.amazon.eventstream`: binary AWS event-stream messages
(docs.aws.amazon.com/transcribe/latest/dg/event-stream.html): total length, headers length, prelude CRC32,
headers (`:event-type`, `:content-type`, `:message-type`, each name/type 7/value), a JSON payload (with AWS's
`p` padding field), and a CRC32 of the whole message. Events: messageStart, contentBlockStart (toolUse head),
contentBlockDelta (text, reasoningContent text/signature, toolUse input fragments), contentBlockStop,
messageStop (stopReason) and metadata (usage). Errors are JSON `{"message"}` with `x-amzn-ErrorType`."""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

from services.llm_gateway.core.types import ChatRequest, FinishReason, Message, Usage
from tests.llm_gateway.providers.harness import ABSENT, Profile, Tokens, Turn, conformance, pieces
from tests.support.openai_server import Raw

PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
ERRORS = {400: "ValidationException", 403: "UnrecognizedClientException", 429: "ThrottlingException",
          500: "InternalServerException"}


def header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return bytes([len(raw_name)]) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value


def message(event_type: str, payload: dict[str, Any]) -> bytes:
    """One AWS event-stream message (big-endian lengths, CRC32 of the prelude and of the whole message)."""
    headers = header(":event-type", event_type) + header(":content-type", "application/json") + header(":message-type", "event")
    body = json.dumps({**payload, "p": PADDING}).encode()
    prelude = struct.pack(">II", 12 + len(headers) + len(body) + 4, len(headers))
    head = prelude + struct.pack(">I", zlib.crc32(prelude))
    return head + headers + body + struct.pack(">I", zlib.crc32(head + headers + body))


class Bedrock(Profile):
    name = "Bedrock (Converse)"
    families = ()
    echoes = True
    signs_reasoning = True
    tool_ids = True
    auth_status = 403  # AWS answers bad credentials (UnrecognizedClientException) with 403
    na = {"reasoning_only_promoted": "with thinking off Claude sends no reasoningContent blocks, so an answer "
                                     "cannot arrive as reasoning"}
    # Claude on Bedrock (family claude): thinking goes in additionalModelRequestFields
    thinking_bodies = {"on": {"additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": 2048}}},
                       "off": {"additionalModelRequestFields": ABSENT},
                       "budget": {"additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": 3000}}}}
    finish_reasons = [("end_turn", FinishReason.STOP), ("max_tokens", FinishReason.LENGTH),
                      ("tool_use", FinishReason.TOOL_CALLS), ("stop_sequence", FinishReason.STOP),
                      ("guardrail_intervened", FinishReason.CONTENT_FILTER), ("content_filtered", FinishReason.CONTENT_FILTER)]
    usage_in = Tokens(prompt=56, completion=40, cached=64)
    # inputTokens excludes cache reads: litellm adds cacheReadInputTokens to prompt_tokens
    usage_out = Usage(prompt_tokens=120, completion_tokens=40, reasoning_tokens=0, cached_tokens=64)
    model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"

    def models(self, server):
        entry = {"model": f"bedrock/converse/{self.model}", "api_base": server.root_url, "api_key": "ABSKbedrock-test-key",
                 "family": "claude"}
        return {"m": entry, "think": entry}

    def setup(self, server, monkeypatch):
        monkeypatch.setenv("AWS_REGION", "us-east-1")

    def stop_reason(self, turn: Turn) -> str:
        return turn.finish or ("tool_use" if turn.calls else "end_turn")

    def stream(self, turn: Turn) -> Raw:
        frames = [message("messageStart", {"role": "assistant"})]
        index = 0
        if turn.reasoning:
            frames += [message("contentBlockDelta", {"contentBlockIndex": index, "delta": {"reasoningContent": {"text": p}}})
                       for p in pieces(turn.reasoning)]
            frames += [message("contentBlockDelta", {"contentBlockIndex": index,
                                                     "delta": {"reasoningContent": {"signature": turn.signature}}}),
                       message("contentBlockStop", {"contentBlockIndex": index})]
            index += 1
        if turn.text:
            frames += [message("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": p}}) for p in pieces(turn.text)]
            frames.append(message("contentBlockStop", {"contentBlockIndex": index}))
            index += 1
        for call in turn.calls:
            frames.append(message("contentBlockStart", {"contentBlockIndex": index,
                                                        "start": {"toolUse": {"toolUseId": call.id, "name": call.name}}}))
            frames += [message("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": p}}})
                       for p in pieces(json.dumps(call.arguments), 6)]
            frames.append(message("contentBlockStop", {"contentBlockIndex": index}))
            index += 1
        u = turn.usage
        frames += [message("messageStop", {"stopReason": self.stop_reason(turn)}),
                   message("metadata", {"usage": {"inputTokens": u.prompt, "outputTokens": u.completion,
                                                  "totalTokens": u.prompt + u.cached + u.completion,
                                                  "cacheReadInputTokens": u.cached, "cacheWriteInputTokens": 0},
                                        "metrics": {"latencyMs": 412}})]
        return Raw(headers={"Content-Type": "application/vnd.amazon.eventstream", "x-amzn-RequestId": "req-1"}, frames=frames)

    def answer(self, turn: Turn) -> Raw:
        content: list[dict[str, Any]] = []
        if turn.reasoning:
            content.append({"reasoningContent": {"reasoningText": {"text": turn.reasoning, "signature": turn.signature}}})
        if turn.text:
            content.append({"text": turn.text})
        content += [{"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.arguments}} for c in turn.calls]
        u = turn.usage
        body = {"output": {"message": {"role": "assistant", "content": content}}, "stopReason": self.stop_reason(turn),
                "usage": {"inputTokens": u.prompt, "outputTokens": u.completion, "totalTokens": u.prompt + u.completion},
                "metrics": {"latencyMs": 412}}
        return Raw(headers={"Content-Type": "application/json"}, body=json.dumps(body).encode())

    def error(self, status: int, retry_after: float | None = None) -> Raw:
        headers = {"Content-Type": "application/json", "x-amzn-ErrorType": f"{ERRORS.get(status, 'InternalServerException')}:"
                   "http://internal.amazon.com/coral/com.amazon.bedrock/", "x-amzn-RequestId": "req-1"}
        if retry_after is not None:
            headers["Retry-After"] = f"{retry_after:g}"
        return Raw(status=status, headers=headers, body=json.dumps({"message": f"provider says {status}"}).encode())

    def tool_names(self, body):
        return {tool["toolSpec"]["name"] for tool in body["toolConfig"]["tools"]}

    def check_history(self, body):
        messages = body["messages"]
        assert "You answer briefly." in json.dumps(body["system"])
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        turn = messages[1]["content"]
        reasoning = [b["reasoningContent"] for b in turn if "reasoningContent" in b]
        assert reasoning == [{"reasoningText": {"text": "Need the weather tool.", "signature": "c2lnLWhpc3Rvcnk="}}]
        assert {"text": "Checking."} in turn
        (call,) = [b["toolUse"] for b in turn if "toolUse" in b]
        assert (call["toolUseId"], call["name"], call["input"]) == ("call_w1", "get_weather", {"city": "Paris"})
        (result,) = [b["toolResult"] for b in messages[2]["content"] if "toolResult" in b]
        assert result["toolUseId"] == "call_w1" and "sunny, 21 C" in json.dumps(result)
        assert "<think>" not in json.dumps(body)


PROFILE = Bedrock()
test_conformance = conformance(PROFILE)


async def test_converse_stream_path_and_bearer_key(wire, make_gateway, monkeypatch):
    PROFILE.setup(wire, monkeypatch)
    wire.queue(PROFILE.stream(Turn(text="ok")))
    gw = make_gateway(PROFILE.models(wire))
    events = [e async for e in await gw.chat_stream(ChatRequest(model="m", messages=[Message("user", "hi")]))]
    assert events[-1].reason == FinishReason.STOP
    (request,) = wire.requests
    assert request.path == f"/model/{PROFILE.model}/converse-stream".replace(":", "%3A")
    assert {k.lower(): v for k, v in request.headers.items()}["authorization"] == "Bearer ABSKbedrock-test-key"


async def test_a_corrupt_event_stream_message_is_an_error_not_text(wire, make_gateway, monkeypatch):
    PROFILE.setup(wire, monkeypatch)
    raw = PROFILE.stream(Turn(text="Hello there."))
    broken = bytearray(raw.frames[1])
    broken[-1] ^= 0xFF  # the message CRC no longer matches (the first content message)
    raw.frames[1] = bytes(broken)
    wire.queue(raw, PROFILE.stream(Turn(text="Hello there.")))
    gw = make_gateway(PROFILE.models(wire))
    events = [e async for e in await gw.chat_stream(ChatRequest(model="m", messages=[Message("user", "hi")]))]
    # the CRC check fails on the first message, before any output: a provider fault, retried on a fresh stream
    assert "".join(getattr(e, "text", "") for e in events[:-1]) == "Hello there." and events[-1].reason == FinishReason.STOP
    assert len(wire.requests) == 2
