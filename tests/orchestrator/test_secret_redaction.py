"""Configured secrets never leave through upstream text: every upstream here answers with an error that
echoes the credentials it was sent (as Tavily's 401 does: "Incorrect API key provided: Bearer tvly-..."),
and no secret may appear in RunEvents, store rows, log lines, exported spans or the messages the Agent
sends to its model.

The whole stack runs for real in this process: the canvas_store on SQLite, the llm_gateway talking HTTP to
a scripted OpenAI-compatible server, the orchestrator with its tools pointed at a local HTTP server that
speaks the web APIs' error shape, a local MCP server (streamable HTTP, configured with a header) and a
local Sandbox servicer. The keys are deliberately not shaped like the patterns the redactor also knows
(`sk-...`, `tvly-...`): only the configured values can mask them.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
import uvicorn
from agentcanvas.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc
from google.protobuf import json_format
from mcp.server.mcpserver.exceptions import ToolError

from services.canvas_store.app import build_service as build_store
from services.common import logging as service_logging
from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.settings import Config
from services.common.structs import to_struct
from services.llm_gateway import app as gateway_app
from services.orchestrator import app as orchestrator_app
from tests.orchestrator.support.harness import dsl
from tests.orchestrator_tools.support.mcp_server import build_server as build_mcp_server
from tests.orchestrator_tools.support.sandbox_servicer import start_sandbox
from tests.support.openai_server import Fail, Reply, ScriptedOpenAIServer

SECRETS = {
    "tavily": "TAVILY-CANARY-3f9a2c71",      # through tools.tavily.api_key_env
    "google": "SERPAPI-CANARY-8d21e4b0",     # SerpApi takes it as a query parameter
    "bing": "BING-CANARY-55c0a9d3",
    "ragflow": "RAGFLOW-CANARY-a7e13f08",
    "mcp": "MCP-HEADER-CANARY-0b6d92e4",     # an MCP server's header
    "model": "MODEL-CANARY-c4f8e215",        # gateway.models[...].api_key
    "database": "DBPASS-CANARY-e02c7719",    # the password in an ExeSQL database URL
}
TAVILY_ENV = "ACME_TAVILY_CREDENTIAL"  # a name the environment rule alone would not catch
TOKENS = [{"token": "t-alice-0001", "tenant": "acme", "user": "alice"},
          {"token": "t-svc-0000001", "tenant": "ops", "user": "orchestrator", "role": "service"}]
AUTH = [("authorization", "Bearer t-alice-0001")]
EVERY_SECRET = " ".join(SECRETS.values())


class _LeakyApi(BaseHTTPRequestHandler):
    """Every web API at once, always failing with a body that quotes what it was sent and every key."""

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        sent = " ".join(filter(None, (self.headers.get("authorization"), self.headers.get("ocp-apim-subscription-key"))))
        status = 500 if "/yahoo/" in self.path else 401
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {sent} on {self.path}; known: {EVERY_SECRET}"}})
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    do_GET = do_POST = _answer


def _serve_in_thread(sock: socket.socket, app) -> tuple[uvicorn.Server, threading.Thread]:
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started
    return server, thread


@pytest.fixture(scope="module")
def leaky_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _LeakyApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def leaky_mcp() -> Iterator[str]:
    """A real MCP server whose `whoami` tool fails quoting the headers of the request that called it."""
    seen: list[dict[str, str]] = []
    mcp = build_mcp_server()

    @mcp.tool()
    def whoami() -> str:
        """Say who the caller is."""
        raise ToolError(f"forbidden for {seen[-1] if seen else {}}")

    inner = mcp.streamable_http_app()

    async def recording(scope, receive, send):
        if scope["type"] == "http":
            seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await inner(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server, thread = _serve_in_thread(sock, recording)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    server.should_exit = True
    thread.join(10)


@pytest.fixture
def captured_logs() -> Iterator[io.StringIO]:
    """Every log record of the stack, formatted as the services format them."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(service_logging.JsonFormatter("test"))
    handler.addFilter(lambda record: not record.name.startswith("mcp.server"))  # the fake upstream's own log
    root = logging.getLogger()
    saved = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield stream
    root.removeHandler(handler)
    root.setLevel(saved)


@pytest.fixture
async def stack(tmp_path, leaky_api, leaky_mcp, monkeypatch):
    monkeypatch.setenv(TAVILY_ENV, SECRETS["tavily"])
    sandbox_server, sandbox_address, _ = await start_sandbox()
    database = tmp_path / "store.db"
    shop = tmp_path / "shop.db"
    with sqlite3.connect(shop) as db:  # a view over a table that is gone: querying it names the table
        missing = " ".join(SECRETS.values())
        db.executescript(f'CREATE TABLE "{missing}" (a); CREATE VIEW report AS SELECT * FROM "{missing}"; '
                         f'DROP TABLE "{missing}";')

    def api(prefix: str, key: str | None = None) -> dict[str, Any]:
        entry: dict[str, Any] = {"base_url": f"{leaky_api}/{prefix}", "api_key_env": ""}
        if key:
            entry["api_key"] = SECRETS[key]
        return entry

    with ScriptedOpenAIServer() as provider:
        config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({
            "auth": {"embedded": False, "tokens": TOKENS},
            "store": {"database_url": f"sqlite:///{database}", "seed_templates": False},
            "gateway": {"embedded": {"enabled": False}, "retry": {"max_attempts": 1},
                        "models": {"m": {"model": "openai/test-model", "api_base": provider.base_url,
                                         "api_key": SECRETS["model"]}}},
            "orchestrator": {"flush_interval_ms": 5, "service_token": "t-svc-0000001"},
            "tools": {
                "http": {"timeout_s": 5, "max_retries": 0, "backoff_s": 0},
                "tavily": {"base_url": f"{leaky_api}/tavily", "api_key_env": TAVILY_ENV},
                "google": api("serpapi", "google"), "bing": api("bing", "bing"),
                "wikipedia": {"base_url": f"{leaky_api}/wikipedia/{{language}}/w/api.php"},
                "duckduckgo": api("duckduckgo"), "yahoo_finance": api("yahoo"),
                "retrieval": {"backend": "ragflow", "ragflow": api("ragflow", "ragflow")},
                # SQLite takes no password; the URL's is still a configured secret (SQLAlchemy ignores it).
                "exesql": {"databases": {"shop": f"sqlite://user:{SECRETS['database']}@/{shop}"}},
                "code_exec": {"address": sandbox_address, "timeout_s": 30},
                "mcp": {"servers": {"acme": {"url": leaky_mcp, "headers": {"X-Api-Key": SECRETS["mcp"]}}}},
            },
        })
        auth = TokenAuthenticator.from_config(config, env={})
        store_server = await start_server(build_store(config)[0], config, authenticator=auth)
        gateway_server = await start_server(gateway_app.build_definition(config), config, authenticator=auth)
        await gateway_server.ready.wait()
        config = config.with_overrides({"addresses": {"canvas_store": f"127.0.0.1:{store_server.port}",
                                                      "llm_gateway": f"127.0.0.1:{gateway_server.port}"}})
        orchestrator_server = await start_server(orchestrator_app.build_definition(config), config, authenticator=auth)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{orchestrator_server.port}")
        try:
            yield orchestrator_pb2_grpc.OrchestratorStub(channel), provider, database
        finally:
            await channel.close()
            await orchestrator_server.stop(0)
            await gateway_server.stop(0)
            await store_server.stop(0)
            await sandbox_server.stop(0)


async def run(stub, canvas: dict[str, Any], query: str = "anything") -> list[orchestrator_pb2.RunEvent]:
    return [e async for e in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=to_struct(canvas), query=query),
                                            metadata=AUTH, timeout=120)]


def store_text(database: Path) -> str:
    """Every row of every table of the store's database, as text."""
    with sqlite3.connect(database) as db:
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        rows = [repr(row) for table in tables for row in db.execute(f'SELECT * FROM "{table}"')]
    return "\n".join(rows)


def spans_text(finished_spans) -> str:
    out = []
    for span in finished_spans.get_finished_spans():
        out.append(json.dumps({"name": span.name, "attributes": dict(span.attributes or {}),
                               "events": [(e.name, dict(e.attributes or {})) for e in span.events],
                               "status": span.status.description}, default=str))
    return "\n".join(out)


def leaked(text: str) -> dict[str, str]:
    return {name: value for name, value in SECRETS.items() if value in text}


# What makes code fail quoting every secret, without any secret in the code (which is the user's input,
# shown in events as such): the text is built reversed.
FAILING_CODE = f"def main():\n    raise RuntimeError({EVERY_SECRET[::-1]!r}[::-1])\n"
# Each tool as a canvas node, with what makes it fail quoting a secret (the web APIs always do).
NODE_TOOLS = {
    "TavilySearch": {}, "TavilyExtract": {"urls": "https://example.com/a"}, "Wikipedia": {}, "DuckDuckGo": {},
    "Google": {}, "Bing": {}, "YahooFinance": {}, "Retrieval": {"query": "{sys.query}", "dataset_ids": ["ds1"]},
    "ExeSQL": {"database": "shop", "sql": "SELECT * FROM report"},
    "CodeExec": {"lang": "python", "script": FAILING_CODE},
}

NODE_OUTPUT = {"CodeExec": "result", "YahooFinance": "report"}
"""What the Message shows of tools whose output is not `formalized_content`."""


@pytest.mark.parametrize("tool", sorted(NODE_TOOLS))
async def test_a_tool_node_failing_with_an_echoed_secret_leaks_it_nowhere(stack, tool, captured_logs, finished_spans):
    stub, _, database = stack
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["tool"]},
        "tool": {"type": tool, "params": NODE_TOOLS[tool], "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": [f"{{tool@{NODE_OUTPUT.get(tool, 'formalized_content')}}}"]}},
    })
    events = await run(stub, canvas)
    final = events[-1].workflow_finished
    assert final.status == common_pb2.RUN_STATUS_FAILED, final
    failed = next(e.node_finished for e in events if e.HasField("node_finished") and e.node_finished.component_id == "tool")
    assert failed.error.message and "***" in failed.error.message, failed.error  # the echo arrived, masked
    assert leaked(failed.error.message) == {} and leaked(final.error.message) == {}
    assert leaked("\n".join(json_format.MessageToJson(e) for e in events)) == {}
    assert leaked(store_text(database)) == {}  # events, run record and journal as stored
    assert leaked(captured_logs.getvalue()) == {}
    assert leaked(spans_text(finished_spans)) == {}


async def test_an_agent_never_sends_an_echoed_secret_back_to_its_model(stack, captured_logs, finished_spans):
    stub, provider, database = stack
    calls = [
        ("tavily_search", {"query": "q"}), ("tavily_extract", {"urls": "https://example.com/a"}),
        ("wikipedia_search", {"query": "q"}), ("duckduckgo_search", {"query": "q"}), ("google_search", {"q": "q"}),
        ("bing_search", {"query": "q"}), ("yahoo_finance", {"stock_code": "ACME"}), ("search_my_dateset", {"query": "q"}),
        ("execute_sql", {"sql": "SELECT * FROM report"}), ("execute_code", {"lang": "python", "script": FAILING_CODE}),
        ("whoami", {}),
    ]
    provider.queue(Reply(tool_calls=[{"id": f"c{i}", "name": name, "arguments": json.dumps(args)}
                                     for i, (name, args) in enumerate(calls)], finish_reason="tool_calls"),
                   Reply(content="All tools failed."))
    tools = [{"component_name": name, "name": name, "params": {k: v for k, v in params.items() if k in ("dataset_ids", "database")}}
             for name, params in NODE_TOOLS.items()]
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["agent"]},
        "agent": {"type": "Agent", "params": {"llm_id": "m", "sys_prompt": "Use the tools.", "prompts": "{sys.query}",
                                              "tools": tools, "mcp": [{"mcp_id": "acme", "tools": {}}], "cite": False},
                  "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{agent@content}"]}},
    })
    events = await run(stub, canvas, "use every tool")
    assert events[-1].workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED, events[-1]
    second = provider.chat_bodies[-1]
    answers = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert len(answers) == len(calls) and all(a.startswith("ERROR") for a in answers), answers
    assert sum("***" in a for a in answers) == len(calls), answers  # every echo arrived, masked
    assert leaked(json.dumps([r.body for r in provider.requests])) == {}
    assert leaked("\n".join(json_format.MessageToJson(e) for e in events)) == {}
    assert leaked(store_text(database)) == {}
    assert leaked(captured_logs.getvalue()) == {}
    assert leaked(spans_text(finished_spans)) == {}


async def test_a_model_error_quoting_its_key_leaks_it_nowhere(stack, captured_logs, finished_spans):
    stub, provider, database = stack
    provider.queue(Fail(401, body={"error": {"message": f"Incorrect API key provided: {SECRETS['model']}. "
                                                        f"Other keys: {EVERY_SECRET}", "type": "invalid_request_error"}}))
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["llm"]},
        "llm": {"type": "LLM", "params": {"llm_id": "m", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}},
    })
    events = await run(stub, canvas)
    final = events[-1].workflow_finished
    assert final.status == common_pb2.RUN_STATUS_FAILED and "***" in final.error.message, final
    assert leaked("\n".join(json_format.MessageToJson(e) for e in events)) == {}
    assert leaked(store_text(database)) == {}
    assert leaked(captured_logs.getvalue()) == {}
    assert leaked(spans_text(finished_spans)) == {}
