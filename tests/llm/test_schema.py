from __future__ import annotations

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


def test_unknown_ref_and_cycles_become_the_safe_empty_object() -> None:
    cyclic = {
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "type": "object",
        "properties": {"head": {"$ref": "#/$defs/Node"}, "bad": {"$ref": "#/$defs/Missing"}},
    }
    out = sanitize_for_openai(cyclic)
    assert out["properties"]["bad"] == SAFE_EMPTY_OBJECT
    assert out["properties"]["head"]["properties"]["next"] == SAFE_EMPTY_OBJECT


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


def test_anthropic_flattens_composition_and_drops_refs() -> None:
    out = sanitize_for_anthropic(PYDANTIC_LIKE)
    assert "$defs" not in out
    assert out["properties"]["label"] == {"type": "string", "default": None}
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
        "properties": {"r": {}},
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


def test_anthropic_merges_the_first_non_null_variant() -> None:
    out = sanitize_for_anthropic(
        {
            "type": "object",
            "properties": {
                "point": {
                    "anyOf": [
                        {"type": "null"},
                        {"type": "object", "properties": {"x": {"type": "integer"}}},
                    ]
                },
                "only_null": {"anyOf": [{"type": "null"}]},
            },
        }
    )
    assert out["properties"]["point"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
    }
    assert out["properties"]["only_null"] == {"type": "null"}
