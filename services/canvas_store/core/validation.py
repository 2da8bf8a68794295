"""Input validation shared by every use case. Each failure is INVALID_ARGUMENT naming the field."""

from __future__ import annotations

from collections.abc import Iterable

from services.canvas_store.core.ids import is_id
from services.common.errors import InvalidArgumentError

MAX_TITLE = 255
MAX_TAG = 64
MAX_TAGS = 32
MAX_REQUEST_ID = 64
MAX_USER_ID = 128
MAX_DESCRIPTION = 65_536
MAX_AVATAR = 4 << 20

# Paths UpdateCanvas may change; "*" stands for all of them.
UPDATABLE_CANVAS_FIELDS = ("title", "description", "avatar", "permission", "release", "tags", "dsl")
_OUTPUT_ONLY_CANVAS_FIELDS = {"name", "id", "tenant_id", "owner_id", "etag", "create_time", "update_time",
                              "head_revision_id", "published_revision_id", "category", "delete_time", "expire_time"}


def title(value: str, field: str = "canvas.title") -> str:
    cleaned = value.strip()
    if not cleaned:
        raise InvalidArgumentError.for_field(field, "is required and must not be blank")
    if len(cleaned) > MAX_TITLE:
        raise InvalidArgumentError.for_field(field, f"is {len(cleaned)} characters; at most {MAX_TITLE} allowed")
    return cleaned


def text(value: str, field: str, limit: int) -> str:
    if len(value) > limit:
        raise InvalidArgumentError.for_field(field, f"is {len(value)} characters; at most {limit} allowed")
    return value


def tags(values: Iterable[str], field: str = "canvas.tags") -> list[str]:
    """Trim, drop empties and case-insensitive duplicates (keeping the first spelling), check lengths."""
    result: list[str] = []
    seen: set[str] = set()
    for index, raw in enumerate(values):
        tag = raw.strip()
        if not tag:
            continue
        if len(tag) > MAX_TAG:
            raise InvalidArgumentError.for_field(f"{field}[{index}]", f"is longer than {MAX_TAG} characters")
        if tag.lower() not in seen:
            seen.add(tag.lower())
            result.append(tag)
    if len(result) > MAX_TAGS:
        raise InvalidArgumentError.for_field(field, f"has {len(result)} tags; at most {MAX_TAGS} allowed")
    return result


def resource_id(value: str, field: str) -> str:
    if not value:
        raise InvalidArgumentError.for_field(field, "is required")
    if not is_id(value):
        raise InvalidArgumentError.for_field(field, "must be a 32-character lowercase hex id")
    return value


def same_request(stored_fingerprint: str, fingerprint: str, field: str = "request_id") -> None:
    """A request_id names one request: replaying it with another payload is a client bug, not a retry.

    An empty stored fingerprint (a key written before fingerprints existed) is trusted as before.
    """
    if stored_fingerprint and stored_fingerprint != fingerprint:
        raise InvalidArgumentError.for_field(
            field, "was already used for a request with a different payload; use a new request_id",
            reason="REQUEST_ID_REUSED")


def request_id(value: str, field: str = "request_id") -> str:
    if len(value) > MAX_REQUEST_ID:
        raise InvalidArgumentError.for_field(field, f"must be at most {MAX_REQUEST_ID} characters (a UUID)")
    return value


def user_id(value: str, field: str) -> str:
    if len(value) > MAX_USER_ID:
        raise InvalidArgumentError.for_field(field, f"must be at most {MAX_USER_ID} characters")
    return value


def page_size(value: int, *, default: int = 20, maximum: int = 100, field: str = "page_size") -> int:
    """AIP-158: 0 means the default, values above the maximum are coerced, negatives are rejected."""
    if value < 0:
        raise InvalidArgumentError.for_field(field, "must not be negative")
    if value == 0:
        return default
    return min(value, maximum)


def canvas_update_mask(paths: list[str]) -> list[str]:
    """Expand and check an UpdateCanvas field mask against the allow-list."""
    if "*" in paths:
        if len(paths) > 1:
            raise InvalidArgumentError.for_field("update_mask", "'*' cannot be combined with other paths")
        return list(UPDATABLE_CANVAS_FIELDS)
    result: list[str] = []
    for path in paths:
        if path in _OUTPUT_ONLY_CANVAS_FIELDS:
            raise InvalidArgumentError.for_field(f"update_mask.{path}", "is output only or immutable")
        if path not in UPDATABLE_CANVAS_FIELDS:
            allowed = ", ".join(UPDATABLE_CANVAS_FIELDS)
            raise InvalidArgumentError.for_field(f"update_mask.{path}", f"is not an updatable field (allowed: {allowed}, *)")
        if path not in result:
            result.append(path)
    return result
