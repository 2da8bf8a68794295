"""Every agent canvas of the RAGFlow corpus (tests/fixtures/ragflow_dsl) end to end across four real
service processes, against ONE generic scripted model (tests/support/generic_llm.py) — no script
knows any template. Tools point at local API servers, the embedded KB and the real sandbox.

Per canvas: the run ends SUCCEEDED (or PAUSED, then a resume completes it); a Message answer is
present and reasoning arrives only as think events; every tool the canvas offers ran (the API servers
saw the calls, tool results carry no error); usage is recorded. Ingestion pipelines are refused with
FAILED_PRECONDITION. The G0 `exesql.json` (an Answer <-> ExeSQL conversation loop) runs as a
conversation: the first turn takes the query (not SQL: the model repairs it), shows the result and
pauses for the next message; the resume sends real SQL, which runs against the SQLite database the
cluster config names `rag_flow`, and the loop ends after `conversation_max_turns` (2 here).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from agentcanvas.v1 import canvas_store_pb2, canvas_store_pb2_grpc, common_pb2, orchestrator_pb2, orchestrator_pb2_grpc

from services.common.structs import from_struct, to_struct
from tests.e2e.cluster import SQL_ROWS, TOKEN, Cluster
from tests.support.generic_llm import THINK_PREFIX


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ragflow_dsl"
AUTH = [("authorization", f"Bearer {TOKEN}")]
PIPELINE_TYPES = {"File", "Parser", "TokenChunker", "TitleChunker", "Extractor", "Tokenizer", "Compiler"}
NEXT_SQL_MESSAGE = "SELECT name, share FROM energy_sources ORDER BY share DESC"
NEXT_MESSAGE = "And what about wind power?"
WEB_API_OF = {"TavilySearch": "tavily", "TavilyExtract": "tavily", "Wikipedia": "wikipedia", "DuckDuckGo": "duckduckgo",
              "Google": "google", "Bing": "bing", "YahooFinance": "yahoo_finance"}
# A 1x1 PNG: the vision canvas gets an image in sys.files.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")


def _dsl(document: dict[str, Any]) -> dict[str, Any]:
    return document.get("dsl") if isinstance(document.get("dsl"), dict) else document


def _components(document: dict[str, Any]) -> dict[str, Any]:
    return _dsl(document).get("components") or {}


def _is_pipeline(document: dict[str, Any]) -> bool:
    return any((c.get("obj") or {}).get("component_name") in PIPELINE_TYPES for c in _components(document).values())


def _agent_tools(params: dict[str, Any]) -> Iterator[str]:
    for entry in (params.get("tools") or []) + (params.get("llm_enabled_tools") or []):  # G1 name too
        name = entry.get("component_name", "")
        if name == "Agent":
            yield from _agent_tools(entry.get("params") or {})
        else:
            yield name


def offered_tools(document: dict[str, Any], skipped: set[str]) -> set[str]:
    """Tool classes of the components that ran: inside Agents (sub-agents included) and as nodes."""
    found: set[str] = set()
    for component_id, component in _components(document).items():
        if component_id in skipped:
            continue
        obj = component.get("obj") or {}
        found.update(_agent_tools(obj.get("params") or {}))
        if obj.get("component_name") in WEB_API_OF or obj.get("component_name") in ("Retrieval", "CodeExec", "ExeSQL"):
            found.add(obj["component_name"])
    return found


def streams_into_message(document: dict[str, Any], ran: set[str]) -> bool:
    """Whether a model node that ran feeds a Message directly (its reasoning then streams)."""
    components = _components(document)
    for component_id, component in components.items():
        if (component.get("obj") or {}).get("component_name") != "Message" or component_id not in ran:
            continue
        for upstream in component.get("upstream") or []:
            kind = ((components.get(upstream) or {}).get("obj") or {}).get("component_name")
            if kind in ("Agent", "LLM", "Generate") and upstream in ran:
                return True
    return False


def conversation_loop(document: dict[str, Any]) -> bool:
    """Whether a G0 Answer (or a UserFillUp) lies on a cycle: a conversation that waits for each message."""
    components = _components(document)
    for start, component in components.items():
        if (component.get("obj") or {}).get("component_name") not in ("Answer", "UserFillUp"):
            continue
        seen, pending = set(), list(component.get("downstream") or [])
        while pending:
            node = pending.pop()
            if node == start:
                return True
            if node in seen or node not in components:
                continue
            seen.add(node)
            pending.extend(components[node].get("downstream") or [])
    return False


def begin_inputs(document: dict[str, Any]) -> dict[str, Any]:
    """A value for every Begin input, by its declared type."""
    values: dict[str, Any] = {}
    for component in _components(document).values():
        obj = component.get("obj") or {}
        if obj.get("component_name") != "Begin":
            continue
        for key, spec in ((obj.get("params") or {}).get("inputs") or {}).items():
            kind = str((spec or {}).get("type", "line")) if isinstance(spec, dict) else "line"
            options = (spec or {}).get("options") if isinstance(spec, dict) else None
            values[key] = options[0] if options else (1 if kind == "integer" else True if kind == "boolean" else "renewable energy")
    return values


# The corpus, plus our own canvases in RAGFlow's format: one pauses for a form (the corpus copy has
# none), one is a G2 conversation loop (UserFillUp -> Agent -> Message -> UserFillUp).
CORPUS = sorted(FIXTURES.glob("*/*.json")) + sorted((Path(__file__).parent / "fixtures").glob("*.json"))


def keyless_factory_ids() -> set[str]:
    """llm_ids of factories that need no key (Ollama): they would not fall through to '*', so the
    config routes them to the scripted model explicitly. Every other id reaches it through '*' or ''."""
    ids: set[str] = set()
    for path in CORPUS:
        ids.update(i for i in __import__("re").findall(r'"llm_id": "([^"]*@Ollama)"', path.read_text()))
    return ids


@pytest.fixture(scope="module")
async def cluster(tmp_path_factory):
    running = Cluster(tmp_path_factory.mktemp("e2e"))
    try:
        await running.start(routed_ids=keyless_factory_ids())
        yield running
    finally:
        running.close()


@pytest.fixture(scope="module")
async def store_stub(cluster):
    channel = grpc.aio.insecure_channel(cluster.address("canvas_store"))
    yield canvas_store_pb2_grpc.CanvasStoreStub(channel)
    await channel.close()


async def stored_session(store_stub, document: dict[str, Any], name: str) -> tuple[str, str]:
    """A canvas that may pause runs from the store, in a session (resume continues the session)."""
    canvas = await store_stub.CreateCanvas(canvas_store_pb2.CreateCanvasRequest(canvas=canvas_store_pb2.Canvas(
        title=f"e2e {name}", dsl=to_struct(_dsl(document)))), metadata=AUTH)
    session = await store_stub.CreateSession(canvas_store_pb2.CreateSessionRequest(canvas_id=canvas.id), metadata=AUTH)
    return canvas.id, session.id


@pytest.fixture(scope="module")
async def stub(cluster):
    channel = grpc.aio.insecure_channel(cluster.address("orchestrator"))
    yield orchestrator_pb2_grpc.OrchestratorStub(channel)
    await channel.close()


async def run_events(stub, request: orchestrator_pb2.RunCanvasRequest) -> list[orchestrator_pb2.RunEvent]:
    events = []
    async for event in stub.RunCanvas(request, metadata=AUTH, timeout=240):
        events.append(event)
    return events


async def resume(stub, events, session_id: str, message: str = ""):
    """Answer every pending form generically and resume: the session alone names the paused run. A
    conversation loop gets the user's next chat `message` instead."""
    pending = _of(events, "user_inputs_required")
    answers = {} if message else {key: "renewable energy" for form in pending for key in from_struct(form.inputs)}
    more = await run_events(stub, orchestrator_pb2.RunCanvasRequest(session_id=session_id, inputs=to_struct(answers),
                                                                     query=message))
    assert more[0].workflow_started.resumed
    return events + more, _of(more, "workflow_finished")


def _of(events, kind: str) -> list[Any]:
    return [getattr(e, kind) for e in events if e.WhichOneof("event") == kind]


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
async def test_corpus_canvas_runs_end_to_end(cluster, stub, store_stub, path: Path):
    document = json.loads(path.read_text())
    request = orchestrator_pb2.RunCanvasRequest(query="Tell me about renewable energy", inputs=to_struct(begin_inputs(document)))
    conversation = conversation_loop(document)
    pauses = conversation or any((c.get("obj") or {}).get("component_name") == "UserFillUp" for c in _components(document).values())
    if pauses:
        request.canvas_id, request.session_id = await stored_session(store_stub, document, path.stem)
    else:
        request.dsl.CopyFrom(to_struct(document))
    if "sys.files" in json.dumps(document):
        request.files.append(common_pb2.InputFile(name="photo.png", mime_type="image/png", content=PNG))

    if _is_pipeline(document):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await run_events(stub, request)
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION, caught.value.details()
        assert "ingestion" in caught.value.details()
        return

    api_before = {api: len(cluster.apis.of(api)) for api in set(WEB_API_OF.values())}
    model_before = len(cluster.model.chat_bodies)
    events = await run_events(stub, request)
    finished = _of(events, "workflow_finished")
    assert len(finished) == 1, [e.WhichOneof("event") for e in events]
    assert (finished[0].status == common_pb2.RUN_STATUS_PAUSED) == pauses, common_pb2.RunStatus.Name(finished[0].status)
    if pauses:
        form = _of(events, "user_inputs_required")[0]
        assert "instructions" in from_struct(form.inputs) or form.inputs
        turn_one = len(events)
        message = (NEXT_SQL_MESSAGE if '"ExeSQL"' in json.dumps(document) else NEXT_MESSAGE) if conversation else ""
        events, finished = await resume(stub, events, request.session_id, message)
    assert finished[0].status == common_pb2.RUN_STATUS_SUCCEEDED, (
        common_pb2.RunStatus.Name(finished[0].status), finished[0].error, cluster.log_tail("orchestrator"))

    # A Message answer, with reasoning only as think events.
    ends = _of(events, "message_end")
    assert ends and any(end.content.strip() for end in ends)
    deltas = "".join(d.content for d in _of(events, "message_delta"))
    assert "<think>" not in deltas and THINK_PREFIX not in deltas
    assert all(THINK_PREFIX not in end.content for end in ends)
    streamed = [e for e in events if e.WhichOneof("event") in ("think_start", "think_delta")]
    ran = {n.component_id for n in _of(events, "node_finished")}
    if streams_into_message(document, ran):
        assert streamed, "an answer streamed from the model came without its think events"
        assert THINK_PREFIX in "".join(t.content for t in _of(events, "think_delta"))

    # Every tool the canvas offers ran.
    tools = offered_tools(document, {n.component_id for n in _of(events, "node_skipped")})
    for tool in tools & set(WEB_API_OF):
        api = WEB_API_OF[tool]
        assert len(cluster.apis.of(api)) > api_before[api], f"{tool} never reached its API"
    nodes = _of(events, "node_finished")
    calls = [c for n in nodes if n.component_type == "Agent" for c in (from_struct(n.inputs).get("tool_calls") or [])]
    failed = [c for c in calls if c.get("error")]
    assert not failed, failed
    if tools & {"Retrieval", "CodeExec"}:
        ran = {c["name"] for c in calls} | {n.component_type for n in nodes if not n.HasField("error")}
        for tool, function in (("Retrieval", "search_my_dateset"), ("CodeExec", "execute_code")):
            if tool in tools:
                assert tool in ran or any(name.startswith(function) for name in ran), (tool, ran)
    if "Retrieval" in tools and any(c["name"].startswith("search_my_dateset") for c in calls):
        assert any(from_struct(end.reference).get("chunks") for end in ends), "retrieved chunks are not cited"

    # Sub-agents that were called report their own node events, nested under the calling agent.
    started = {n.component_id: n.parent_id for n in _of(events, "node_started")}
    if '"component_name": "Agent", "name"' in json.dumps(document) or any(
            t.get("component_name") == "Agent" for c in _components(document).values()
            for t in ((c.get("obj") or {}).get("params") or {}).get("tools") or []):
        assert any("-->" in cid for cid in started), "no sub-agent reported its own events"
    for call in calls:
        subs = [cid for cid in started if "-->" in cid and cid.split("-->", 1)[1] == call["name"]]
        for sub in subs:
            assert started[sub] == sub.split("-->", 1)[0]
            assert any(n.component_id == sub for n in nodes), f"{sub} started but never finished"

    # Images of sys.files reach the model as image parts (vision canvases).
    if '"visual_files_var": "sys.files"' in json.dumps(document):
        sent = json.dumps(cluster.model.chat_bodies[model_before:])
        assert '"image_url"' in sent and "data:image/png;base64," in sent

    # A conversation's turns each showed their answer; the SQL of the second turn ran on the real database.
    if conversation:
        turns = [[e.message_end.content for e in part if e.WhichOneof("event") == "message_end"]
                 for part in (events[:turn_one], events[turn_one:])]
        assert all(any(text.strip() for text in shown) for shown in turns), turns
        if "Agent" in json.dumps(document):  # the second turn answered the second message
            assert NEXT_MESSAGE in "".join(turns[1]), turns
        if "ExeSQL" in tools:
            sql_nodes = [n for n in nodes if n.component_type == "ExeSQL"]
            assert len(sql_nodes) == 2 and not any(n.HasField("error") for n in sql_nodes), sql_nodes
            answer = "".join(turns[1])
            assert all(name in answer and str(share) in answer for name, share in SQL_ROWS), answer
            assert answer.index("wind") < answer.index("solar") < answer.index("geothermal")

    # Usage recorded (over every run of the session); the model was really called.
    assert sum(f.usage.calls for f in _of(events, "workflow_finished")) > 0
    assert len(cluster.model.chat_bodies) > model_before
    for node in nodes:
        assert not node.HasField("error") or node.component_type in ("Retrieval",), (node.component_id, node.error)


async def test_empty_llm_id_uses_the_default_model(cluster, stub):
    document = json.loads((FIXTURES / "templates" / "your_starter_dataset_chatbot.json").read_text())
    before = len(cluster.model.chat_bodies)
    events = await run_events(stub, orchestrator_pb2.RunCanvasRequest(dsl=to_struct(document), query="hello"))
    assert _of(events, "workflow_finished")[0].usage.calls > 0
    models = {body.get("model") for body in cluster.model.chat_bodies[before:]}
    assert models == {"generic-default"}, models


@pytest.mark.parametrize("mode", ["--remote", "--embedded"])
def test_cli_run_with_the_one_config_file(cluster, mode):
    """`agent-canvas run --config FILE` honours the file's gateway, tools and addresses sections:
    against the running services, and booting every service inside its own process."""
    import os
    import subprocess
    import sys

    from tests.support.cluster import ROOT

    template = FIXTURES / "templates" / "web_search_assistant.json"
    before = len(cluster.apis.of("wikipedia"))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'gen' / 'python'}", "AGENT_CANVAS_TOKEN": TOKEN}
    done = subprocess.run([sys.executable, "-c", "import sys; from services.cli.main import main; sys.exit(main())",
                           "run", "--config", str(cluster.config_path), mode, str(template), "--query", "wind power",
                           "--json"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    kinds = [next(iter(k for k in json.loads(line) if k not in ("runId", "sessionId", "seq", "createdAtMs", "traceId")))
             for line in done.stdout.splitlines() if line.startswith("{")]
    assert kinds[-1] == "workflowFinished" and "messageEnd" in kinds and "thinkDelta" in kinds
    assert len(cluster.apis.of("wikipedia")) > before
