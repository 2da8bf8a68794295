"""DSLs carried as JSON text keep their key order; bad text is INVALID_ARGUMENT naming the field and path.
The run spec's DSL travels as a Struct plus its keys in order (orchestrator adapters/key_order.py)."""

from __future__ import annotations

import json

import pytest

from services.common.errors import InvalidArgumentError
from services.common.json_text import dump_object, parse_object, sorted_keys
from services.common.structs import from_struct, to_struct
from services.orchestrator.adapters.key_order import key_order, with_key_order

DOCUMENT = {"components": {"zeta": {"obj": {"params": {"b": 1, "a": [{"y": 1, "x": 2}]}}}, "alpha": {}},
            "globals": {"sys.query": ""}}


def test_text_keeps_the_order_python_json_keeps():
    text = '{"b": 1, "a": {"z": 1, "y": 2}, "b": 3}'  # a repeated key keeps its first place, its last value
    assert json.dumps(parse_object(text, "dsl_json")) == json.dumps(json.loads(text))
    assert list(parse_object(dump_object(DOCUMENT), "x")["components"]) == ["zeta", "alpha"]


@pytest.mark.parametrize("text, path", [
    ('{"a": NaN}', "dsl_json"), ('{"a": [1e999]}', "dsl_json"), ("[1]", "dsl_json"), ("{", "dsl_json"),
    ('{"a": {"b": "x\\u0000y"}}', "dsl_json.a.b"), ('{"a": ["\\ud800"]}', "dsl_json.a[0]"),
    ('{"a":' * 101 + "1" + "}" * 101, "dsl_json"),
])
def test_bad_text_is_invalid_argument_naming_the_path(text, path):
    with pytest.raises(InvalidArgumentError) as caught:
        parse_object(text, "dsl_json")
    assert caught.value.violations[0].field.startswith(path)


def test_a_struct_round_trip_restores_the_key_order_from_the_key_list():
    struct = to_struct({"dsl": DOCUMENT, "keys": key_order(DOCUMENT)})
    decoded = from_struct(struct)
    restored = with_key_order(decoded["dsl"], decoded["keys"])
    assert json.dumps(restored) == json.dumps(DOCUMENT)


def test_a_key_list_that_does_not_fit_leaves_the_value_as_it_is():
    value = {"b": 1, "a": 2}
    assert with_key_order(value, ["a"]) is value  # too short
    assert with_key_order(value, ["a", "c"]) is value  # other keys
    assert with_key_order(value, ["a", "b", "extra"]) is value  # too long
    assert with_key_order(value, "ab") is value  # not a list
    assert list(with_key_order(value, ["a", "b"])) == ["a", "b"]


def test_sorted_keys_gives_every_process_the_same_order():
    assert json.dumps(sorted_keys(DOCUMENT)) == json.dumps(DOCUMENT, sort_keys=True)
