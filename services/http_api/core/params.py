"""RAGFlow's query and body parameters, read as RAGFlow reads them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from services.common.structs import find_inexact_integer, find_too_deep
from services.http_api.core.errors import ApiError, RetCode, argument

MAX_PAGE_SIZE = 100
MAX_DEPTH = 64
"""How deep a JSON value from a client may nest (the store keeps DSLs shallower still)."""


class NotJson(ValueError):
    """The text is not JSON at all (a webhook then takes it as plain text)."""


def json_value(text: str, what: str) -> Any:
    """Client JSON as the services can carry it: no NaN/Infinity, at most MAX_DEPTH levels, and no integer a
    double would change (Struct numbers are doubles). Text that is not JSON is NotJson; JSON the services
    cannot carry is a RAGFlow argument error naming `what` or the path inside it."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise argument(f"{what} is nested more than {MAX_DEPTH} levels deep.") from None
    except ValueError as exc:
        raise NotJson(f"{type(exc).__name__}: {exc}") from None
    deep = find_too_deep(value, MAX_DEPTH)
    if deep is not None:
        raise argument(f"`{deep.lstrip('.') or what}` is nested more than {MAX_DEPTH} levels deep.")
    inexact = find_inexact_integer(value)
    if inexact is not None:
        raise argument(f"`{inexact[0].lstrip('.') or what}`: the integer {inexact[1]} is beyond ±2^53 and cannot be "
                       "kept exactly.")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def truthy_desc(value: Any, default: bool = True) -> bool:
    """`desc`: anything but "false" (any case) counts as true; the SDK sends Python's `True`/`False`."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() != "false"


def flag(value: Any, default: bool = False) -> bool:
    """A boolean body field that may arrive as a bool, a number or a string."""
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def page_params(query: Mapping[str, Any], *, default_order: str) -> tuple[int, int, str, bool]:
    """(page, page_size, orderby, desc). RAGFlow raises on a page size above 100 (code 100)."""
    try:
        page = int(query.get("page") or 1)
        page_size = int(query.get("page_size") or 30)
    except (TypeError, ValueError):
        raise ApiError(RetCode.EXCEPTION_ERROR, "ValueError: page and page_size must be integers") from None
    if page < 1:
        raise ApiError(RetCode.EXCEPTION_ERROR, "ValueError: page must be at least 1")
    if not 1 <= page_size <= MAX_PAGE_SIZE:
        raise ApiError(RetCode.EXCEPTION_ERROR, f"ValueError: page_size must be between 1 and {MAX_PAGE_SIZE}")
    orderby = str(query.get("orderby") or default_order)
    return page, page_size, orderby, truthy_desc(query.get("desc"))


def sort_rows(rows: list[dict[str, Any]], orderby: str, desc: bool) -> list[dict[str, Any]]:
    """RAGFlow orders by any column; unknown columns keep the store's order. Empty values sort lowest."""
    if not rows or orderby not in rows[0]:
        return rows

    values = [row.get(orderby) for row in rows]
    if not (all(isinstance(v, str | None) for v in values) or all(isinstance(v, int | float | None) for v in values)):
        return rows  # objects, lists or mixed kinds have no order: keep the store's

    def key(row: dict[str, Any]) -> tuple[int, Any]:
        value = row.get(orderby)
        if value is None:
            return (0, 0)
        return (1, value.lower() if isinstance(value, str) else value)

    return sorted(rows, key=key, reverse=desc)


def paginate(rows: list[dict[str, Any]], page: int, page_size: int) -> list[dict[str, Any]]:
    start = (page - 1) * page_size
    return rows[start:start + page_size]


def dsl_value(value: Any) -> dict[str, Any]:
    """`dsl` as an object or as JSON text (RAGFlow takes both)."""
    if isinstance(value, str):
        try:
            value = json_value(value, "dsl")
        except NotJson as exc:
            raise argument(f"Invalid DSL: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise argument("Invalid DSL: must be a JSON object.")
    return value


def text_field(body: Mapping[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise argument(f"`{name}` must be a string.")
    return value
