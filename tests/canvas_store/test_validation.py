"""Bad input gets INVALID_ARGUMENT naming the field, and nothing is written."""

from __future__ import annotations

import json
import uuid

import grpc
import pytest
from agentcanvas.v1 import canvas_store_pb2 as pb
from google.protobuf import field_mask_pb2, struct_pb2

from services.canvas_store.settings import StoreSettings
from services.common.settings import Config
from services.common.structs import to_struct
from tests.canvas_store.conftest import MINIMAL_DSL, create_canvas, expect_code, run_record


def _canvas(title: str, dsl=None, **kwargs) -> pb.Canvas:
    canvas = pb.Canvas(title=title, **kwargs)
    if dsl is not None:
        canvas.dsl.CopyFrom(dsl)
    return canvas


def _list_value_dsl() -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update({"components": [1, 2]})
    return struct


CASES = [
    ("empty title", lambda tag: _canvas("   ", to_struct(MINIMAL_DSL)), "canvas.title"),
    ("long title", lambda tag: _canvas("x" * 256 + tag, to_struct(MINIMAL_DSL)), "canvas.title"),
    ("no dsl", lambda tag: _canvas(tag), "canvas.dsl"),
    ("no components", lambda tag: _canvas(tag, to_struct({"graph": {}})), "canvas.dsl.components"),
    ("components not an object", lambda tag: _canvas(tag, _list_value_dsl()), "canvas.dsl.components"),
    ("dsl too large", lambda tag: _canvas(tag, to_struct({**MINIMAL_DSL, "blob": "x" * 300_000})), "canvas.dsl"),
    ("unknown permission", lambda tag: _canvas(tag, to_struct(MINIMAL_DSL), permission=7), "canvas.permission"),
    ("unknown category", lambda tag: _canvas(tag, to_struct(MINIMAL_DSL), category=9), "canvas.category"),
    ("long tag", lambda tag: _canvas(tag, to_struct(MINIMAL_DSL), tags=["t" * 65]), "canvas.tags[0]"),
]


@pytest.mark.parametrize("label,build,field", CASES, ids=[c[0] for c in CASES])
async def test_create_rejects_bad_input_and_writes_nothing(store, label, build, field):
    tag = uuid.uuid4().hex
    error = await expect_code(store.alice.CreateCanvas(pb.CreateCanvasRequest(canvas=build(tag))),
                              grpc.StatusCode.INVALID_ARGUMENT)
    assert field in error.details(), error.details()
    listed = await store.alice.ListCanvases(pb.ListCanvasesRequest(filter=f'title:"{tag}"'))
    assert list(listed.canvases) == []


async def test_update_rejects_bad_input_and_writes_nothing(store):
    created = await create_canvas(store.alice)
    bad = [
        (pb.Canvas(id=created.id, title=""), ["title"], "canvas.title"),
        (pb.Canvas(id=created.id, permission=5), ["permission"], "canvas.permission"),
        (_canvas("", to_struct({"nodes": []}), id=created.id, etag=created.etag), ["dsl"], "canvas.dsl.components"),
        (pb.Canvas(id=created.id, etag=created.etag), ["dsl"], "canvas.dsl"),
        (pb.Canvas(id=created.id, title="x"), ["*", "title"], "update_mask"),
        (pb.Canvas(id="not-an-id", title="x"), ["title"], "id"),
    ]
    for canvas, paths, field in bad:
        error = await expect_code(store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
            canvas=canvas, update_mask=field_mask_pb2.FieldMask(paths=paths))), grpc.StatusCode.INVALID_ARGUMENT)
        assert field in error.details(), error.details()
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id))
    assert got.etag == created.etag and got.title == created.title


async def test_other_requests_validate_their_fields(store):
    checks = [
        (store.alice.GetCanvas(pb.GetCanvasRequest(id="")), "id"),
        (store.alice.GetCanvas(pb.GetCanvasRequest(id="../etc")), "id"),
        (store.alice.ListRevisions(pb.ListRevisionsRequest(canvas_id="x" * 32)), "id"),
        (store.alice.ListSessions(pb.ListSessionsRequest(page_size=-5)), "page_size"),
        (store.alice.ListTemplates(pb.ListTemplatesRequest(page_token="nope")), "page_token"),
        (store.alice.CreateCanvas(pb.CreateCanvasRequest(request_id="r" * 65, canvas=_canvas("t", to_struct(MINIMAL_DSL)))),
         "request_id"),
        (store.alice.AddTenantMember(pb.AddTenantMemberRequest(user_id="")), "user_id"),
        (store.alice.ListRunRecords(pb.ListRunRecordsRequest(statuses=[42])), "statuses[0]"),
        (store.alice.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id="a" * 32, holder="")), "holder"),
    ]
    for call, field in checks:
        error = await expect_code(call, grpc.StatusCode.INVALID_ARGUMENT)
        assert field in error.details(), error.details()


def test_default_limits():
    settings = StoreSettings.from_config(Config.load(env={"AGENT_CANVAS_DATA_DIR": "/tmp/ac-defaults"}))
    assert settings.max_dsl_bytes == 8 * 1024 * 1024
    assert settings.keep_draft_revisions == 20 and settings.session_history_max == 50
    assert settings.session_history_max_bytes == 4 << 20
    assert settings.database_url == "sqlite:////tmp/ac-defaults/store.db"


async def test_default_size_limit_on_every_backend(store, tmp_path):
    """With the default 8 MiB limit (a second store on the same database), a DSL just under it round-trips
    and one just over it is rejected."""
    from agentcanvas.v1 import canvas_store_pb2_grpc

    from services.canvas_store.app import build_service
    from services.common.auth import TokenAuthenticator
    from services.common.bootstrap import start_server
    from services.common.clients import create_channel
    from services.common.structs import from_struct
    from tests.canvas_store.conftest import Client, store_config

    config = store_config(str(tmp_path), store.url, max_dsl_bytes=8 * 1024 * 1024)
    definition, _app = build_service(config)
    other = await start_server(definition, config, authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = create_channel(f"127.0.0.1:{other.port}")
    try:
        client = Client(canvas_store_pb2_grpc.CanvasStoreStub(channel), "t-alice")
        overhead = len(json.dumps({**MINIMAL_DSL, "blob": ""}, separators=(",", ":")))
        big = {**MINIMAL_DSL, "blob": "x" * (8 * 1024 * 1024 - overhead - 1024)}
        created = await client.CreateCanvas(pb.CreateCanvasRequest(canvas=_canvas(uuid.uuid4().hex, to_struct(big))))
        got = await client.GetCanvas(pb.GetCanvasRequest(id=created.id))
        assert from_struct(got.dsl) == big
        too_big = {**MINIMAL_DSL, "blob": "x" * (8 * 1024 * 1024)}
        error = await expect_code(client.CreateCanvas(pb.CreateCanvasRequest(
            canvas=_canvas(uuid.uuid4().hex, to_struct(too_big)))), grpc.StatusCode.INVALID_ARGUMENT)
        assert "canvas.dsl" in error.details() and "8388608" in error.details()
    finally:
        await channel.close()
        await other.stop(0)


async def test_run_and_session_payload_limits(store):
    canvas = await create_canvas(store.alice)
    big_spec = run_record(canvas_id=canvas.id)
    big_spec.spec.CopyFrom(to_struct({"blob": "x" * (256 * 1024 + (1 << 20))}))
    error = await expect_code(store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=big_spec)),
                              grpc.StatusCode.INVALID_ARGUMENT)
    assert "run.spec" in error.details()
    run = await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=run_record(canvas_id=canvas.id)))
    lease = await store.alice.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="a"))
    error = await expect_code(store.alice.CommitRunStep(pb.CommitRunStepRequest(
        run_id=run.id, lease_token=lease.token,
        events=[pb.StoredRunEvent(event_type="x", payload=b"y" * ((4 << 20) + 1))])), grpc.StatusCode.INVALID_ARGUMENT)
    assert "events[0].payload" in error.details()
    assert (await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=run.id))).last_seq == 0
    session = await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))
    error = await expect_code(store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(
        id=session.id, state=to_struct({"blob": "x" * 300_000}))), grpc.StatusCode.INVALID_ARGUMENT)
    assert "state" in error.details()
    assert (await store.alice.GetSession(pb.GetSessionRequest(id=session.id))).conversation_turns == 0
