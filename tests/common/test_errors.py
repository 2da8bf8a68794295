"""services.common errors and statuses: clipping of echoed input, undecodable requests."""

from __future__ import annotations

import base64

import grpc
from google.protobuf import struct_pb2
from google.rpc import error_details_pb2, status_pb2

from services.common import errors, status
from services.common.interceptors import UndecodableRequest, tolerant_deserializer


def _parsed(rich: grpc.Status) -> status_pb2.Status:
    return status_pb2.Status.FromString(dict(rich.trailing_metadata)["grpc-status-details-bin"])


def _violations(parsed: status_pb2.Status) -> list[error_details_pb2.BadRequest.FieldViolation]:
    for detail in parsed.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            return list(bad.field_violations)
    return []


def test_clip_utf8_cuts_at_a_character_boundary():
    assert errors.clip_utf8("short", 10) == "short"
    clipped = errors.clip_utf8("é" * 1000, 100)
    assert len(clipped.encode()) <= 100 and clipped.endswith(errors.ELLIPSIS)
    assert set(clipped[:-1]) == {"é"}
    for text in ("a" * 50 + "😀" * 50, "日本語" * 100):
        for limit in range(1, 60):
            cut = errors.clip_utf8(text, limit)
            assert len(cut.encode()) <= max(limit, len(errors.ELLIPSIS.encode()))
            cut.encode("utf-8")  # decodable, no half characters
    assert errors.clip_utf8("lone \ud800 surrogate", 100) == "lone ? surrogate"


def test_clip_chars_limits_characters_and_bytes():
    assert errors.clip_chars("x" * 150, 150) == "x" * 150
    assert len(errors.clip_chars("x" * 151, 150)) == 150
    assert len(errors.clip_chars("😀" * 150, 150, 200).encode()) <= 200


def test_status_of_a_huge_error_fits_the_trailer_limit():
    huge = "é" * 100_000
    exc = errors.InvalidArgumentError(
        f"bad: {huge}", violations=[errors.FieldViolation(f"canvas.dsl.{huge}{i}", huge) for i in range(40)],
        metadata={"echo": huge})
    rich = status.to_rpc_status(exc)
    assert rich.code == grpc.StatusCode.INVALID_ARGUMENT
    assert len(rich.details.encode()) <= errors.MAX_MESSAGE_BYTES
    assert rich.details.endswith("(+35 more field violations not shown)")
    parsed = _parsed(rich)
    violations = _violations(parsed)
    assert len(violations) == errors.MAX_VIOLATIONS
    assert all(len(v.field.encode()) <= errors.MAX_FIELD_BYTES for v in violations)
    assert all(len(v.description) <= errors.MAX_DESCRIPTION_CHARS for v in violations)
    info = error_details_pb2.ErrorInfo()
    parsed.details[0].Unpack(info)
    assert info.metadata["omitted_violations"] == "35" and len(info.metadata["echo"]) <= errors.MAX_DESCRIPTION_CHARS
    # What goes on the wire: the percent-encoded message plus the base64 details, well under 8 KiB.
    details_bin = dict(rich.trailing_metadata)["grpc-status-details-bin"]
    wire = 3 * len(rich.details.encode()) + len(base64.b64encode(details_bin))
    assert wire < 7200, wire


def test_small_statuses_are_unchanged():
    exc = errors.InvalidArgumentError.for_field("canvas.title", "is required")
    rich = status.to_rpc_status(exc)
    assert rich.details == "canvas.title: is required"
    assert [(v.field, v.description) for v in _violations(_parsed(rich))] == [("canvas.title", "is required")]
    not_found = status.to_rpc_status(errors.NotFoundError("x" * 5000, resource_type="canvas", resource_name="y" * 5000))
    assert len(not_found.details) <= errors.MAX_MESSAGE_BYTES


def test_tolerant_deserializer_turns_decode_failures_into_a_marker():
    decode = tolerant_deserializer(struct_pb2.Struct.FromString)
    assert decode(struct_pb2.Struct().SerializeToString()) == struct_pb2.Struct()
    bad = decode(b"\xff\xff\xff")
    assert isinstance(bad, UndecodableRequest) and bad.error is not None
    assert tolerant_deserializer(None) is None


def test_an_error_quoting_a_configured_secret_carries_it_masked():
    from services.common.errors import FieldViolation, InvalidArgumentError, UnavailableError
    from services.common.logging import register_secrets

    register_secrets(["upstream-echoed-key-77"])
    error = UnavailableError("HTTP 401: bad key upstream-echoed-key-77", metadata={"body": "upstream-echoed-key-77"})
    assert error.message == "HTTP 401: bad key ***" and error.metadata == {"body": "***"} and "upstream-echoed" not in str(error)
    bad = InvalidArgumentError("x", violations=[FieldViolation("mcp[0]", "unreachable: upstream-echoed-key-77")])
    assert bad.violations[0].description == "unreachable: ***"


def test_messages_name_kinds_with_the_right_article():
    from services.common.errors import with_article

    assert [with_article(w) for w in ("agent", "dataflow", "Iteration", "assistant", "tool", "LLM", "SQL", "MCP", "mysql")] == [
        "an agent", "a dataflow", "an Iteration", "an assistant", "a tool", "an LLM", "an SQL", "an MCP", "a mysql"]
