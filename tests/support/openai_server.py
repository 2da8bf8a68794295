"""A scripted OpenAI-compatible HTTP server for tests (stdlib only, real sockets, port 0).

    with ScriptedOpenAIServer() as server:
        server.queue(Reply(content="hi"), Fail(429, retry_after=0.1), Stream(chunks=[...]))
        ... litellm.acompletion(model="openai/test", api_base=server.base_url, api_key="x", ...)
        server.requests[-1].body      # the exact JSON the provider received

Each POST consumes the next scripted response; when the queue is empty the `default` callable
answers (generic mode: `echo_last_user` repeats the last user message). A response knows how to
answer both streaming and non-streaming requests, so one script serves Chat and ChatStream.

Responses:
    Reply(content, reasoning_content, reasoning, tool_calls, finish_reason, usage)
        one complete answer; streamed as chunks of `chunk_size` characters when the request streams.
    Stream(chunks=[delta dicts], finish_reason, usage, usage_every_chunk, drop_after, omit_done,
           error_chunk, chunk_delay_s, send_usage)
        an explicit list of deltas; `drop_after=k` cuts the connection after k chunks.
    Fail(status, retry_after=None, body=None)      an HTTP error.
    Hang(seconds)                                  sleeps before answering (client-side timeouts).
    Raw(status, headers, body | frames, drop_after)
        exact bytes, replayed as given: a provider's recorded wire traffic in its own format (SSE,
        NDJSON, AWS event-stream, JSON); `frames` are written one by one with chunked framing and
        `drop_after=k` cuts the connection after k frames.

Native shapes: POST .../messages answers in Anthropic's format (thinking with signature, redacted_thinking,
text and tool_use blocks), .../:generateContent in Gemini's,
/api/chat in Ollama's (non-streaming), so request bodies of those providers can be asserted too.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class RecordedRequest:
    """One request as the provider saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Reply:
    content: str = ""
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    finish_reason: str | None = "stop"
    usage: dict[str, Any] | None = None
    chunk_size: int = 8
    signature: str = "sig"
    """Anthropic shape: the signature of the thinking block (reasoning_content)."""
    redacted_thinking: list[str] | None = None
    """Anthropic shape: `data` of redacted_thinking blocks, sent after the thinking block."""


@dataclass
class Stream:
    chunks: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = "stop"
    usage: dict[str, Any] | None = None
    usage_every_chunk: bool = False
    drop_after: int | None = None
    omit_done: bool = False
    error_chunk: dict[str, Any] | None = None
    chunk_delay_s: float = 0.0
    send_usage: bool = True


@dataclass
class Fail:
    status: int
    retry_after: float | None = None
    body: dict[str, Any] | None = None


@dataclass
class Hang:
    seconds: float


@dataclass
class Raw:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    """A whole body, sent with Content-Length."""
    frames: list[bytes] = field(default_factory=list)
    """A streamed body (when `body` is None): one chunked write per frame."""
    drop_after: int | None = None


Response = Reply | Stream | Fail | Hang | Raw
DEFAULT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def echo_last_user(body: dict[str, Any]) -> Response:
    """Generic mode: answer with the last user message's text."""
    text = ""
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
    return Reply(content=text or "ok")


def _stream_from_reply(reply: Reply) -> Stream:
    chunks: list[dict[str, Any]] = []
    for key in ("reasoning_content", "reasoning"):
        value = getattr(reply, key)
        if value:
            chunks += [{key: value[i : i + reply.chunk_size]} for i in range(0, len(value), reply.chunk_size)]
    content = reply.content or ""
    chunks += [{"content": content[i : i + reply.chunk_size]} for i in range(0, len(content), reply.chunk_size)]
    for index, call in enumerate(reply.tool_calls or []):
        chunks.append({"tool_calls": [{"index": index, "id": call.get("id", f"call_{index}"), "type": "function",
                                       "function": {"name": call["name"], "arguments": call.get("arguments", "{}")}}]})
    return Stream(chunks=chunks, finish_reason=reply.finish_reason, usage=reply.usage or DEFAULT_USAGE)


class _QuietHTTPServer(ThreadingHTTPServer):
    """Clients that hang up mid-request (tests cancel calls on purpose) are not worth a traceback on stderr."""

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class ScriptedOpenAIServer:
    """Threaded HTTP server; thread-safe queue and request log."""

    def __init__(self, default: Callable[[dict[str, Any]], Response] = echo_last_user, model: str = "test-model"):
        self.default = default
        self.model = model
        self.requests: list[RecordedRequest] = []
        self.disconnects = 0
        """Streams the client abandoned (write failed mid-stream)."""
        self.disconnected = threading.Event()
        """Set at the first abandoned stream: a test waits on it instead of polling `disconnects`."""
        self.connections = 0
        """TCP connections accepted (keep-alive reuse shows as fewer connections than requests)."""
        self._queue: deque[Response] = deque()
        self.fixed: dict[str, Raw] = {}
        """path prefix -> a Raw answered every time, outside the queue (e.g. an OAuth token endpoint)."""
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "ScriptedOpenAIServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                return None

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1
                # Small SSE writes must leave at once (no Nagle + delayed-ACK 40 ms stalls).
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:
                server._handle_get(self)

            def do_POST(self) -> None:
                server._handle_post(self)

        self._httpd = _QuietHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing.set()
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()

    def __enter__(self) -> "ScriptedOpenAIServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return self._httpd.server_address[1]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    # -- scripting -------------------------------------------------------------------------------
    def queue(self, *responses: Response) -> None:
        with self._lock:
            self._queue.extend(responses)

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    @property
    def chat_bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.method == "POST"]

    def _next(self, body: dict[str, Any]) -> Response:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return self.default(body)

    # -- HTTP ------------------------------------------------------------------------------------
    def _handle_get(self, handler: BaseHTTPRequestHandler) -> None:
        payload = {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "tests"}]}
        self._send_json(handler, 200, payload)

    def _handle_post(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        fixed = next((raw for prefix, raw in self.fixed.items() if handler.path.startswith(prefix)), None)
        if fixed is not None:
            self._send_raw(handler, fixed)
            return
        with self._lock:
            self.requests.append(RecordedRequest("POST", handler.path, dict(handler.headers.items()), body))
        response = self._next(body)
        if isinstance(response, Hang):
            self._closing.wait(response.seconds)
            response = Reply(content="late")
        if isinstance(response, Raw):
            self._send_raw(handler, response)
            return
        if isinstance(response, Fail):
            headers = {"Retry-After": f"{response.retry_after:g}"} if response.retry_after is not None else {}
            error = response.body or {"error": {"message": f"scripted failure {response.status}", "type": "scripted",
                                                "code": response.status}}
            self._send_json(handler, response.status, error, headers)
            return
        path = handler.path
        if path.rstrip("/").endswith("/messages"):
            if body.get("stream"):
                self._send_anthropic_stream(handler, response)
            else:
                self._send_json(handler, 200, self._anthropic(response))
        elif ":generateContent" in path or ":streamGenerateContent" in path:
            self._send_json(handler, 200, self._gemini(response))
        elif path.startswith("/api/chat"):
            self._send_json(handler, 200, self._ollama(response))
        elif body.get("stream"):
            stream = response if isinstance(response, Stream) else _stream_from_reply(response)
            self._send_stream(handler, stream, body)
        else:
            reply = response if isinstance(response, Reply) else _reply_from_stream(response)
            self._send_json(handler, 200, self._completion(reply))

    def _send_json(self, handler: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(data)

    def _send_raw(self, handler: BaseHTTPRequestHandler, raw: Raw) -> None:
        handler.send_response(raw.status)
        for key, value in raw.headers.items():
            handler.send_header(key, value)
        if raw.body is not None:
            handler.send_header("Content-Length", str(len(raw.body)))
            handler.end_headers()
            handler.wfile.write(raw.body)
            return
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        out = _ChunkedWriter(handler.wfile)
        try:
            for index, frame in enumerate(raw.frames):
                if raw.drop_after is not None and index >= raw.drop_after:
                    out.flush()
                    handler.close_connection = True
                    return
                out.write(frame)
            out.close()
        except (BrokenPipeError, ConnectionResetError):
            with self._lock:
                self.disconnects += 1
            self.disconnected.set()

    def _chunk(self, delta: dict[str, Any], finish: str | None, usage: dict[str, Any] | None = None) -> bytes:
        chunk: dict[str, Any] = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1,
                                 "model": self.model,
                                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if usage is not None:
            chunk["usage"] = usage
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    def _send_stream(self, handler: BaseHTTPRequestHandler, stream: Stream, body: dict[str, Any]) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        out = _ChunkedWriter(handler.wfile)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        usage = stream.usage or DEFAULT_USAGE
        try:
            out.write(self._chunk({"role": "assistant", "content": ""}, None))
            for index, delta in enumerate(stream.chunks):
                if stream.drop_after is not None and index >= stream.drop_after:
                    out.flush()
                    handler.close_connection = True
                    return
                if stream.chunk_delay_s:
                    out.flush()
                    self._closing.wait(stream.chunk_delay_s)
                out.write(self._chunk(delta, None, usage if stream.usage_every_chunk else None))
            if stream.drop_after is not None and stream.drop_after >= len(stream.chunks):
                out.flush()
                handler.close_connection = True
                return
            if stream.error_chunk is not None:
                out.write(b"data: " + json.dumps({"error": stream.error_chunk}).encode() + b"\n\n")
            elif stream.finish_reason is not None:
                out.write(self._chunk({}, stream.finish_reason, usage if stream.usage_every_chunk else None))
            if include_usage and stream.send_usage and not stream.usage_every_chunk:
                final = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1,
                         "model": self.model, "choices": [], "usage": usage}
                out.write(b"data: " + json.dumps(final).encode() + b"\n\n")
            if not stream.omit_done:
                out.write(b"data: [DONE]\n\n")
            out.close()
        except (BrokenPipeError, ConnectionResetError):
            with self._lock:
                self.disconnects += 1
            self.disconnected.set()
            return

    def _completion(self, reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning_content is not None:
            message["reasoning_content"] = reply.reasoning_content
        if reply.reasoning is not None:
            message["reasoning"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": c.get("id", f"call_{i}"), "type": "function",
                 "function": {"name": c["name"], "arguments": c.get("arguments", "{}")}}
                for i, c in enumerate(reply.tool_calls)
            ]
        return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": 1, "model": self.model,
                "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
                "usage": reply.usage or DEFAULT_USAGE}

    def _anthropic(self, response: Response) -> dict[str, Any]:
        reply = response if isinstance(response, Reply) else _reply_from_stream(response)
        content: list[dict[str, Any]] = []
        if reply.reasoning_content:
            content.append({"type": "thinking", "thinking": reply.reasoning_content, "signature": reply.signature})
        for data in reply.redacted_thinking or ():
            content.append({"type": "redacted_thinking", "data": data})
        if reply.content or not reply.tool_calls:
            content.append({"type": "text", "text": reply.content})
        for i, call in enumerate(reply.tool_calls or ()):
            content.append({"type": "tool_use", "id": call.get("id", f"toolu_{i}"), "name": call["name"],
                            "input": json.loads(call.get("arguments", "{}"))})
        return {"id": "msg_scripted", "type": "message", "role": "assistant", "model": self.model, "content": content,
                "stop_reason": "tool_use" if reply.tool_calls else "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5}}

    def _send_anthropic_stream(self, handler: BaseHTTPRequestHandler, response: Response) -> None:
        """Anthropic Messages SSE: a thinking block (with signature), redacted blocks, text, tool_use blocks."""
        reply = response if isinstance(response, Reply) else _reply_from_stream(response)
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        out = _ChunkedWriter(handler.wfile)

        def event(name: str, data: dict[str, Any]) -> None:
            out.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())

        event("message_start", {"type": "message_start", "message": {
            "id": "msg_scripted", "type": "message", "role": "assistant", "model": self.model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})
        index = 0
        blocks: list[tuple[str, Any]] = []
        if reply.reasoning_content:
            blocks.append(("thinking", reply.reasoning_content))
        blocks += [("redacted_thinking", data) for data in reply.redacted_thinking or ()]
        if reply.content or not reply.tool_calls:
            blocks.append(("text", reply.content))
        blocks += [("tool_use", (i, call)) for i, call in enumerate(reply.tool_calls or ())]
        size = reply.chunk_size
        for kind, value in blocks:
            if kind == "redacted_thinking":
                event("content_block_start", {"type": "content_block_start", "index": index,
                                              "content_block": {"type": "redacted_thinking", "data": value}})
                event("content_block_stop", {"type": "content_block_stop", "index": index})
                index += 1
                continue
            if kind == "tool_use":
                i, call = value
                event("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                    "type": "tool_use", "id": call.get("id", f"toolu_{i}"), "name": call["name"], "input": {}}})
                event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta", "partial_json": call.get("arguments", "{}")}})
                event("content_block_stop", {"type": "content_block_stop", "index": index})
                index += 1
                continue
            text = value
            start = {"type": "thinking", "thinking": "", "signature": ""} if kind == "thinking" else {"type": "text", "text": ""}
            event("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})
            for i in range(0, len(text), size):
                delta = ({"type": "thinking_delta", "thinking": text[i:i + size]} if kind == "thinking"
                         else {"type": "text_delta", "text": text[i:i + size]})
                event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            if kind == "thinking":
                event("content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "signature_delta", "signature": reply.signature}})
            event("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        stop = "tool_use" if reply.tool_calls else "end_turn"
        event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                "usage": {"output_tokens": 5}})
        event("message_stop", {"type": "message_stop"})
        out.close()

    def _gemini(self, response: Response) -> dict[str, Any]:
        reply = response if isinstance(response, Reply) else _reply_from_stream(response)
        return {"candidates": [{"content": {"role": "model", "parts": [{"text": reply.content}]}, "finishReason": "STOP",
                                "index": 0}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}}

    def _ollama(self, response: Response) -> dict[str, Any]:
        reply = response if isinstance(response, Reply) else _reply_from_stream(response)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning_content:
            message["thinking"] = reply.reasoning_content
        return {"model": self.model, "created_at": "2026-01-01T00:00:00Z", "message": message, "done": True,
                "done_reason": "stop", "prompt_eval_count": 10, "eval_count": 5}


class _ChunkedWriter:
    """HTTP/1.1 chunked framing, so closing the socket early is a real protocol error (a drop)."""

    def __init__(self, raw: Any):
        self._raw = raw

    def write(self, data: bytes) -> None:
        self._raw.write(b"%x\r\n%s\r\n" % (len(data), data))
        self._raw.flush()

    def flush(self) -> None:
        self._raw.flush()

    def close(self) -> None:
        self._raw.write(b"0\r\n\r\n")
        self._raw.flush()


def _reply_from_stream(stream: Stream) -> Reply:
    content = "".join(str(c.get("content") or "") for c in stream.chunks)
    reasoning = "".join(str(c.get("reasoning_content") or c.get("reasoning") or "") for c in stream.chunks)
    return Reply(content=content, reasoning_content=reasoning or None, finish_reason=stream.finish_reason, usage=stream.usage)

