"""The single translation between domain errors and gRPC statuses (both directions).

Server side: `to_rpc_status(exc)` builds a google.rpc.Status with ErrorInfo (always) plus BadRequest,
ResourceInfo or RetryInfo details. Client side: `from_rpc_error(err)` rebuilds the same domain class,
so callers catch `NotFoundError`, never `grpc.aio.AioRpcError`.
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from services.common import errors

DOMAIN = "agentcanvas.dev"

# Most specific first; every class maps to exactly one code.
_CODE_BY_CLASS: tuple[tuple[type[errors.AgentCanvasError], grpc.StatusCode], ...] = (
    (errors.InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotFoundError, grpc.StatusCode.NOT_FOUND),
    (errors.AlreadyExistsError, grpc.StatusCode.ALREADY_EXISTS),
    (errors.PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),
    (errors.UnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
    (errors.FailedPreconditionError, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.AbortedError, grpc.StatusCode.ABORTED),
    (errors.ResourceExhaustedError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.DeadlineExceededError, grpc.StatusCode.DEADLINE_EXCEEDED),
    (errors.CancelledError, grpc.StatusCode.CANCELLED),
    (errors.UnavailableError, grpc.StatusCode.UNAVAILABLE),
    (errors.InternalError, grpc.StatusCode.INTERNAL),
)
_CLASS_BY_CODE = {code: cls for cls, code in _CODE_BY_CLASS}


def code_for(exc: errors.AgentCanvasError) -> grpc.StatusCode:
    for cls, code in _CODE_BY_CLASS:
        if isinstance(exc, cls):
            return code
    return grpc.StatusCode.INTERNAL


def _pack(message) -> any_pb2.Any:
    detail = any_pb2.Any()
    detail.Pack(message)
    return detail


def to_rpc_status(exc: errors.AgentCanvasError) -> grpc.Status:
    """Build the rich status for a domain error.

    Everything that can echo input is clipped (errors.MAX_*): the message to 1000 UTF-8 bytes, each
    description, metadata value and resource name to 150 characters (200 bytes), field paths to 120 bytes, and at most
    5 field violations are sent (ErrorInfo.metadata["omitted_violations"] and the message say how many more).
    So a status always fits the client's 8 KiB trailing-metadata limit.
    """
    code = code_for(exc)
    violations = exc.violations if isinstance(exc, errors.InvalidArgumentError) else []
    omitted = max(0, len(violations) - errors.MAX_VIOLATIONS)
    note = f" (+{omitted} more field violations not shown)" if omitted else ""
    message = errors.clip_utf8(exc.message, errors.MAX_MESSAGE_BYTES - len(note)) + note
    status = status_pb2.Status(code=code.value[0], message=message)
    metadata = {_clip(key): _clip(value) for key, value in exc.metadata.items()}
    if omitted:
        metadata["omitted_violations"] = str(omitted)
    info = error_details_pb2.ErrorInfo(reason=_clip(exc.reason), domain=DOMAIN, metadata=metadata)
    status.details.append(_pack(info))
    if violations:
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=errors.clip_utf8(v.field, errors.MAX_FIELD_BYTES),
                                                            description=_clip(v.description))
                for v in violations[: errors.MAX_VIOLATIONS]
            ]
        )
        status.details.append(_pack(bad))
    if isinstance(exc, errors.NotFoundError) and (exc.resource_type or exc.resource_name):
        status.details.append(_pack(error_details_pb2.ResourceInfo(resource_type=_clip(exc.resource_type),
                                                                   resource_name=_clip(exc.resource_name))))
    if isinstance(exc, errors.ResourceExhaustedError) and exc.retry_after_s is not None:
        delay = duration_pb2.Duration()
        delay.FromMilliseconds(int(exc.retry_after_s * 1000))
        status.details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    return rpc_status.to_status(status)


def _clip(text: str) -> str:
    return errors.clip_chars(text, errors.MAX_DESCRIPTION_CHARS, errors.MAX_DESCRIPTION_BYTES)


def internal_status(message: str = "internal error") -> grpc.Status:
    status = status_pb2.Status(code=code_pb2.INTERNAL, message=message)
    status.details.append(_pack(error_details_pb2.ErrorInfo(reason="INTERNAL", domain=DOMAIN)))
    return rpc_status.to_status(status)


def _details_from_trailers(err: grpc.aio.AioRpcError) -> status_pb2.Status | None:
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            parsed = status_pb2.Status()
            parsed.MergeFromString(value)
            return parsed
    return None


def from_rpc_error(err: grpc.aio.AioRpcError | grpc.RpcError) -> errors.AgentCanvasError:
    """Turn a failed call back into the domain error the server raised."""
    code = err.code()
    message = err.details() or code.name
    cls = _CLASS_BY_CODE.get(code, errors.InternalError if code != grpc.StatusCode.UNKNOWN else errors.UnavailableError)
    reason, metadata, violations, retry_after = None, {}, [], None
    parsed = _details_from_trailers(err) if isinstance(err, grpc.aio.AioRpcError) else None
    for detail in parsed.details if parsed else ():
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason, metadata = info.reason, dict(info.metadata)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations = [errors.FieldViolation(v.field, v.description) for v in bad.field_violations]
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            retry_after = retry.retry_delay.ToMilliseconds() / 1000
    if cls is errors.InvalidArgumentError:
        return errors.InvalidArgumentError(message, violations=violations, reason=reason, metadata=metadata)
    if cls is errors.ResourceExhaustedError:
        return errors.ResourceExhaustedError(message, retry_after_s=retry_after, reason=reason, metadata=metadata)
    return cls(message, reason=reason, metadata=metadata)


def field_violations(err: grpc.aio.AioRpcError) -> list[errors.FieldViolation]:
    """The BadRequest field violations of a failed call (empty when none). Handy in tests and the CLI."""
    converted = from_rpc_error(err)
    return list(getattr(converted, "violations", []))
