"""A DSL's object key order survives every process boundary, as Python's json keeps it.

Categorize lists its categories in `category_description` order, and the scripted model here answers
with the first category it is shown: a DSL whose order were lost anywhere (CLI -> store -> revision ->
orchestrator, the run spec through the store on a resume) would show another prompt and take another
route in some process. The canvas is imported with the CLI, then run in ten fresh orchestrator
processes, each by canvas id and inline (`dsl_json`), each run pausing at a form and resumed (so the
DSL is read back from the run's spec in the store). Validation problems come in DSL order too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from agentcanvas.v1 import canvas_store_pb2, canvas_store_pb2_grpc, common_pb2, orchestrator_pb2, orchestrator_pb2_grpc

from services.common.structs import from_struct, to_struct
from tests.support.cluster import ROOT, ProcessCluster, free_port
from tests.support.openai_server import Reply, ScriptedOpenAIServer

TOKEN = "t-order"
AUTH = [("authorization", f"Bearer {TOKEN}")]
PROCESSES = 10
# Deliberately neither sorted nor in any order a hash map would keep.
CATEGORIES = ["Transportation issue", "Positive review", "Billing", "Allergy", "Zoning", "Accessibility"]


def _first_listed(body: dict[str, Any]) -> Reply:
    """The model: for a classification prompt, the first category it lists; otherwise a plain answer."""
    system = next((m.get("content") for m in body.get("messages") or [] if m.get("role") == "system"), "") or ""
    listed = [line[2:].split(":")[0].strip() for line in str(system).splitlines() if line.startswith("- ")]
    if listed:
        return Reply(content=json.dumps({"category": listed[0]}))
    return Reply(content="ok")


def _canvas() -> dict[str, Any]:
    components: dict[str, Any] = {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["fill"], "upstream": []},
        "fill": {"obj": {"component_name": "UserFillUp",
                         "params": {"inputs": {"review": {"name": "Review", "type": "paragraph", "optional": False}},
                                    "enable_tips": False}},
                 "downstream": ["sort"], "upstream": ["begin"]},
        "sort": {"obj": {"component_name": "Categorize", "params": {
            "llm_id": "scripted", "query": "{fill@review}",
            "category_description": {name: {"description": f"about {name.lower()}", "examples": [f"an example of {name}"],
                                            "to": [f"say_{index}"]}
                                     for index, name in enumerate(CATEGORIES)}}},
                 "downstream": [f"say_{index}" for index in range(len(CATEGORIES))], "upstream": ["fill"]},
    }
    for index, name in enumerate(CATEGORIES):
        components[f"say_{index}"] = {"obj": {"component_name": "Message", "params": {"content": [f"routed to {name}"]}},
                                      "downstream": [], "upstream": ["sort"]}
    return {"components": components, "globals": {}, "history": [], "path": [], "retrieval": []}


def _invalid_canvas() -> dict[str, Any]:
    """Problems on several components, listed in an order no sort would give."""
    return {"components": {
        "zeta": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["mid"], "upstream": []},
        "mid": {"obj": {"component_name": "Message", "params": {"content": ["{nowhere@x}"]}}, "downstream": ["alpha"],
                "upstream": ["zeta"]},
        "alpha": {"obj": {"component_name": "Categorize", "params": {"category_description": {}}}, "downstream": [],
                  "upstream": ["mid"]},
        "beta": {"obj": {"component_name": "Message", "params": {"content": ["{ghost@y}"]}}, "downstream": [],
                 "upstream": []},
    }}


@pytest.fixture
async def services(tmp_path):
    model = ScriptedOpenAIServer(default=_first_listed)
    model.start()
    ports = {name: free_port() for name in ("canvas_store", "llm_gateway", "orchestrator")}
    scripted = {"model": "openai/scripted", "api_base": model.base_url, "api_key": "sk-scripted"}
    config = {
        "data_dir": str(tmp_path / "data"),
        "auth": {"embedded": False, "tokens": [{"token": TOKEN, "tenant": "acme", "user": "alice"}]},
        "addresses": {name: f"127.0.0.1:{port}" for name, port in ports.items()},
        "log": {"level": "WARNING"},
        "store": {"database_url": f"sqlite:///{tmp_path / 'store.db'}", "seed_templates": False},
        "gateway": {"embedded": {"enabled": False}, "retry": {"max_attempts": 1}, "models": {"*": scripted, "": scripted}},
        "orchestrator": {"flush_interval_ms": 5, "service_token": TOKEN},
    }
    config_path = tmp_path / "agent-canvas.yaml"
    config_path.write_text(yaml.safe_dump(config))
    cluster = ProcessCluster(tmp_path / "processes", tokens=[])
    cluster.workdir.mkdir(parents=True, exist_ok=True)
    try:
        for name in ("canvas_store", "llm_gateway"):
            await cluster.spawn(name, name, config_path=config_path, port=ports[name])
        yield cluster, config_path, ports, model
    finally:
        cluster.close()
        model.stop()


def _cli(config_path: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'gen' / 'python'}", "AGENT_CANVAS_TOKEN": TOKEN,
           "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    done = subprocess.run([sys.executable, "-m", "services.cli.main", *args, "--config", str(config_path)], env=env,
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def _events(call) -> list[orchestrator_pb2.RunEvent]:
    return [event async for event in call if not event.HasField("heartbeat")]


async def _route(stub, first: orchestrator_pb2.RunCanvasRequest) -> str:
    """Run until the form pauses, resume it with the review, return the routed answer."""
    paused = await _events(stub.RunCanvas(first, metadata=AUTH))
    assert paused[-1].workflow_finished.status == common_pb2.RUN_STATUS_PAUSED
    resumed = await _events(stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(
        resume_run_id=paused[-1].run_id, inputs=to_struct({"review": "the bus was late and the staff were kind"})),
        metadata=AUTH))
    finished = resumed[-1].workflow_finished
    assert finished.status == common_pb2.RUN_STATUS_SUCCEEDED, finished.error
    return from_struct(finished.outputs)["content"]


def _classification_prompts(model: ScriptedOpenAIServer) -> list[str]:
    """The messages of every classification request, as the provider received them (byte for byte)."""
    return [json.dumps(r.body["messages"], ensure_ascii=False) for r in model.requests
            if any(m.get("role") == "system" and "Classify" in str(m.get("content")) for m in r.body.get("messages") or [])]


async def test_one_canvas_gives_one_prompt_and_one_route_in_every_process(services, tmp_path):
    cluster, config_path, ports, model = services
    document = _canvas()
    canvas_file = tmp_path / "feedback.json"
    canvas_file.write_text(json.dumps({"title": "feedback router", "dsl": document}, ensure_ascii=False, indent=1))
    canvas_id = _cli(config_path, "canvas", "import", str(canvas_file)).split("\t")[0]
    # the store gives the DSL back in the order it was written, in the CLI's export too
    exported = json.loads(_cli(config_path, "canvas", "export", canvas_id))
    assert list(exported["dsl"]["components"]["sort"]["obj"]["params"]["category_description"]) == CATEGORIES
    dsl_json = json.dumps(document, ensure_ascii=False)
    routes: list[str] = []
    for index in range(PROCESSES):
        await cluster.spawn(f"orchestrator-{index}", "orchestrator", config_path=config_path, port=ports["orchestrator"])
        async with grpc.aio.insecure_channel(f"127.0.0.1:{ports['orchestrator']}") as channel:
            stub = orchestrator_pb2_grpc.OrchestratorStub(channel)
            routes.append(await _route(stub, orchestrator_pb2.RunCanvasRequest(canvas_id=canvas_id)))
            routes.append(await _route(stub, orchestrator_pb2.RunCanvasRequest(dsl_json=dsl_json)))
        cluster.kill(f"orchestrator-{index}")
    prompts = _classification_prompts(model)
    assert len(prompts) == 2 * PROCESSES
    assert len(set(prompts)) == 1, "the classification prompt differs between processes"
    listed = [line[2:].split(":")[0] for line in json.loads(prompts[0])[0]["content"].splitlines() if line.startswith("- ")]
    assert listed == CATEGORIES
    assert routes == ["routed to Transportation issue"] * (2 * PROCESSES)


async def test_a_dsl_sent_as_a_struct_still_runs_the_same_way_in_every_process(services):
    """Older clients send a Struct, which has no order of its own: every process sorts its keys alike."""
    cluster, config_path, ports, model = services
    routes = []
    for index in range(3):
        await cluster.spawn(f"orchestrator-s{index}", "orchestrator", config_path=config_path, port=ports["orchestrator"])
        async with grpc.aio.insecure_channel(f"127.0.0.1:{ports['orchestrator']}") as channel:
            stub = orchestrator_pb2_grpc.OrchestratorStub(channel)
            routes.append(await _route(stub, orchestrator_pb2.RunCanvasRequest(dsl=to_struct(_canvas()))))
        cluster.kill(f"orchestrator-s{index}")
    assert routes == [f"routed to {sorted(CATEGORIES)[0]}"] * 3
    assert len(set(_classification_prompts(model))) == 1


async def test_validation_problems_come_in_dsl_order_in_every_process(services):
    cluster, config_path, ports, _ = services
    text = json.dumps(_invalid_canvas())
    seen = []
    for index in range(3):
        await cluster.spawn(f"orchestrator-v{index}", "orchestrator", config_path=config_path, port=ports["orchestrator"])
        async with grpc.aio.insecure_channel(f"127.0.0.1:{ports['orchestrator']}") as channel:
            stub = orchestrator_pb2_grpc.OrchestratorStub(channel)
            reply = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl_json=text), metadata=AUTH)
            seen.append([(p.component_id, p.field, p.code) for p in reply.problems])
            assert list(json.loads(reply.normalized_dsl_json)["components"]) == ["zeta", "mid", "alpha", "beta"]
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl_json="{\"components\": NaN}"),
                                          metadata=AUTH)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "dsl_json" in caught.value.details()
        cluster.kill(f"orchestrator-v{index}")
    assert seen[0] == seen[1] == seen[2]
    components = [component for component, _, _ in seen[0]]
    assert components == sorted(components, key=["zeta", "mid", "alpha", "beta"].index)
    assert {"mid", "alpha", "beta"} <= set(components)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mariadb"])
async def test_the_store_keeps_the_key_order_on_every_database(backend, tmp_path):
    from services.canvas_store.app import build_service
    from services.common.auth import TokenAuthenticator
    from services.common.bootstrap import start_server
    from services.common.clients import create_channel
    from services.common.settings import Config
    from tests.support.databases import temporary_database

    document = _canvas()
    with temporary_database(backend, str(tmp_path), prefix="ac_order") as url:
        config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides(
            {"auth": {"embedded": False, "tokens": [{"token": TOKEN, "tenant": "acme", "user": "alice"}]},
             "store": {"database_url": url, "seed_templates": False}})
        definition, _ = build_service(config)
        running = await start_server(definition, config, authenticator=TokenAuthenticator.from_config(config, env={}))
        channel = create_channel(f"127.0.0.1:{running.port}")
        try:
            stub = canvas_store_pb2_grpc.CanvasStoreStub(channel)
            created = await stub.CreateCanvas(canvas_store_pb2.CreateCanvasRequest(canvas=canvas_store_pb2.Canvas(
                title="order", dsl_json=json.dumps(document))), metadata=AUTH)
            got = await stub.GetCanvas(canvas_store_pb2.GetCanvasRequest(id=created.id), metadata=AUTH)
            revision = await stub.GetRevision(canvas_store_pb2.GetRevisionRequest(canvas_id=created.id, revision_id="latest"),
                                              metadata=AUTH)
            for text in (created.dsl_json, got.dsl_json, revision.dsl_json):
                assert json.dumps(json.loads(text)) == json.dumps(document)
            # a reorder is a change: a new revision that keeps the new order
            reordered = _canvas()
            categories = reordered["components"]["sort"]["obj"]["params"]["category_description"]
            reordered["components"]["sort"]["obj"]["params"]["category_description"] = dict(reversed(categories.items()))
            from google.protobuf import field_mask_pb2
            updated = await stub.UpdateCanvas(canvas_store_pb2.UpdateCanvasRequest(
                canvas=canvas_store_pb2.Canvas(id=created.id, etag=got.etag, dsl_json=json.dumps(reordered)),
                update_mask=field_mask_pb2.FieldMask(paths=["dsl"])), metadata=AUTH)
            assert updated.head_revision_id != created.head_revision_id
            latest = await stub.GetRevision(canvas_store_pb2.GetRevisionRequest(canvas_id=created.id, revision_id="latest"),
                                            metadata=AUTH)
            assert json.dumps(json.loads(latest.dsl_json)) == json.dumps(reordered)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.CreateCanvas(canvas_store_pb2.CreateCanvasRequest(canvas=canvas_store_pb2.Canvas(
                    title="bad", dsl_json='{"components": {"a": "\\u0000"}}')), metadata=AUTH)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "canvas.dsl_json.components.a" in caught.value.details()
        finally:
            await channel.close()
            await running.stop(0)
