"""ListCanvases filter and order_by: a small AIP-160 subset with a hand-written scanner.

Grammar (terms joined by AND, case-insensitive keyword):

    filter  := term ("AND" term)*
    term    := "title" ":" string                      -- case-insensitive substring of the title
             | "tags" ":" ("any" | "all") "(" string ("," string)* ")"   -- tags match regardless of case
             | "tags" ":" string                       -- same as tags:any("x")
             | "category" "=" ("AGENT" | "DATAFLOW")
             | "permission" "=" ("ME" | "TEAM")
             | "owner" "=" string                      -- owner user id
    string  := '"' chars with \\" and \\\\ escapes '"' | bare word [A-Za-z0-9_.@-]+

Limits: at most MAX_FILTER_CHARS characters; title, owner, category and permission may each appear once
(tags terms combine, so they may repeat).

order_by := ("update_time" | "title") [("asc" | "desc")]; default "update_time desc".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from services.canvas_store.core.types import Category, Permission
from services.common.errors import InvalidArgumentError

_BARE = re.compile(r"[A-Za-z0-9_.@\-]+")
MAX_FILTER_CHARS = 2000
MAX_ORDER_BY_CHARS = 100


@dataclass(frozen=True)
class CanvasFilter:
    title: str | None = None
    tags_any: tuple[tuple[str, ...], ...] = ()
    tags_all: tuple[str, ...] = ()
    category: Category | None = None
    permission: Permission | None = None
    owner: str | None = None

    def fingerprint(self) -> str:
        """A stable text form, used to bind page tokens to the filter."""
        return repr((self.title, self.tags_any, self.tags_all, self.category, self.permission, self.owner))


@dataclass(frozen=True)
class Ordering:
    key: str = "update_time"
    descending: bool = True

    def fingerprint(self) -> str:
        return f"{self.key} {'desc' if self.descending else 'asc'}"


@dataclass
class _Scanner:
    text: str
    pos: int = 0
    field_name: str = "filter"
    _terms: list[str] = field(default_factory=list)

    def fail(self, message: str) -> InvalidArgumentError:
        return InvalidArgumentError.for_field(self.field_name, f"{message} at position {self.pos}")

    def skip_spaces(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def at_end(self) -> bool:
        self.skip_spaces()
        return self.pos >= len(self.text)

    def expect(self, literal: str) -> None:
        self.skip_spaces()
        if not self.text.startswith(literal, self.pos):
            raise self.fail(f"expected {literal!r}")
        self.pos += len(literal)

    def peek(self, literal: str) -> bool:
        self.skip_spaces()
        return self.text.startswith(literal, self.pos)

    def word(self) -> str:
        self.skip_spaces()
        match = _BARE.match(self.text, self.pos)
        if not match:
            raise self.fail("expected a name")
        self.pos = match.end()
        return match.group(0)

    def string(self) -> str:
        self.skip_spaces()
        if not self.peek('"'):
            return self.word()
        self.pos += 1
        out: list[str] = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == "\\" and self.pos + 1 < len(self.text):
                out.append(self.text[self.pos + 1])
                self.pos += 2
                continue
            if char == '"':
                self.pos += 1
                return "".join(out)
            out.append(char)
            self.pos += 1
        raise self.fail("unterminated string")

    def string_list(self) -> tuple[str, ...]:
        self.expect("(")
        values = [self.string()]
        while self.peek(","):
            self.pos += 1
            values.append(self.string())
        self.expect(")")
        return tuple(values)


def _enum(scanner: _Scanner, enum_type, name: str):
    value = scanner.word()
    try:
        return enum_type(value.upper())
    except ValueError:
        allowed = ", ".join(member.value for member in enum_type)
        raise InvalidArgumentError.for_field(f"filter.{name}", f"unknown value {value!r} (allowed: {allowed})") from None


def parse_filter(text: str) -> CanvasFilter:
    if len(text) > MAX_FILTER_CHARS:
        raise InvalidArgumentError.for_field("filter", f"is {len(text)} characters; at most {MAX_FILTER_CHARS} allowed")
    scanner = _Scanner(text)
    if scanner.at_end():
        return CanvasFilter()
    title: str | None = None
    tags_any: list[tuple[str, ...]] = []
    tags_all: list[str] = []
    category: Category | None = None
    permission: Permission | None = None
    owner: str | None = None
    seen: set[str] = set()
    while True:
        name = scanner.word().lower()
        if name in seen and name != "tags":
            raise InvalidArgumentError.for_field(
                "filter", f"{name!r} is given more than once; each of title, owner, category and permission may "
                          "appear at most once")
        seen.add(name)
        if name == "title":
            scanner.expect(":")
            title = scanner.string()
        elif name == "tags":
            scanner.expect(":")
            scanner.skip_spaces()
            match = _BARE.match(scanner.text, scanner.pos)
            mode = match.group(0).lower() if match else ""
            if mode in ("any", "all") and scanner.text[match.end():].lstrip().startswith("("):
                scanner.pos = match.end()
                values = scanner.string_list()
                if mode == "any":
                    tags_any.append(values)
                else:
                    tags_all.extend(values)
            else:
                tags_any.append((scanner.string(),))
        elif name == "category":
            scanner.expect("=")
            category = _enum(scanner, Category, "category")
        elif name == "permission":
            scanner.expect("=")
            permission = _enum(scanner, Permission, "permission")
        elif name == "owner":
            scanner.expect("=")
            owner = scanner.string()
            if not owner:  # no canvas has an empty owner; an empty value is a mistake, not "anyone"
                raise InvalidArgumentError.for_field("filter", "owner needs a user id")
        else:
            raise InvalidArgumentError.for_field(
                "filter", f"unknown field {name!r} (allowed: title, tags, category, permission, owner)")
        if scanner.at_end():
            break
        keyword = scanner.word()
        if keyword.upper() != "AND":
            raise InvalidArgumentError.for_field("filter", f"expected AND, got {keyword!r}")
    return CanvasFilter(title, tuple(tags_any), tuple(dict.fromkeys(tags_all)), category, permission, owner)


def parse_order_by(text: str) -> Ordering:
    if len(text) > MAX_ORDER_BY_CHARS:
        raise InvalidArgumentError.for_field("order_by", f"is {len(text)} characters; use update_time or title, "
                                                         "optionally asc or desc")
    parts = text.split()
    if not parts:
        return Ordering()
    if parts[0] not in ("update_time", "title") or len(parts) > 2 or (len(parts) == 2 and parts[1].lower() not in ("asc", "desc")):
        raise InvalidArgumentError.for_field(
            "order_by", f"unsupported ordering {text!r} (use update_time or title, optionally asc or desc)")
    return Ordering(parts[0], len(parts) == 2 and parts[1].lower() == "desc")
