"""LLM gateway benchmark, everything against one local scripted OpenAI-compatible server in one run.

    python -m bench.gateway [--requests 200] [--stream-chunks 3000]

Lines printed (one JSON object each):
* ttft_added_ms: time to the first answer token through the gateway (gRPC ChatStream -> litellm's
  provider layer -> HTTP) minus the time to the first token of the same stream read directly over
  HTTP; p50/p99 (ChatStream), batched_p50/p99 (ChatStreamBatched), both raw p50s side by side, and a
  bare in-process litellm.acompletion's p50 (what the full litellm call costs on its own).
* events_per_s: delta events (text/think deltas) per second delivered to a gRPC client by ONE gateway
  process over ChatStreamBatched, median of --runs streams of --stream-chunks chunks; the unbatched
  ChatStream rate and the peer (raw HTTP chunks per second from the same server) alongside.
* events_per_s_core: the gateway's own pipeline (splitter, tools, usage, proto encoding) fed from
  memory, i.e. the gateway without litellm and sockets.
* think_parser_mb_s: think-splitter throughput on tagged text, in 1 KiB chunks (value) and 16-char
  deltas (delta_16_mb_s).
* startup: spawn -> gRPC port answering (NOT_SERVING) and spawn -> SERVING (litellm imported).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import httpx
import yaml
from agentcanvas.v1 import llm_gateway_pb2 as pb
from agentcanvas.v1 import llm_gateway_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.llm_gateway.core import think
from tests.support.openai_server import Reply, ScriptedOpenAIServer, Stream

TOKEN = "bench-token"
AUTH = [("authorization", f"Bearer {TOKEN}")]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _emit(**fields: object) -> None:
    print(json.dumps({"bench": "gateway", **fields}), flush=True)


def _config(data_dir: Path, base_url: str) -> Path:
    config = {
        "data_dir": str(data_dir),
        "log": {"level": "WARNING"},
        "auth": {"embedded": False, "tokens": [{"token": TOKEN, "tenant": "bench", "user": "bench"}]},
        "gateway": {"embedded": {"enabled": False},
                    "models": {"": {"model": "openai/bench-model", "api_base": base_url, "api_key": "k-bench"}}},
    }
    path = data_dir / "gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


async def _health(channel: grpc.aio.Channel) -> int | None:
    try:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=0.5)
        return reply.status
    except grpc.aio.AioRpcError:
        return None


async def _spawn(config: Path) -> tuple[subprocess.Popen[bytes], int, float, float]:
    port = _free_port()
    env = dict(os.environ, NO_PROXY="127.0.0.1,localhost")
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "services.llm_gateway", "--config", str(config), "--port", str(port)], env=env)
    listening = serving = 0.0
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status = await _health(channel)
            if status is not None and not listening:
                listening = time.perf_counter() - started
            if status == health_pb2.HealthCheckResponse.SERVING:
                serving = time.perf_counter() - started
                break
            await asyncio.sleep(0.005)
    return process, port, listening, serving


async def _direct_ttft(client: httpx.AsyncClient, url: str) -> float:
    body = {"model": "bench-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    started = time.perf_counter()
    elapsed = None
    async with client.stream("POST", url, json=body) as response:
        async for line in response.aiter_lines():
            if elapsed is None and line.startswith("data: ") and '"content": "t' in line:
                elapsed = time.perf_counter() - started
    if elapsed is None:
        raise RuntimeError("no token")
    return elapsed


async def _litellm_ttft(base_url: str) -> float:
    """The same stream read with a bare litellm.acompletion in this process: litellm's share of the cost."""
    from services.llm_gateway.adapters.litellm_provider import load_litellm

    litellm = load_litellm()
    started = time.perf_counter()
    first = None
    response = await litellm.acompletion(model="openai/bench-model", messages=[{"role": "user", "content": "hi"}],
                                         api_base=base_url, api_key="k-bench", stream=True, num_retries=0, max_retries=0)
    async for chunk in response:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - started
    assert first is not None
    return first


async def _gateway_ttft(stub: llm_gateway_pb2_grpc.LlmGatewayStub, batched: bool = False) -> float:
    request = pb.ChatRequest(model="", messages=[pb.ChatMessage(role="user", content="hi")])
    started = time.perf_counter()
    first = None
    if batched:
        async for batch in stub.ChatStreamBatched(request, metadata=AUTH):
            if first is None and any(e.WhichOneof("event") == "text_delta" for e in batch.events):
                first = time.perf_counter() - started
    else:
        async for event in stub.ChatStream(request, metadata=AUTH):
            if first is None and event.WhichOneof("event") == "text_delta":
                first = time.perf_counter() - started
    assert first is not None
    return first


async def _stream_rate(stub: llm_gateway_pb2_grpc.LlmGatewayStub, batched: bool) -> tuple[float, int, int, int]:
    """(delta events per second, delta events, all events, gRPC messages) of one long stream."""
    request = pb.ChatRequest(model="", messages=[pb.ChatMessage(role="user", content="hi")])
    deltas = events = messages = 0
    started = time.perf_counter()
    if batched:
        async for batch in stub.ChatStreamBatched(request, metadata=AUTH):
            messages += 1
            for event in batch.events:
                events += 1
                deltas += event.WhichOneof("event") in ("text_delta", "think_delta")
    else:
        async for event in stub.ChatStream(request, metadata=AUTH):
            messages += 1
            events += 1
            deltas += event.WhichOneof("event") in ("text_delta", "think_delta")
    return deltas / (time.perf_counter() - started), deltas, events, messages


async def bench_ttft_and_events(server: ScriptedOpenAIServer, stub: llm_gateway_pb2_grpc.LlmGatewayStub, requests: int,
                                stream_chunks: int, runs: int) -> None:
    server.default = lambda body: Stream(chunks=[{"content": "tok"}, {"content": " en"}])
    url = f"{server.base_url}/chat/completions"
    async with httpx.AsyncClient(trust_env=False) as client:
        for _ in range(10):  # warm both paths (connections, litellm caches)
            await _direct_ttft(client, url)
            await _gateway_ttft(stub)
            await _gateway_ttft(stub, batched=True)
        direct, through, batched = [], [], []
        for _ in range(requests):  # interleaved so all see the same machine load
            direct.append(await _direct_ttft(client, url))
            through.append(await _gateway_ttft(stub))
            batched.append(await _gateway_ttft(stub, batched=True))
        direct_p50 = _pct(direct, 0.5)
        added = [(g - d) * 1000 for g, d in zip(through, direct)]
        added_batched = [(g - d) * 1000 for g, d in zip(batched, direct)]
        for _ in range(5):
            await _litellm_ttft(server.base_url)
        litellm_only = [await _litellm_ttft(server.base_url) for _ in range(min(requests, 100))]
        _emit(metric="ttft_added_ms", p50=round(_pct(added, 0.5), 3), p99=round(_pct(added, 0.99), 3),
              batched_p50=round(_pct(added_batched, 0.5), 3), batched_p99=round(_pct(added_batched, 0.99), 3),
              direct_p50_ms=round(direct_p50 * 1000, 3), gateway_p50_ms=round(_pct(through, 0.5) * 1000, 3),
              acompletion_alone_p50_ms=round(_pct(litellm_only, 0.5) * 1000, 3),
              acompletion_added_p50_ms=round((_pct(litellm_only, 0.5) - direct_p50) * 1000, 3),
              requests=requests, goal_p50_ms=2.0)

        server.default = lambda body: Stream(chunks=[{"content": "x"}] * stream_chunks)
        body = {"model": "bench-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        raw_rates = []
        for _ in range(runs):
            started = time.perf_counter()
            chunks = 0
            pending = b""
            async with client.stream("POST", url, json=body) as response:
                async for raw in response.aiter_bytes():  # the same raw-byte SSE split the gateway uses
                    lines = (pending + raw).split(b"\n")
                    pending = lines.pop()
                    chunks += sum(line.startswith(b"data: ") for line in lines)
            raw_rates.append(chunks / (time.perf_counter() - started))
    await _stream_rate(stub, batched=True)  # warm
    batched_runs = [await _stream_rate(stub, batched=True) for _ in range(runs)]
    plain_runs = [await _stream_rate(stub, batched=False) for _ in range(runs)]
    median = sorted(batched_runs)[len(batched_runs) // 2]
    _emit(metric="events_per_s", value=round(median[0]), rpc="ChatStreamBatched", delta_events=median[1], events=median[2],
          grpc_messages=median[3], runs=[round(r[0]) for r in batched_runs],
          chat_stream_unbatched=round(sorted(r[0] for r in plain_runs)[len(plain_runs) // 2]),
          peer_raw_http_chunks_per_s=round(sorted(raw_rates)[len(raw_rates) // 2]), goal=20000)


async def bench_core_events(stream_chunks: int) -> None:
    """The gateway pipeline without litellm: an in-memory provider feeding the real core + proto encoding."""
    from services.llm_gateway.core.gateway import LlmGateway
    from services.llm_gateway.core.registry import ModelRegistry
    from services.llm_gateway.core.settings import GatewaySettings
    from services.llm_gateway.core.types import ChatRequest, Message, ProviderChunk, Usage
    from services.llm_gateway.server import event_pb

    class MemoryProvider:
        async def stream(self, call):
            for i in range(stream_chunks):
                yield ProviderChunk(content="x")
            yield ProviderChunk(finish_reason="stop", usage=Usage(10, stream_chunks))

        def cost_usd(self, model, usage):
            return 0.0

    registry = ModelRegistry({"": {"model": "openai/mem", "api_base": "http://unused/v1"}}, env={})
    core = LlmGateway(registry, MemoryProvider(), GatewaySettings(), embedded=None)
    request = ChatRequest(model="", messages=[Message("user", "hi")])
    started = time.perf_counter()
    events = 0
    async for event in await core.chat_stream(request):
        event_pb(event).SerializeToString()
        events += 1
    elapsed = time.perf_counter() - started
    _emit(metric="events_per_s_core", value=round(events / elapsed), events=events, goal=20000)


def bench_think_parser() -> None:
    block = ("<think>" + "Let me reason about this step by step, weighing each option carefully. " * 20 + "</think>"
             + "The answer is forty-two, and here is why it matters for the question asked. " * 20)
    text = block * 200
    size_mb = len(text.encode()) / 1e6
    for label, size in (("value", 1024), ("delta_16_mb_s", 16)):
        pieces = [text[i:i + size] for i in range(0, len(text), size)]
        best = float("inf")
        for _ in range(3):
            splitter = think.ThinkSplitter(think.ThinkFormat(mode=think.TAG))
            started = time.perf_counter()
            for piece in pieces:
                splitter.feed_content(piece)
            splitter.finish()
            best = min(best, time.perf_counter() - started)
        if label == "value":
            result = {"value": round(size_mb / best, 1)}
        else:
            result["delta_16_mb_s"] = round(size_mb / best, 1)
    _emit(metric="think_parser_mb_s", **result, input_mb=round(size_mb, 2), chunk_bytes=1024, goal=50)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--stream-chunks", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=5, help="long streams per RPC (the median is reported)")
    options = parser.parse_args()
    bench_think_parser()
    await bench_core_events(options.stream_chunks)
    with ScriptedOpenAIServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.default = lambda body: Reply(content="ok")
        config = _config(Path(tmp), server.base_url)
        process, port, listening, serving = await _spawn(config)
        try:
            _emit(metric="startup_s", listening=round(listening, 3), serving=round(serving, 3), goal_serving_s=2.0)
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = llm_gateway_pb2_grpc.LlmGatewayStub(channel)
                await bench_ttft_and_events(server, stub, options.requests, options.stream_chunks, options.runs)
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    asyncio.run(main())
