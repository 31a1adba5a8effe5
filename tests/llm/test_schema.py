from __future__ import annotations

import json
from typing import Any

from sp4rk.llm._schema import (
    SAFE_EMPTY_OBJECT,
    anthropic_input_schema,
    openai_parameters,
    openai_strict_parameters,
    sanitize_for_anthropic,
    sanitize_for_openai,
)

PYDANTIC_LIKE: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$defs": {
        "Point": {
            "type": "object",
            "properties": {"x": {"type": "integer", "default": 0}, "y": {"type": "integer"}},
            "required": ["x", "y"],
        }
    },
    "type": "object",
    "properties": {
        "where": {"$ref": "#/$defs/Point"},
        "label": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
    },
    "required": ["where"],
    "additionalProperties": False,
}


def test_openai_resolves_refs_and_drops_documentation_keywords() -> None:
    out = sanitize_for_openai(PYDANTIC_LIKE)
    assert "$schema" not in out
    assert "$defs" not in out
    where = out["properties"]["where"]
    assert where["properties"]["x"] == {"type": "integer"}  # default dropped
    assert where["required"] == ["x", "y"]
    # optional parameters stay optional (no forced "required" outside strict mode)
    assert out["required"] == ["where"]
    assert out["properties"]["label"]["anyOf"] == [{"type": "string"}, {"type": "null"}]


def test_openai_keeps_ref_without_definitions_and_infers_object_type() -> None:
    out = sanitize_for_openai({"properties": {"a": {"$ref": "#/elsewhere"}}})
    assert out["type"] == "object"
    assert out["properties"]["a"] == {"$ref": "#/elsewhere"}


def test_unknown_refs_become_the_safe_empty_object_and_cycles_stay_references() -> None:
    cyclic = {
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "type": "object",
        "properties": {"head": {"$ref": "#/$defs/Node"}, "bad": {"$ref": "#/$defs/Missing"}},
    }
    out = sanitize_for_openai(cyclic)
    assert out["properties"]["bad"] == SAFE_EMPTY_OBJECT
    assert out["properties"]["head"] == {"$ref": "#/$defs/Node"}
    assert out["$defs"]["Node"]["properties"]["next"] == {"$ref": "#/$defs/Node"}


def test_empty_schema_gives_the_safe_empty_object() -> None:
    assert openai_parameters({}) == SAFE_EMPTY_OBJECT
    assert openai_strict_parameters({}) == (None, True)
    assert anthropic_input_schema({}) == {"type": "object", "properties": {}}


def test_strict_only_when_the_schema_already_is_closed_and_fully_required() -> None:
    closed = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["n", "path"],
    }
    params, strict = openai_strict_parameters(closed)
    assert strict is True
    assert params is not None
    assert params["additionalProperties"] is False
    assert params["required"] == ["n", "path"]

    params, strict = openai_strict_parameters(PYDANTIC_LIKE)  # "label" is optional
    assert strict is False
    assert params is not None
    assert params["required"] == ["where"]

    free_form = {"type": "object", "properties": {"data": {"type": "object"}}, "required": ["data"]}
    assert openai_strict_parameters(free_form)[1] is False


def test_anthropic_keeps_nested_unions_merges_top_level_composition_and_drops_refs() -> None:
    out = sanitize_for_anthropic(PYDANTIC_LIKE)
    assert "$defs" not in out
    assert out["properties"]["label"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "default": None,
    }
    assert out["properties"]["where"]["required"] == ["x", "y"]

    merged = sanitize_for_anthropic(
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
            ],
            "patternProperties": {"^x": {}},
        }
    )
    assert merged["type"] == "object"
    assert set(merged["properties"]) == {"a", "b"}
    assert merged["required"] == ["a", "b"]
    assert "patternProperties" not in merged
    assert sanitize_for_anthropic({"properties": {"r": {"$ref": "#/nowhere"}}}) == {
        "type": "object",
        "properties": {"r": {"$ref": "#/nowhere"}},
    }


def test_a_top_level_union_of_objects_allows_every_variant() -> None:
    out = anthropic_input_schema(
        {
            "anyOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]},
            ]
        }
    )
    assert out == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
    }


def test_parent_wins_on_merge_clash() -> None:
    out = sanitize_for_anthropic(
        {"description": "parent", "oneOf": [{"description": "child", "type": "string"}]}
    )
    assert out == {"description": "parent", "type": "string"}


def test_a_nullable_object_counts_for_strict_mode() -> None:
    open_inner = {
        "type": "object",
        "properties": {
            "opt": {"type": ["object", "null"], "properties": {"a": {"type": "string"}}},
        },
        "required": ["opt"],
        "additionalProperties": False,
    }
    params, strict = openai_strict_parameters(open_inner)
    assert strict is False  # the inner object is neither closed nor fully required
    assert params == open_inner

    closed_inner = {
        "type": "object",
        "properties": {
            "opt": {
                "type": ["object", "null"],
                "properties": {"a": {"type": "string"}},
                "required": ["a"],
            },
        },
        "required": ["opt"],
    }
    params, strict = openai_strict_parameters(closed_inner)
    assert strict is True
    assert params is not None
    assert params["additionalProperties"] is False
    assert params["properties"]["opt"]["additionalProperties"] is False
    assert openai_parameters({"type": ["object", "null"]})["properties"] == {}


def test_anthropic_keeps_a_nullable_object_as_a_union() -> None:
    point = {
        "anyOf": [{"type": "null"}, {"type": "object", "properties": {"x": {"type": "integer"}}}]
    }
    out = sanitize_for_anthropic({"type": "object", "properties": {"point": point}})
    assert out["properties"]["point"] == point


def _nested(levels: int, key: str) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {key: node}} if key else {"items": node}
    return node


def test_schemas_nested_100000_deep_are_cut_not_a_recursion_error() -> None:
    for schema in (_nested(100_000, "a"), _nested(100_000, "")):
        for sanitised in (
            openai_parameters(schema),
            openai_strict_parameters(schema)[0],
            anthropic_input_schema(schema),
        ):
            assert sanitised is not None
            assert json.dumps(sanitised)  # sendable: bounded depth
    shallow = _nested(5, "a")
    assert openai_parameters(shallow) == {**shallow}  # real schemas are untouched


def test_a_deep_chain_of_definitions_is_cut_too() -> None:
    defs = {
        f"D{i}": {"type": "object", "properties": {"n": {"$ref": f"#/$defs/D{i + 1}"}}}
        for i in range(5000)
    }
    defs["D5000"] = {"type": "string"}
    schema = {"$defs": defs, "type": "object", "properties": {"n": {"$ref": "#/$defs/D0"}}}
    assert json.dumps(anthropic_input_schema(schema))
    assert json.dumps(openai_parameters(schema))
