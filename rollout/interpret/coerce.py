"""Typing argument values by the tool's JSON schema.

In qwen3_xml every value is text, so its type must come from the schema: "true" becomes True for a boolean,
"7" becomes 7 for an integer, "[1, 2]" a list for an array, "null" None where null is allowed. A value
declared as a string stays exactly as written, even where other types are allowed too (a mixed enum such as
["low", 3] gets "3"), except the literal "null" where null is also allowed: that is how the layout writes
None. A value that does not parse as any declared type stays the raw string, and schema validation then
reports it to the agent.

Hermes values are already typed JSON; only a string where the schema allows no string is coerced the same
way (a model writing "7" for an integer), so a string the schema accepts is never touched.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from rollout.interpret.nesting import MAX_NESTING, nesting

# the order in which a value that is not a declared string is tried
_NON_STRING_TYPES = ("boolean", "integer", "number", "array", "object")
_MAX_REF_DEPTH = 16  # $ref chains deeper than this (or cycles) count as untyped
_NO_VALUE = object()


def json_type(value: Any) -> str:
    """The JSON-schema type name of a Python JSON value."""
    if value is None:
        return "null"
    for python_type, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
                              (list, "array"), (dict, "object")):
        if isinstance(value, python_type):
            return name
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def declared_types(schema: Any, root: Mapping[str, Any], depth: int = 0) -> set[str]:
    """Every JSON type `schema` allows, through type, anyOf/oneOf/allOf, enum/const and local $refs."""
    if not isinstance(schema, Mapping) or depth > _MAX_REF_DEPTH:
        return set()
    if isinstance(ref := schema.get("$ref"), str):
        return declared_types(_resolve(ref, root), root, depth + 1)
    found = schema.get("type")
    types = {found} if isinstance(found, str) else {t for t in found or () if isinstance(t, str)}
    for key in ("anyOf", "oneOf", "allOf"):
        for member in schema.get(key) or ():
            types |= declared_types(member, root, depth + 1)
    values = list(schema.get("enum") or ()) + ([schema["const"]] if "const" in schema else [])
    types |= {json_type(v) for v in values if v is None or isinstance(v, bool | int | float | str | list | dict)}
    return types


def _resolve(ref: str, root: Mapping[str, Any]) -> Any:
    """A local JSON pointer such as "#/$defs/Kind"; anything else resolves to nothing."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in filter(None, ref[1:].split("/")):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part.replace("~1", "/").replace("~0", "~"))
    return node


def coerce_text(raw: str, schema: Any, root: Mapping[str, Any]) -> Any:
    """A value written as text, typed by `schema` (see the module docstring)."""
    types = declared_types(schema, root)
    if "null" in types and raw.strip() == "null":
        return None
    if not types or "string" in types:
        return raw
    for name in _NON_STRING_TYPES:
        if name in types and (value := _parse(name, raw.strip())) is not _NO_VALUE:
            return value
    return raw


def coerce_json(value: Any, schema: Any, root: Mapping[str, Any]) -> Any:
    """A typed JSON value: only a string where no string is allowed is coerced."""
    if isinstance(value, str) and "string" not in declared_types(schema, root):
        return coerce_text(value, schema, root)
    return value


def coerce_arguments(arguments: Mapping[str, Any], parameters: Mapping[str, Any], *, text_values: bool
                     ) -> dict[str, Any]:
    """Each argument typed by its property in the tool's `parameters` schema; undeclared ones kept as given."""
    properties = parameters.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    coerce = coerce_text if text_values else coerce_json
    return {key: coerce(value, properties[key], parameters) if key in properties else value
            for key, value in arguments.items()}


def _parse(type_name: str, text: str) -> Any:
    if type_name == "boolean":
        return {"true": True, "false": False}.get(text.lower(), _NO_VALUE)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, a number past Python's digit limit, or nested too deep
        return _NO_VALUE
    if nesting(value) > MAX_NESTING:
        return _NO_VALUE
    accepted = {"integer": (int,), "number": (int, float), "array": (list,), "object": (dict,)}[type_name]
    if isinstance(value, bool) or not isinstance(value, accepted):
        return _NO_VALUE
    if isinstance(value, float) and not math.isfinite(value):
        return _NO_VALUE
    return value
