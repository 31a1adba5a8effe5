"""A corpus of real tool signatures through each provider's schema sanitiser.

Every sanitised schema must be valid JSON Schema 2020-12, follow the provider's documented
rules, and still accept what the tool itself accepts (unions kept, recursion usable at any
depth); strict mode is claimed exactly for the signatures OpenAI's strict mode can express.
"""

from __future__ import annotations

import datetime
import enum
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import jsonschema
import pydantic
import pytest
from pydantic import BaseModel, Field

from sp4rk.llm._schema import (
    anthropic_input_schema,
    openai_parameters,
    openai_strict_parameters,
    strict_violations,
)
from sp4rk.tools import tool
from sp4rk.tools.input_model import build_input_model


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int


class Box(BaseModel):
    corner: Point
    size: float
    label: str | None = None


class Tree(BaseModel):
    value: int
    children: list[Tree] = []


class Node(BaseModel):
    name: str
    next: Node | None


class Team(BaseModel):
    name: str
    members: list[Person]


class Person(BaseModel):
    name: str
    team: Team | None


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Closed(BaseModel):
    a: str
    b: int


# --- the signatures ------------------------------------------------------------------------


def union(x: int | str) -> str:
    """An int or a string."""
    return ""


def optional(limit: int | None = None) -> str:
    """An optional number."""
    return ""


def nested(box: Box) -> str:
    """A nested model with an optional field."""
    return ""


def recursive(tree: Tree) -> str:
    """A recursive model."""
    return ""


def linked(head: Node) -> str:
    """A nullable self-reference."""
    return ""


def mutual(team: Team) -> str:
    """Two models referring to each other."""
    return ""


def enum_choice(color: Color) -> str:
    """An enum."""
    return ""


def literal(mode: Literal["fast", "slow"]) -> str:
    """A literal."""
    return ""


def string_list(paths: list[str]) -> str:
    """A list of strings."""
    return ""


def mapping(counts: dict[str, int]) -> str:
    """A dictionary."""
    return ""


def min_length(name: Annotated[str, Field(min_length=1)]) -> str:
    """A constrained string."""
    return ""


def unique(ids: set[int]) -> str:
    """A set."""
    return ""


def anything(values: list[Any]) -> str:
    """A list of anything."""
    return ""


def bounded(n: Annotated[int, Field(ge=0, le=10)]) -> str:
    """A bounded integer."""
    return ""


def when(at: datetime.datetime) -> str:
    """A timestamp."""
    return ""


def pet(animal: Annotated[Cat | Dog, Field(discriminator="kind")]) -> str:
    """A discriminated union."""
    return ""


def pair(item: tuple[int, str]) -> str:
    """A tuple."""
    return ""


def flag(verbose: bool = False) -> str:
    """A flag with a default."""
    return ""


def step(size: Annotated[float, Field(multiple_of=0.5)]) -> str:
    """A number with a step."""
    return ""


def points(items: list[Point]) -> str:
    """A list of models."""
    return ""


def identifier(id: uuid.UUID) -> str:
    """A UUID."""
    return ""


def nothing() -> str:
    """No parameters."""
    return ""


def named_boxes(boxes: dict[str, Box]) -> str:
    """A dictionary of models."""
    return ""


def closed(record: Closed, count: int) -> str:
    """All required, nothing optional."""
    return ""


def sized(tags: Annotated[list[str], Field(min_length=1, max_length=3)]) -> str:
    """A list with a size range."""
    return ""


@dataclass
class Case:
    fn: Callable[..., str]
    strict: bool
    """Whether OpenAI's strict mode can express the signature (its documented rules)."""
    valid: list[dict[str, Any]] = field(default_factory=list)
    invalid: list[dict[str, Any]] = field(default_factory=list)


def _tree(depth: int) -> dict[str, Any]:
    return {"value": depth, "children": [_tree(depth - 1)] if depth else []}


CASES = [
    Case(union, True, [{"x": 1}, {"x": "a"}], [{"x": [1]}, {}]),
    Case(optional, False, [{}, {"limit": 3}, {"limit": None}], [{"limit": "x"}]),
    Case(nested, False, [{"box": {"corner": {"x": 1, "y": 2}, "size": 1.5}}], [{"box": {}}]),
    Case(recursive, False, [{"tree": _tree(5)}], [{"tree": {"value": 1, "children": [{}]}}]),
    Case(
        linked,
        True,
        [{"head": {"name": "a", "next": {"name": "b", "next": {"name": "c", "next": None}}}}],
        [{"head": {"name": "a", "next": {"name": 3, "next": None}}}],
    ),
    Case(
        mutual,
        True,
        [{"team": {"name": "t", "members": [{"name": "p", "team": {"name": "u", "members": []}}]}}],
        [{"team": {"name": "t", "members": [{"name": "p"}]}}],
    ),
    Case(enum_choice, True, [{"color": "red"}], [{"color": "green"}]),
    Case(literal, True, [{"mode": "fast"}], [{"mode": "medium"}]),
    Case(string_list, True, [{"paths": ["a", "b"]}, {"paths": []}], [{"paths": "a"}]),
    Case(mapping, False, [{"counts": {"a": 1}}], [{"counts": {"a": "x"}}]),
    Case(min_length, False, [{"name": "a"}], [{"name": ""}]),
    Case(unique, False, [{"ids": [1, 2]}], [{"ids": "x"}]),
    Case(anything, False, [{"values": [1, "a", None]}], [{"values": 3}]),
    Case(bounded, True, [{"n": 0}, {"n": 10}], [{"n": 11}]),
    Case(when, True, [{"at": "2024-01-01T00:00:00Z"}], [{"at": [3]}]),
    Case(
        pet,
        False,
        [{"animal": {"kind": "cat", "lives": 9}}, {"animal": {"kind": "dog", "good": True}}],
        [{"animal": {"kind": "cat", "good": True}}],
    ),
    Case(pair, False, [{"item": [1, "a"]}], [{"item": ["a", 1]}]),
    Case(flag, False, [{}, {"verbose": True}], [{"verbose": [1]}]),
    Case(step, True, [{"size": 1.5}], [{"size": 1.2}]),
    Case(points, True, [{"items": [{"x": 1, "y": 2}]}], [{"items": [{"x": 1}]}]),
    Case(identifier, True, [{"id": str(uuid.uuid4())}], [{"id": 5}]),
    Case(nothing, False, [{}]),
    Case(named_boxes, False, [{"boxes": {"a": {"corner": {"x": 1, "y": 2}, "size": 1}}}]),
    Case(closed, True, [{"record": {"a": "x", "b": 1}, "count": 2}], [{"record": {"a": "x"}}]),
    Case(sized, True, [{"tags": ["a"]}], [{"tags": []}]),
]
ids = [case.fn.__name__ for case in CASES]


def _pydantic_accepts(case: Case, instance: dict[str, Any]) -> bool:
    try:
        build_input_model(case.fn, case.fn.__name__, None, False).model.model_validate(instance)
    except pydantic.ValidationError:
        return False
    return True


def _subschemas(node: Any) -> Iterator[dict[str, Any]]:
    """Every schema object in ``node``, ``node`` included (data such as ``enum`` skipped)."""
    if not isinstance(node, dict):
        return
    yield node
    for key in ("properties", "$defs", "patternProperties"):
        for child in (node.get(key) or {}).values():
            yield from _subschemas(child)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for child in node.get(key) or []:
            yield from _subschemas(child)
    for key in ("items", "additionalProperties", "not"):
        yield from _subschemas(node.get(key))


def _check_local_refs(schema: dict[str, Any]) -> None:
    defs = schema.get("$defs") or {}
    for node in _subschemas(schema):
        ref = node.get("$ref")
        if ref is not None:
            assert ref == "#" or ref.removeprefix("#/$defs/") in defs, ref


def anthropic_rules(schema: dict[str, Any]) -> None:
    """Anthropic's documented tool rules: an object at the top, no composition there."""
    assert schema["type"] == "object"
    assert isinstance(schema["properties"], dict)
    assert not {"anyOf", "oneOf", "allOf"} & set(schema)
    _check_local_refs(schema)


def openai_rules(schema: dict[str, Any]) -> None:
    """OpenAI's function rules: an object at the top, objects with properties."""
    assert schema["type"] == "object"
    assert not {"anyOf", "oneOf", "allOf", "$schema", "default"} & set(schema)
    for node in _subschemas(schema):
        if node.get("type") == "object":
            assert isinstance(node.get("properties"), dict)
    _check_local_refs(schema)


#: Keywords OpenAI's strict mode documents as unsupported.
STRICT_UNSUPPORTED = {
    "minLength",
    "maxLength",
    "uniqueItems",
    "oneOf",
    "allOf",
    "not",
    "patternProperties",
    "prefixItems",
    "default",
    "minProperties",
    "maxProperties",
    "if",
    "then",
    "else",
}


def openai_strict_rules(schema: dict[str, Any]) -> None:
    """Strict mode's rules, restated: closed, fully required, typed, supported keywords."""
    for node in _subschemas(schema):
        assert not STRICT_UNSUPPORTED & set(node), node
        assert {"type", "anyOf", "$ref", "enum", "const"} & set(node), node
        if node.get("type") == "object" or "object" in (node.get("type") or []):
            assert node["additionalProperties"] is False
            assert set(node["required"]) == set(node["properties"])
        if node.get("type") == "array":
            assert node.get("items"), node


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_every_sanitised_schema_is_valid_follows_the_rules_and_keeps_its_meaning(
    case: Case,
) -> None:
    schema = tool(case.fn).input_schema
    strict_params, strict = openai_strict_parameters(schema)
    sent = {
        "openai": openai_parameters(schema),
        "anthropic": anthropic_input_schema(schema),
        "openai-strict": strict_params or {"type": "object", "properties": {}},
    }
    for name, candidate in sent.items():
        jsonschema.Draft202012Validator.check_schema(candidate)
        validator = jsonschema.Draft202012Validator(candidate)
        for instance in case.valid:
            assert _pydantic_accepts(case, instance)
            if name == "openai-strict" and set(instance) != set(candidate["properties"]):
                continue  # strict schemas require every property; none is optional there
            errors = [e.message for e in validator.iter_errors(instance)]
            assert not errors, (name, instance, errors)
        for instance in case.invalid:
            assert not _pydantic_accepts(case, instance)
            assert not validator.is_valid(instance), (name, instance)
    anthropic_rules(sent["anthropic"])
    openai_rules(sent["openai"])
    assert strict is case.strict, strict_violations(sent["openai"])
    if strict:
        openai_strict_rules(sent["openai-strict"])


def test_the_corpus_covers_enough_signatures_and_both_strict_outcomes() -> None:
    assert len(CASES) >= 20
    assert {case.strict for case in CASES} == {True, False}


def test_anthropic_keeps_a_union_the_old_sanitiser_collapsed() -> None:
    schema = anthropic_input_schema(tool(union).input_schema)
    assert schema["properties"]["x"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}


def test_recursive_definitions_stay_references() -> None:
    schema = anthropic_input_schema(tool(recursive).input_schema)
    assert schema["properties"]["tree"] == {"$ref": "#/$defs/Tree"}
    children = schema["$defs"]["Tree"]["properties"]["children"]
    assert children["items"] == {"$ref": "#/$defs/Tree"}
    assert "$defs" not in openai_parameters(tool(nested).input_schema)  # nothing recursive


def test_strict_violations_name_what_disqualifies() -> None:
    def problems(fn: Callable[..., str]) -> str:
        return " ".join(strict_violations(openai_parameters(tool(fn).input_schema)))

    assert "minLength" in problems(min_length)
    assert "uniqueItems" in problems(unique)
    assert "no type" in problems(anything)
    assert "not every property is required" in problems(optional)
    assert "oneOf" in problems(pet)
