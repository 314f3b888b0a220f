"""Argument coercion follows the JSON schema: text becomes the declared type, declared strings are never
touched, and text that fits no declared type stays as written (validation then reports it)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout.interpret import coerce_arguments, coerce_json, coerce_text

JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
JSON_VALUES = st.recursive(JSON_LEAVES, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
TYPED = [
    ("boolean", st.booleans()),
    ("integer", st.integers()),
    ("number", st.floats(allow_nan=False, allow_infinity=False) | st.integers()),
    ("array", st.lists(JSON_VALUES, max_size=4)),
    ("object", st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=4)),
    ("null", st.none()),
]


@settings(max_examples=200, deadline=None)
@given(data=st.data(), case=st.sampled_from(TYPED), nullable=st.booleans())
def test_text_of_a_declared_type_becomes_that_type(data, case, nullable):
    type_name, values = case
    value = data.draw(values)
    schema = {"anyOf": [{"type": type_name}, {"type": "null"}]} if nullable else {"type": type_name}
    coerced = coerce_text(json.dumps(value), schema, schema)
    assert coerced == value and type(coerced) is type(value)
    assert coerce_json(json.dumps(value), schema, schema) == value  # a Hermes string where no string is allowed


@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_declared_strings_are_untouched(text):
    for schema in ({"type": "string"}, {"type": ["string", "integer"]}, {"enum": ["a", "b"]}):
        assert coerce_text(text, schema, schema) == text
        assert coerce_json(text, schema, schema) == text


ACCEPTED = {"boolean": (bool,), "integer": (int,), "number": (int, float), "array": (list,), "object": (dict,)}


@settings(max_examples=200, deadline=None)
@given(text=st.text(), type_name=st.sampled_from(sorted(ACCEPTED)))
def test_text_becomes_the_declared_type_or_stays_raw(text, type_name):
    coerced = coerce_text(text, {"type": type_name}, {})
    if isinstance(coerced, str):
        assert coerced == text
    else:
        assert isinstance(coerced, ACCEPTED[type_name]) and (type_name == "boolean") == isinstance(coerced, bool)


@pytest.mark.parametrize(("raw", "schema", "expected"), [
    ("TRUE", {"type": "boolean"}, True),
    (" 42\n", {"type": "integer"}, 42),
    ("4.5", {"type": "integer"}, "4.5"),
    ("1e400", {"type": "number"}, "1e400"),
    ("NaN", {"type": "number"}, "NaN"),
    ("true", {"type": "integer"}, "true"),
    ("null", {"anyOf": [{"type": "string"}, {"type": "null"}]}, None),
    ("null", {"type": "string"}, "null"),
    ("7", {"type": ["integer", "string"]}, "7"),
    ("7", {"allOf": [{"type": "integer", "minimum": 0}]}, 7),
    ("2", {"enum": [1, 2]}, 2),
    ('{"a": 1}', {}, '{"a": 1}'),
    ("[1]", {"$ref": "#/$defs/missing"}, "[1]"),
])
def test_coercion_examples(raw, schema, expected):
    assert coerce_text(raw, schema, schema) == expected


def test_arguments_follow_their_properties_through_refs():
    parameters = {"type": "object", "$defs": {"Count": {"$ref": "#/$defs/Int"}, "Int": {"type": "integer"}},
                  "properties": {"n": {"$ref": "#/$defs/Count"}, "s": {"type": "string"}}}
    assert coerce_arguments({"n": "3", "s": "3", "extra": "3"}, parameters, text_values=True) == \
        {"n": 3, "s": "3", "extra": "3"}
    assert coerce_arguments({"n": 3.5, "s": "3"}, parameters, text_values=False) == {"n": 3.5, "s": "3"}
    cyclic = {"type": "object", "$defs": {"A": {"$ref": "#/$defs/A"}}, "properties": {"a": {"$ref": "#/$defs/A"}}}
    assert coerce_arguments({"a": "1"}, cyclic, text_values=True) == {"a": "1"}
