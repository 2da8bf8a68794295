"""Input validation shared by every use case. Each failure is INVALID_ARGUMENT naming the field."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any

from services.canvas_store.core.ids import is_id
from services.common.errors import InvalidArgumentError
from services.common.structs import find_too_deep

MAX_TITLE = 255
MAX_TAG = 64
MAX_TAGS = 32
MAX_REQUEST_ID = 64
MAX_USER_ID = 128
MAX_DESCRIPTION = 65_536
MAX_AVATAR = 4 << 20
MAX_JSON_DEPTH = 31
"""Objects and arrays nested in one stored JSON value. MariaDB's JSON type holds at most 31 (error 4040 at 32,
which failed the write as UNAVAILABLE), so every backend refuses deeper values alike, naming the path."""

# Paths UpdateCanvas may change; "*" stands for all of them.
UPDATABLE_CANVAS_FIELDS = ("title", "description", "avatar", "permission", "release", "tags", "dsl")
_OUTPUT_ONLY_CANVAS_FIELDS = {"name", "id", "tenant_id", "owner_id", "etag", "create_time", "update_time",
                              "head_revision_id", "published_revision_id", "category", "delete_time", "expire_time"}


def _control_character(value: str) -> str | None:
    """The first control character (Unicode category Cc: C0, DEL, C1) in `value`, or None."""
    for char in value:
        if unicodedata.category(char) == "Cc":
            return char
    return None


def _invisible(value: str) -> bool:
    """Whether `value` has nothing to show: only whitespace and format characters (zero-width space, BOM, ...)."""
    return all(char.isspace() or unicodedata.category(char) == "Cf" for char in value)


def case_key(value: str) -> str:
    """The case-insensitive key of a title (uniqueness per owner and category, the `title:` filter) or of a
    tag (de-duplication, `tags:` filters).

    Lower case, one character for one: `str.lower` turns U+0130 (capital I with dot) into two characters,
    which would let a 255-character title overflow the 255-character `title_key` column (or a tag its
    64-character column) on PostgreSQL and MariaDB; such a character keeps only the first character of its
    lower-case form ("i"). Migration 0007 keeps a frozen copy: change both or neither.
    """
    key = value.lower()
    if len(key) == len(value):
        return key
    return "".join(char.lower()[0] for char in value)


def title(value: str, field: str = "canvas.title") -> str:
    """Trimmed; 1..MAX_TITLE characters, something visible, no control characters (a title is one line)."""
    cleaned = value.strip()
    if not cleaned or _invisible(cleaned):
        raise InvalidArgumentError.for_field(field, "is required and must not be blank")
    if len(cleaned) > MAX_TITLE:
        raise InvalidArgumentError.for_field(field, f"is {len(cleaned)} characters; at most {MAX_TITLE} allowed")
    bad = _control_character(cleaned)
    if bad is not None:
        raise InvalidArgumentError.for_field(field, f"contains the control character U+{ord(bad):04X}; a title is one "
                                                    "line of text")
    return cleaned


def text(value: str, field: str, limit: int) -> str:
    """At most `limit` bytes of UTF-8 (what the database stores, whatever the script)."""
    if len(value) * 4 <= limit:  # UTF-8 takes at most 4 bytes a character: no need to encode
        return value
    if len(value) > limit or len(value.encode("utf-8", "surrogatepass")) > limit:
        raise InvalidArgumentError.for_field(field, f"is {len(value.encode('utf-8', 'surrogatepass'))} bytes of "
                                                    f"UTF-8; at most {limit} allowed")
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
        bad = _control_character(tag)
        if bad is not None:
            raise InvalidArgumentError.for_field(f"{field}[{index}]", f"contains the control character U+{ord(bad):04X}")
        if case_key(tag) not in seen:
            seen.add(case_key(tag))
            result.append(tag)
    if len(result) > MAX_TAGS:
        raise InvalidArgumentError.for_field(field, f"has {len(result)} tags; at most {MAX_TAGS} allowed")
    return result


def json_depth(value: Any, field: str, limit: int = MAX_JSON_DEPTH) -> None:
    """INVALID_ARGUMENT naming the path (`field.key[0]...`) of the first object or array nested deeper than
    `limit` levels in a JSON-shaped value (the value itself is level 1)."""
    if (where := find_too_deep(value, limit)) is not None:
        raise InvalidArgumentError.for_field(field + where, f"nests objects and arrays more than {limit} levels deep")


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


def caller_ids(tenant_id: str, user_id: str, field: str = "x-agentcanvas-on-behalf-of") -> None:
    """The caller's tenant and user ids must fit the store's id columns (MAX_USER_ID characters on every backend;
    PostgreSQL and MariaDB refused longer ones as INTERNAL). They come from the token, or from a service
    principal's on-behalf-of header, which is what `field` names."""
    for kind, value in (("tenant", tenant_id), ("user", user_id)):
        if len(value) > MAX_USER_ID:
            raise InvalidArgumentError.for_field(
                field, f"names a {kind} id of {len(value)} characters; the store keeps ids of at most {MAX_USER_ID}")


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
    for index, path in enumerate(paths):
        if not path.strip():
            raise InvalidArgumentError.for_field(f"update_mask.paths[{index}]", "is empty; name a field")
        if path in _OUTPUT_ONLY_CANVAS_FIELDS:
            raise InvalidArgumentError.for_field(f"update_mask.{path}", "is output only or immutable")
        if path not in UPDATABLE_CANVAS_FIELDS:
            allowed = ", ".join(UPDATABLE_CANVAS_FIELDS)
            raise InvalidArgumentError.for_field(f"update_mask.{path}", f"is not an updatable field (allowed: {allowed}, *)")
        if path not in result:
            result.append(path)
    return result
