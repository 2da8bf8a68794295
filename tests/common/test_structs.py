"""services.common.structs: the dict <-> Struct walk keeps JSON round trips exact and agrees with
protobuf's own json_format on what it accepts."""

from __future__ import annotations

import json
import math

import pytest
from google.protobuf import json_format, struct_pb2

from agentcanvas.v1 import canvas_store_pb2 as pb

from services.common.structs import StoredJson, StructCache, from_struct, from_value, to_struct, to_value


def test_round_trip_keeps_types_and_empty_containers():
    value = {"s": "x", "i": 5, "neg": -7, "f": 1.5, "big": 2**53, "t": True, "n": None, "empty": {}, "none": [],
             "nested": {"list": [1, "a", None, {"k": [[]]}]}}
    struct = to_struct(value)
    assert struct.fields["empty"].WhichOneof("kind") == "struct_value"
    assert struct.fields["none"].WhichOneof("kind") == "list_value"
    back = from_struct(struct)
    assert back == value
    assert type(back["i"]) is int and type(back["f"]) is float and type(back["t"]) is bool
    assert from_struct(struct_pb2.Struct.FromString(struct.SerializeToString())) == value


def test_the_same_message_as_json_format_and_the_same_dict_back():
    value = {"a": [1, 2.25, {"b": None}], "c": {"d": False}, "e": ""}
    reference = struct_pb2.Struct()
    json_format.ParseDict(value, reference)
    assert to_struct(value) == reference
    assert from_struct(reference) == {"a": [1, 2.25, {"b": None}], "c": {"d": False}, "e": ""}


def test_coercions_of_values_json_has_no_type_for():
    struct = to_struct({1: (1, 2), "set": {3}, "bytes": b"caf\xc3\xa9", "obj": ValueError("boom")})
    assert from_struct(struct) == {"1": [1, 2], "set": [3], "bytes": "café", "obj": "boom"}
    assert from_struct(to_struct({"above": 2**53 + 2}))["above"] == float(2**53 + 2)  # past 2**53 it stays a float
    assert to_struct(None) == struct_pb2.Struct() and from_struct(None) == {}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_refused_on_the_way_out(bad):
    with pytest.raises(ValueError):
        from_struct(to_struct({"n": bad}))


def test_single_values():
    for value in ("x", 3, 0.5, True, None, [1, [2]], {"k": {}}):
        assert from_value(to_value(value)) == value
    assert to_value((1,)) == to_value([1])
    assert from_value(struct_pb2.Value()) is None  # no kind set reads as null


def test_struct_cache_gives_the_same_message_as_a_direct_fill_on_miss_and_hit():
    cache = StructCache(entries=4)
    value = {"components": {"begin": {"obj": {"params": {"n": 3, "x": [1.5, None, True, "é"]}}}}, "empty": {}}
    first, second = pb.Canvas(), pb.Canvas()
    cache.fill(first.dsl, value)  # miss: filled, then remembered
    cache.fill(second.dsl, value)  # hit: parsed from the remembered wire bytes
    assert first.dsl == second.dsl == to_struct(value)
    assert from_struct(second.dsl) == value


def test_struct_cache_follows_changes_to_the_value_and_sets_presence_for_empty_objects():
    cache = StructCache(entries=4)
    value = {"a": 1}
    cache.fill(pb.Canvas().dsl, value)
    value["a"] = 2  # a changed object is a different key: never the stale bytes
    changed = pb.Canvas()
    cache.fill(changed.dsl, value)
    assert from_struct(changed.dsl) == {"a": 2}
    empty = pb.Canvas()
    cache.fill(empty.dsl, {})
    assert empty.HasField("dsl") and not empty.dsl.fields


def test_struct_cache_fills_values_json_cannot_key_directly():
    cache = StructCache(entries=4, max_key_chars=16)
    for value in ({"t": (1, 2), "b": b"x"}, {"nan": math.nan}, {"long": "x" * 64}):
        message = pb.Canvas()
        cache.fill(message.dsl, value)
        assert message.dsl == to_struct(value)


def test_stored_json_is_keyed_by_its_text_and_parsed_only_on_a_miss():
    cache = StructCache(entries=4)
    value = {"components": {"begin": {"obj": {"params": {"n": 3, "x": [1.5, None, True, "é"]}}}}, "empty": {}}
    text = json.dumps(value)  # as a database hands it back: not the compact form the cache uses for dicts
    first, second = StoredJson(text), StoredJson(text)
    missed, hit = pb.Canvas(), pb.Canvas()
    cache.fill(missed.dsl, first)
    cache.fill(hit.dsl, second)
    assert missed.dsl == hit.dsl == to_struct(value)
    assert first._value is not None and second._value is None  # the hit never parsed its text
    # A dict with the same value is a different key (its compact dump) but gives the same message.
    from_dict = pb.Canvas()
    cache.fill(from_dict.dsl, value)
    assert from_dict.dsl == hit.dsl


def test_stored_json_compares_by_value():
    value = {"a": [1, {"b": None}]}
    assert StoredJson(json.dumps(value)) == value and value == StoredJson(json.dumps(value))
    assert StoredJson('{"a": [1, {"b": null}]}') == StoredJson('{"a":[1,{"b":null}]}')
    assert StoredJson('{"a": 1}') != {"a": 2} and StoredJson('{"a": 1}') != "{\"a\": 1}"
    assert StoredJson('{"a": 1}').value == {"a": 1}


# ---- input checks (NaN, infinities, NUL, lone surrogates) -------------------------------------------

from services.common.errors import InvalidArgumentError  # noqa: E402
from services.common.structs import check_struct, find_bad_value  # noqa: E402


def _nested(depth: int, leaf: struct_pb2.Value) -> struct_pb2.Struct:
    """{"a": {"a": ... leaf}} `depth` levels deep, built without recursion (innermost first)."""
    inner = struct_pb2.Struct()
    inner.fields["leaf"].CopyFrom(leaf)
    for _ in range(depth):
        outer = struct_pb2.Struct()
        outer.fields["a"].struct_value.CopyFrom(inner)
        inner = outer
    return inner


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_from_struct_with_a_field_names_the_path_of_a_non_finite_number(number):
    struct = to_struct({"components": {"begin": {"params": {"x": 1, "list": [1, 2]}}}})
    struct.fields["components"].struct_value.fields["begin"].struct_value.fields["params"].struct_value \
        .fields["list"].list_value.values[1].number_value = number
    with pytest.raises(ValueError):
        from_struct(struct)  # without a field: ValueError as before
    with pytest.raises(InvalidArgumentError) as caught:
        from_struct(struct, "canvas.dsl")
    assert [v.field for v in caught.value.violations] == ["canvas.dsl.components.begin.params.list[1]"]


def test_find_bad_value_finds_nul_in_strings_and_keys():
    assert find_bad_value(to_struct({"a": ["x", {"b": "ok"}]})) is None
    assert find_bad_value(to_struct({"a": ["x", {"b": "n\x00"}]}))[0] == ".a[1].b"
    assert find_bad_value(to_struct({"a": {"k\x00": 1}}))[0] == ".a"
    assert find_bad_value(to_struct({"a": "n\x00"}), nul=False) is None
    with pytest.raises(InvalidArgumentError) as caught:
        check_struct(to_struct({"a": "n\x00"}), "state")
    assert caught.value.violations[0].field == "state.a"


def test_find_bad_value_is_iterative_at_any_depth():
    leaf = struct_pb2.Value(number_value=math.inf)
    deep = _nested(1500, leaf)  # past Python's recursion limit; never parsed or converted recursively
    path, _problem = find_bad_value(deep)
    assert path == ".a" * 1500 + ".leaf"
    assert find_bad_value(_nested(1500, struct_pb2.Value(string_value="fine"))) is None


def test_lone_surrogates_become_question_marks():
    struct = to_struct({"k\ud800": "v\udfff", "list": ["\ud83d"], "ok": "😀"})
    assert from_struct(struct) == {"k?": "v?", "list": ["?"], "ok": "😀"}
    assert from_value(to_value("a\ud800b")) == "a?b"
    cache = StructCache()
    target = pb.Canvas()
    cache.fill(target.dsl, {"x": "\ud800"})
    assert from_struct(target.dsl) == {"x": "?"}


from services.common.structs import find_too_deep  # noqa: E402


def test_find_too_deep_names_the_first_container_past_the_limit():
    assert find_too_deep({"a": [{"b": 1}]}, 3) is None  # object, list, object: three levels
    assert find_too_deep({"a": [{"b": {}}]}, 3) == ".a[0].b"
    assert find_too_deep([[[]]], 2) == "[0][0]"
    assert find_too_deep("text", 0) is None  # a scalar is no container


def test_find_too_deep_is_iterative_past_the_recursion_limit():
    value: dict = {}
    for _ in range(5000):
        value = {"k": value}
    assert find_too_deep(value, 5001) is None  # 5,000 wrappers around an empty object
    assert find_too_deep(value, 30) == ".k" * 30
