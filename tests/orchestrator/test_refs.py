"""The one tokenizer/resolver/renderer (spec §3, §7 items 18-20)."""

from __future__ import annotations

import pytest

from services.orchestrator.core.refs import Resolver, UnknownReferenceError, find_refs, tokenize, whole_ref
from services.orchestrator.core.render import stringify

OUTPUTS = {
    "Agent:Foo": {"content": "hello", "structured": {"a": [1, {"b": "deep"}]}},
    "node-with-dash": {"result": 42},
    "begin": {"file": '[{"name": "x.txt"}]', "flag": False},
    "item:0": {"item": {"title": "T"}, "index": 3, "result": {"title": "T"}},
}
GLOBALS = {"sys.query": "q?", "sys.files": ["f0", "f1"], "env.cfg": {"k": "v"}, "sys.conversation_turns": 2}


def resolver(aliases: bool = False) -> Resolver:
    r = Resolver(OUTPUTS.get, GLOBALS)
    return r.with_aliases("item:0") if aliases else r


def test_braced_references_with_extra_braces_are_replaced_whole():
    r = resolver()
    assert r.render("A {Agent:Foo@content} B {{Agent:Foo@content}} C { {sys.query} }") == "A hello B hello C q?"


def test_sub_paths_for_components_and_globals():
    r = resolver()
    assert r.render("{Agent:Foo@structured.a.1.b}|{sys.files.1}|{env.cfg.k}") == "deep|f1|v"
    assert r.resolve("begin@file.0.name") == "x.txt"  # JSON strings are parsed while walking


def test_ids_with_dashes_and_case_insensitive_lookup_via_state():
    assert resolver().render("{node-with-dash@result}") == "42"


def test_whole_references_keep_their_type_bare_or_braced():
    r = resolver()
    assert r.resolve("sys.files") == ["f0", "f1"]
    assert r.resolve("{Agent:Foo@structured}") == {"a": [1, {"b": "deep"}]}
    assert r.resolve("begin@flag") is False
    assert r.resolve("plain text") == "plain text"
    assert r.resolve(7) == 7


def test_one_stringification_rule():
    assert stringify(None) == ""
    assert stringify("é") == "é"
    assert stringify(True) == "true"
    assert stringify({"ü": [1, 2]}) == '{"ü":[1,2]}'
    assert stringify(["a", "b"], joiner=", ") == "a, b"
    assert resolver().render("{sys.conversation_turns} {begin@flag}") == "2 false"


def test_iteration_aliases_only_inside_an_iteration_body():
    assert resolver(aliases=True).render("{item.title}#{index}") == "T#3"
    assert resolver().render("literal {item} stays") == "literal {item} stays"
    assert whole_ref("item") is None


def test_unknown_references_raise_a_typed_error():
    with pytest.raises(UnknownReferenceError):
        resolver().render("{Nope:1@content}")
    with pytest.raises(UnknownReferenceError):
        resolver().resolve("sys.missing")


def test_missing_fields_resolve_to_none_and_render_empty():
    r = resolver()
    assert r.resolve("Agent:Foo@nothing.here") is None
    assert r.render("[{Agent:Foo@nothing}]") == "[]"


def test_tokenizer_leaves_json_and_backslashes_alone():
    text = '{"a": 1} \\1 {sys.query}'
    assert list(tokenize(text))[0] == '{"a": 1} \\1 '
    assert resolver().render(text) == '{"a": 1} \\1 q?'
    assert [r.expr for r in find_refs({"x": ["{sys.query}", "Agent:Foo@content"], "llm_id": "m@Factory"})] == [
        "sys.query", "Agent:Foo@content"]
