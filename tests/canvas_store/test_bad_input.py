"""Hostile or malformed input is INVALID_ARGUMENT (or the documented precondition code) naming the field,
never INTERNAL, UNKNOWN, UNAVAILABLE or RESOURCE_EXHAUSTED, and alike on every backend."""

from __future__ import annotations

import math
import uuid

import grpc
import pytest
from agentcanvas.v1 import canvas_store_pb2 as pb
from agentcanvas.v1 import canvas_store_pb2_grpc
from google.protobuf import field_mask_pb2, struct_pb2

from services.common import status
from services.common.auth import ON_BEHALF_OF
from services.common.structs import from_struct, to_struct
from tests.canvas_store.conftest import MINIMAL_DSL, create_canvas, event_payload, expect_code, run_record, unique_title

BAD = grpc.StatusCode.INVALID_ARGUMENT


def _fields(error: grpc.aio.AioRpcError) -> list[str]:
    return [v.field for v in status.field_violations(error)]


def _dsl_with(value) -> struct_pb2.Struct:
    """MINIMAL_DSL with components.begin.params.x = value (Struct fields are set by hand: NaN is not JSON)."""
    dsl = to_struct(MINIMAL_DSL)
    dsl.fields["components"].struct_value.fields["begin"].struct_value.fields["params"].struct_value \
        .fields["x"].number_value = value
    return dsl


# ---- 1. NaN and infinities inside Structs ----------------------------------------------------------

@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
async def test_non_finite_numbers_in_a_dsl_name_the_path(store, number):
    canvas = pb.Canvas(title=unique_title())
    canvas.dsl.CopyFrom(_dsl_with(number))
    error = await expect_code(store.alice.CreateCanvas(pb.CreateCanvasRequest(canvas=canvas)), BAD)
    assert _fields(error) == ["canvas.dsl.components.begin.params.x"], error.details()


async def test_non_finite_numbers_elsewhere_are_invalid(store):
    canvas = await create_canvas(store.alice)
    session = await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))
    state = struct_pb2.Struct()
    state.fields["items"].list_value.values.add().number_value = math.inf
    error = await expect_code(store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(id=session.id, state=state)),
                              BAD)
    assert _fields(error) == ["state.items[0]"], error.details()
    message = to_struct({"role": "user"})
    message.fields["score"].number_value = math.nan
    error = await expect_code(store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(
        id=session.id, messages=[message])), BAD)
    assert _fields(error) == ["messages[0].score"], error.details()
    run = run_record(canvas_id=canvas.id)
    run.spec.fields["temperature"].number_value = math.nan
    error = await expect_code(store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=run)), BAD)
    assert _fields(error) == ["run.spec.temperature"], error.details()


# ---- 2. NUL characters in any text field ------------------------------------------------------------

async def test_nul_characters_are_refused_on_every_backend(store):
    canvas = await create_canvas(store.alice)
    dsl = to_struct({**MINIMAL_DSL, "note": "a\x00b"})
    keyed = to_struct({**MINIMAL_DSL, "bad\x00key": 1})
    cases = [
        (store.alice.CreateCanvas(pb.CreateCanvasRequest(canvas=pb.Canvas(title="t\x00", dsl=to_struct(MINIMAL_DSL)))),
         "canvas.title"),
        (store.alice.CreateCanvas(pb.CreateCanvasRequest(canvas=pb.Canvas(title=unique_title(), dsl=dsl))),
         "canvas.dsl.note"),
        (store.alice.CreateCanvas(pb.CreateCanvasRequest(canvas=pb.Canvas(title=unique_title(), dsl=keyed))),
         "canvas.dsl"),
        (store.alice.CreateCanvas(pb.CreateCanvasRequest(canvas=pb.Canvas(
            title=unique_title(), dsl=to_struct(MINIMAL_DSL), tags=["ok", "b\x00d"]))), "canvas.tags[1]"),
        (store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
            canvas=pb.Canvas(id=canvas.id, description="x\x00"),
            update_mask=field_mask_pb2.FieldMask(paths=["description"]))), "canvas.description"),
        (store.alice.GetCanvas(pb.GetCanvasRequest(id="\x00")), "id"),
        (store.alice.ListCanvases(pb.ListCanvasesRequest(filter='title:"\x00"')), "filter"),
        (store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id, user_id="u\x00")), "user_id"),
        (store.alice.AddTenantMember(pb.AddTenantMemberRequest(user_id="\x00")), "user_id"),
        (store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=run_record(canvas_id=canvas.id),
                                                               request_id="r\x00")), "request_id"),
        (store.alice.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id="f" * 32, holder="h\x00")), "holder"),
    ]
    for call, field in cases:
        error = await expect_code(call, BAD)
        assert field in _fields(error), (field, error.details())


async def test_nul_in_session_messages_and_run_fields(store):
    canvas = await create_canvas(store.alice)
    session = await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))
    error = await expect_code(store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(
        id=session.id, messages=[to_struct({"role": "user", "content": ["fine", "bad\x00"]})])), BAD)
    assert _fields(error) == ["messages[0].content[1]"], error.details()
    run = await store.alice.StartRunRecord(pb.StartRunRecordRequest(run=run_record(canvas_id=canvas.id), holder="h"))
    commit = pb.CommitRunStepRequest(run_id=run.run.id, lease_token=run.lease.token,
                                     steps=[pb.RunStep(node_id="n\x00")])
    error = await expect_code(store.alice.CommitRunStep(commit), BAD)
    assert _fields(error) == ["steps[0].node_id"], error.details()
    # bytes fields may hold NULs: event payloads are opaque.
    ok = await store.alice.CommitRunStep(pb.CommitRunStepRequest(
        run_id=run.run.id, lease_token=run.lease.token,
        events=[pb.StoredRunEvent(event_type="e", payload=event_payload("\x00\x01"))]))
    assert ok.last_seq == 1


# ---- 3. undecodable requests ------------------------------------------------------------------------

def _raw(store, method: str):
    return store.channel.unary_unary(f"/agentcanvas.v1.CanvasStore/{method}",
                                     request_serializer=None, response_deserializer=None)


def _nested_dsl_bytes(depth: int) -> bytes:
    """CreateCanvasRequest{canvas{title, dsl = {"a": {"a": ... }}}} nested `depth` Structs deep, built as bytes
    (iteratively: neither protobuf nor Python recursion is involved)."""
    def field(number: int, payload: bytes) -> bytes:
        return _varint(number << 3 | 2) + _varint(len(payload)) + payload

    struct = b""
    for _ in range(depth):
        value = field(5, struct)  # Value.struct_value
        entry = field(1, b"a") + field(2, value)  # map entry key, value
        struct = field(1, entry)  # Struct.fields
    canvas = field(5, b"deep") + field(12, struct)
    return field(1, canvas)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


async def test_undecodable_requests_are_invalid_argument(store):
    metadata = (("authorization", "Bearer t-alice"),)
    for method, payload in [("GetCanvas", b"\xff\xff\xff\xff"), ("CreateCanvas", _nested_dsl_bytes(200)),
                            ("GetCanvas", b"\x0a\x02\xc3\x28")]:  # the last: invalid UTF-8 in a string
        error = await expect_code(_raw(store, method)(payload, metadata=metadata, timeout=30), BAD)
        assert _fields(error) == ["request"], (method, error.details())
    # still authenticated first
    await expect_code(_raw(store, "GetCanvas")(b"\xff", timeout=30), grpc.StatusCode.UNAUTHENTICATED)
    # streaming too
    watch = store.channel.unary_stream("/agentcanvas.v1.CanvasStore/WatchRunEvents")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in watch(b"\xff\xff", metadata=metadata, timeout=30):
            pass
    assert caught.value.code() == BAD


# ---- 4. huge echoes stay within the trailer limit ---------------------------------------------------

async def test_errors_echoing_huge_input_are_clipped(store):
    huge = "é" * 200_000
    calls = [
        store.alice.GetTemplate(pb.GetTemplateRequest(id=huge)),
        store.alice.ListCanvases(pb.ListCanvasesRequest(filter=f"{huge}:x")),
        store.alice.ListCanvases(pb.ListCanvasesRequest(order_by=huge)),
        store.alice.UpdateCanvas(pb.UpdateCanvasRequest(canvas=pb.Canvas(id="f" * 32, title="x"),
                                                        update_mask=field_mask_pb2.FieldMask(paths=[huge]))),
    ]
    for call in calls:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() in (BAD, grpc.StatusCode.NOT_FOUND), caught.value.details()
        assert len(caught.value.details().encode()) <= 1100
        for violation in status.field_violations(caught.value):
            assert len(violation.description) <= 160


async def test_many_violations_are_capped(store):
    run = await store.alice.StartRunRecord(pb.StartRunRecordRequest(
        run=run_record(canvas_id=(await create_canvas(store.alice)).id), holder="h"))
    huge_key = "k" * 5000
    state = to_struct({f"{huge_key}{i}": "\x00" for i in range(50)})
    error = await expect_code(store.alice.CommitRunStep(pb.CommitRunStepRequest(
        run_id=run.run.id, lease_token=run.lease.token, steps=[pb.RunStep(node_id="n", state=state)])), BAD)
    violations = status.field_violations(error)
    assert 1 <= len(violations) <= 6
    assert all(len(v.field) <= 300 and len(v.description) <= 160 for v in violations)


# ---- 5. ListCanvases filters ------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    'title:"' + "x" * 3000 + '"',
    'title:"a" AND title:"b"',
    "owner=alice AND owner=bob",
    "category=AGENT AND category=DATAFLOW",
    "permission=ME AND permission=TEAM",
], ids=["too long", "title twice", "owner twice", "category twice", "permission twice"])
async def test_bad_filters(store, text):
    error = await expect_code(store.alice.ListCanvases(pb.ListCanvasesRequest(filter=text)), BAD)
    assert _fields(error) == ["filter"], error.details()


async def test_repeatable_filter_terms_still_combine(store):
    tag = uuid.uuid4().hex[:12]
    created = await create_canvas(store.alice, tags=[tag, "second"])
    found = await store.alice.ListCanvases(pb.ListCanvasesRequest(filter=f'tags:"{tag}" AND tags:any("second")'))
    assert [c.id for c in found.canvases] == [created.id]


# ---- 6. run records: deleted canvases, foreign revisions and sessions -----------------------------

async def test_run_records_check_revision_and_session(store):
    canvas = await create_canvas(store.alice)
    other = await create_canvas(store.alice)
    session = await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))
    for call in (store.alice.CreateRunRecord, store.alice.StartRunRecord):
        def request(run: pb.RunRecord):
            if call is store.alice.CreateRunRecord:
                return pb.CreateRunRecordRequest(run=run)
            return pb.StartRunRecordRequest(run=run, holder="h")

        await expect_code(call(request(run_record(canvas_id=canvas.id, revision_id="f" * 32))),
                          grpc.StatusCode.NOT_FOUND)
        await expect_code(call(request(run_record(canvas_id=canvas.id, revision_id=other.head_revision_id))),
                          grpc.StatusCode.NOT_FOUND)
        error = await expect_code(call(request(run_record(canvas_id=other.id, session_id=session.id))), BAD)
        assert _fields(error) == ["run.session_id"], error.details()
        await call(request(run_record(canvas_id=canvas.id, revision_id=canvas.head_revision_id,
                                        session_id=session.id)))
    deleted = await store.alice.DeleteCanvas(pb.DeleteCanvasRequest(id=canvas.id))
    assert deleted.canvas.delete_time.seconds
    for run in (run_record(session_id=session.id), run_record(canvas_id=canvas.id, session_id=session.id)):
        error = await expect_code(store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=run)),
                                  grpc.StatusCode.FAILED_PRECONDITION)
        assert status.from_rpc_error(error).reason == "CANVAS_DELETED"
    error = await expect_code(store.service.StartRunRecord(pb.StartRunRecordRequest(
        run=run_record(session_id=session.id), holder="h")), grpc.StatusCode.FAILED_PRECONDITION)
    assert status.from_rpc_error(error).reason == "CANVAS_DELETED"


# ---- 7. sessions pinned to an unpublished canvas ----------------------------------------------------

async def test_session_pinned_to_published_without_one(store):
    canvas = await create_canvas(store.alice)
    error = await expect_code(store.alice.CreateSession(pb.CreateSessionRequest(
        canvas_id=canvas.id, revision_id="published")), grpc.StatusCode.FAILED_PRECONDITION)
    assert status.from_rpc_error(error).reason == "NOT_PUBLISHED"
    assert "published" in error.details() and canvas.id in error.details()


# ---- 8. blank member ids and empty turns ------------------------------------------------------------

async def test_blank_member_and_empty_turn(store):
    for user_id in ("", "   ", "\t\n"):
        error = await expect_code(store.alice.AddTenantMember(pb.AddTenantMemberRequest(user_id=user_id)), BAD)
        assert _fields(error) == ["user_id"], error.details()
    canvas = await create_canvas(store.alice)
    session = await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))
    error = await expect_code(store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(id=session.id)), BAD)
    assert _fields(error) == ["messages"], error.details()
    # state alone is a turn
    turned = await store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(id=session.id, state=to_struct({"a": 1})))
    assert turned.conversation_turns == 1
    # an empty state set explicitly is a turn too
    empty = pb.AppendSessionTurnRequest(id=session.id)
    empty.state.SetInParent()
    assert (await store.alice.AppendSessionTurn(empty)).conversation_turns == 2


# ---- 9. JSON nested deeper than MariaDB's JSON type holds -------------------------------------------

def _nested(levels: int) -> dict:
    """{"k": {"k": ... {}}}: `levels` objects, one inside the other."""
    value: dict = {}
    for _ in range(levels - 1):
        value = {"k": value}
    return value


def _deep_path(prefix: str, levels: int) -> str:
    """The path of the object at `levels` (1 = the value at `prefix` itself) in a `_nested` value."""
    return prefix + ".k" * (levels - 1)


async def test_dsl_nested_past_the_limit_is_refused_by_path_and_writes_nothing(store):
    # MariaDB's JSON keeps at most 31 nested objects/arrays (it failed the write as UNAVAILABLE); a DSL gets one
    # level less because a run's spec holds it one level down. The limit holds alike on every backend.
    title = unique_title()
    deepest = {**MINIMAL_DSL, "deep": _nested(29)}  # the DSL itself is level 1: 30 levels
    canvas = pb.Canvas(title=title)
    canvas.dsl.CopyFrom(to_struct({**MINIMAL_DSL, "deep": _nested(30)}))
    error = await expect_code(store.alice.CreateCanvas(pb.CreateCanvasRequest(canvas=canvas)), BAD)
    assert _fields(error) == [_deep_path("canvas.dsl.deep", 30)], error.details()
    listed = await store.alice.ListCanvases(pb.ListCanvasesRequest(filter=f'title:"{title}"'))
    assert list(listed.canvases) == []  # nothing written

    created = await create_canvas(store.alice, title=title, dsl=deepest)
    assert from_struct((await store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id))).dsl) == deepest
    too_deep = pb.Canvas(id=created.id, etag=created.etag)
    too_deep.dsl.CopyFrom(to_struct({**MINIMAL_DSL, "list": [[_nested(28)]]}))  # arrays count too: 31 levels
    error = await expect_code(store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=too_deep, update_mask=field_mask_pb2.FieldMask(paths=["dsl"]))), BAD)
    assert _fields(error) == [_deep_path("canvas.dsl.list[0][0]", 28)], error.details()
    assert (await store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id))).etag == created.etag
    # The deepest DSL still fits a run spec that holds it one level down.
    run = await store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=run_record(
        canvas_id=created.id, spec={"dsl": deepest})))
    assert from_struct((await store.alice.GetRunRecord(pb.GetRunRecordRequest(id=run.id))).spec) == {"dsl": deepest}


async def test_session_and_run_json_nested_past_the_limit_is_refused_by_path(store):
    canvas = await create_canvas(store.alice)
    session = await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))
    # A message is kept inside the history list, so it gets one level less than a state.
    error = await expect_code(store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(
        id=session.id, messages=[to_struct({"role": "user", "x": _nested(30)})])), BAD)
    assert _fields(error) == [_deep_path("messages[0].x", 30)], error.details()
    error = await expect_code(store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(
        id=session.id, state=to_struct({"x": _nested(31)}))), BAD)
    assert _fields(error) == [_deep_path("state.x", 31)], error.details()
    assert (await store.alice.GetSession(pb.GetSessionRequest(id=session.id))).conversation_turns == 0
    turned = await store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(
        id=session.id, messages=[to_struct({"role": "user", "x": _nested(29)})], state=to_struct({"x": _nested(30)})))
    assert turned.conversation_turns == 1 and from_struct(turned.state) == {"x": _nested(30)}

    error = await expect_code(store.alice.CreateRunRecord(pb.CreateRunRecordRequest(run=run_record(
        canvas_id=canvas.id, spec={"x": _nested(31)}))), BAD)
    assert _fields(error) == [_deep_path("run.spec.x", 31)], error.details()
    run = await store.alice.StartRunRecord(pb.StartRunRecordRequest(run=run_record(canvas_id=canvas.id), holder="h"))
    deep_step = pb.CommitRunStepRequest(run_id=run.run.id, lease_token=run.lease.token,
                                        steps=[pb.RunStep(node_id="n", state=to_struct({"x": _nested(31)}))])
    error = await expect_code(store.alice.CommitRunStep(deep_step), BAD)
    assert _fields(error) == [_deep_path("steps[0].state.x", 31)], error.details()
    deep_outputs = pb.CommitRunStepRequest(run_id=run.run.id, lease_token=run.lease.token,
                                           outputs=to_struct({"x": _nested(31)}))
    error = await expect_code(store.alice.CommitRunStep(deep_outputs), BAD)
    assert _fields(error) == [_deep_path("outputs.x", 31)], error.details()
    # In a batch the deep item fails alone; the other item is written.
    event = pb.CommitRunStepRequest(run_id=run.run.id, lease_token=run.lease.token,
                                    events=[pb.StoredRunEvent(event_type="e", payload=event_payload("1"))])
    batch = await store.alice.CommitRunSteps(pb.CommitRunStepsRequest(commits=[deep_outputs, event]))
    assert [result.code for result in batch.results] == [grpc.StatusCode.INVALID_ARGUMENT.value[0], 0]
    assert batch.results[1].response.last_seq == 1
    assert (await store.alice.ListRunSteps(pb.ListRunStepsRequest(run_id=run.run.id))).steps == []
    fits = await store.alice.CommitRunStep(pb.CommitRunStepRequest(
        run_id=run.run.id, lease_token=run.lease.token, steps=[pb.RunStep(node_id="n", state=to_struct(
            {"x": _nested(30)}))], outputs=to_struct({"x": _nested(30)})))
    assert fits.last_seq == 1
    steps = await store.alice.ListRunSteps(pb.ListRunStepsRequest(run_id=run.run.id))
    assert [from_struct(step.state) for step in steps.steps] == [{"x": _nested(30)}]


# ---- 10. caller ids longer than the store keeps -----------------------------------------------------

async def test_over_long_on_behalf_of_ids_are_invalid_and_record_nothing(store):
    stub = canvas_store_pb2_grpc.CanvasStoreStub(store.channel)
    tenant = f"obo-{uuid.uuid4().hex[:8]}"

    def acting_for(tenant_id: str, user_id: str):
        return (("authorization", "Bearer t-svc"), (ON_BEHALF_OF, f"{tenant_id}/{user_id}"))

    canvas = pb.Canvas(title=unique_title(), dsl=to_struct(MINIMAL_DSL))
    for tenant_id, user_id in ((tenant, "u" * 129), ("t" * 129, "user")):
        for call in (stub.CreateCanvas(pb.CreateCanvasRequest(canvas=canvas), metadata=acting_for(tenant_id, user_id),
                                       timeout=30),
                     stub.ListTenantMembers(pb.ListTenantMembersRequest(), metadata=acting_for(tenant_id, user_id),
                                            timeout=30)):
            error = await expect_code(call, BAD)
            assert _fields(error) == [ON_BEHALF_OF], error.details()
    # The refused user was not recorded: the first user seen afterwards becomes the tenant's owner.
    longest = "u" * 128
    created = await stub.CreateCanvas(pb.CreateCanvasRequest(canvas=canvas), metadata=acting_for(tenant, longest),
                                      timeout=30)
    assert created.owner_id == longest
    members = await stub.ListTenantMembers(pb.ListTenantMembersRequest(), metadata=acting_for(tenant, longest),
                                           timeout=30)
    assert [(m.user_id, m.role) for m in members.members] == [(longest, "owner")]
