"""RAGFlow's return codes, and the one error type the core raises.

RAGFlow answers most failures with HTTP 200 and a non-zero `code` in the JSON body (its clients read
the body, never the status); only authentication (401) and routing (404/405) change the HTTP status.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from services.common import errors


class RetCode(IntEnum):
    """RAGFlow's `RetCode` (common/constants.py), the values its clients compare against."""

    SUCCESS = 0
    EXCEPTION_ERROR = 100
    ARGUMENT_ERROR = 101
    DATA_ERROR = 102
    OPERATING_ERROR = 103
    PERMISSION_ERROR = 108
    AUTHENTICATION_ERROR = 109
    BAD_REQUEST = 400
    UNAUTHORIZED = 401
    FORBIDDEN = 403
    NOT_FOUND = 404
    CONFLICT = 409
    SERVER_ERROR = 500


class ApiError(Exception):
    """A failure as RAGFlow reports it: `{"code": code, "message": message[, "data": data]}`."""

    def __init__(self, code: RetCode, message: str, *, data: Any = None, http_status: int = 200,
                 reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.http_status = http_status
        self.reason = reason

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": int(self.code), "message": self.message}
        if self.data is not None or self.http_status != 200:
            body["data"] = self.data
        return body


def argument(message: str) -> ApiError:
    return ApiError(RetCode.ARGUMENT_ERROR, message)


def data_error(message: str) -> ApiError:
    return ApiError(RetCode.DATA_ERROR, message)


def unauthorized(message: str, reason: str = "") -> ApiError:
    return ApiError(RetCode.UNAUTHORIZED, message, http_status=401, reason=reason)


def _with_reason(text: str, exc: errors.AgentCanvasError) -> str:
    """RAGFlow's wording first (clients match on it), then our reason code and detail, so a message is never bare."""
    detail = exc.message if not exc.reason else f"{exc.reason}: {exc.message}"
    return f"{text} ({detail})" if text else detail


def from_domain(exc: errors.AgentCanvasError, *, not_found: str = "", denied: str = "") -> ApiError:
    """Map an error of a store or orchestrator call onto RAGFlow's codes, keeping our reason code."""
    if isinstance(exc, errors.InvalidArgumentError):
        return ApiError(RetCode.ARGUMENT_ERROR, _with_reason("", exc), reason=exc.reason or "")
    if isinstance(exc, errors.NotFoundError):
        return ApiError(RetCode.DATA_ERROR, _with_reason(not_found, exc), reason=exc.reason or "")
    if isinstance(exc, errors.PermissionDeniedError):
        return ApiError(RetCode.OPERATING_ERROR, _with_reason(denied or "Make sure you have permission to access the agent.", exc),
                        data=False, reason=exc.reason or "")
    if isinstance(exc, errors.UnauthenticatedError):
        return ApiError(RetCode.UNAUTHORIZED, _with_reason("<Unauthorized 401: Unauthorized>", exc), http_status=401,
                        reason=exc.reason or "")
    if isinstance(exc, (errors.AlreadyExistsError, errors.AbortedError, errors.FailedPreconditionError)):
        return ApiError(RetCode.DATA_ERROR, _with_reason("", exc), reason=exc.reason or "")
    if isinstance(exc, errors.UnavailableError):
        return ApiError(RetCode.EXCEPTION_ERROR, _with_reason("a backend service is unavailable", exc), reason=exc.reason or "")
    return ApiError(RetCode.EXCEPTION_ERROR, _with_reason("", exc), reason=exc.reason or "")

DENIED = "Make sure you have permission to access the agent."
"""RAGFlow's message when an agent is not the caller's (or does not exist): the two are not told apart."""
