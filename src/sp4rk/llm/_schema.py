"""Tool input schemas rewritten into what each provider's API accepts, losing as little as possible.

Tools describe their input with ordinary JSON Schema (pydantic output, MCP servers, hand
written). The APIs accept narrower dialects, so both sanitisers:

- inline every ``$ref`` to a definition that is not recursive, and keep recursive definitions
  in ``$defs`` with ``$ref`` pointers to them (``#/$defs/<name>``), so a tree or a linked list
  stays usable at any depth;
- keep unions (``anyOf``, ``oneOf``) below the top level, where both APIs accept them, and
  turn a top-level composition into one object schema (both APIs demand an object at the
  top): ``allOf`` parts are merged, ``anyOf``/``oneOf`` object variants are united (their
  properties all allowed, only what every variant requires required);
- drop keywords the API rejects or that only document (``$schema``, ``$id``, ``$comment``,
  pydantic's OpenAPI ``discriminator``; ``default`` and ``examples`` for OpenAI,
  ``patternProperties`` for Anthropic);
- work on bounded copies and never raise: nesting deeper than :data:`MAX_DEPTH` becomes the
  empty schema (any value), and a ``$ref`` that cannot be resolved becomes the safe empty
  object.

OpenAI's *strict* mode (the Responses API uses it) accepts only a subset of JSON Schema.
:func:`strict_violations` checks a schema against the documented rules; strict mode is claimed
only for a schema with none, so an optional parameter never silently becomes mandatory and a
constraint strict mode cannot express (``minLength``, ``uniqueItems``, a free-form
``items: {}``) is never rejected by the API.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

#: The schema used for a tool without parameters, and in place of unresolvable references.
SAFE_EMPTY_OBJECT: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "required": [],
    "additionalProperties": False,
}
#: Schema nesting kept (dictionaries and lists); anything deeper becomes ``{}`` (any value).
MAX_DEPTH = 64

_COMMON_DROP = ("$schema", "$id", "$comment", "definitions", "discriminator")
_OPENAI_DROP = (*_COMMON_DROP, "default", "examples")
_ANTHROPIC_DROP = (*_COMMON_DROP, "patternProperties")
_COMPOSITION = ("anyOf", "oneOf", "allOf")
#: Keywords whose value maps names to subschemas.
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "dependentSchemas")
#: Keywords whose value is a list of subschemas.
_SCHEMA_LISTS = (*_COMPOSITION, "prefixItems")
#: Keywords whose value is one subschema (``items`` may also be a list, as in draft 4).
_SCHEMA_VALUES = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
)
_SUBSCHEMA_KEYWORDS = frozenset({*_SCHEMA_MAPS, *_SCHEMA_LISTS, *_SCHEMA_VALUES})
_DEF_PREFIXES = ("#/$defs/", "#/definitions/")

# OpenAI strict mode (the Structured Outputs documentation, "Supported schemas").
_STRICT_ANY = frozenset({"type", "description", "title", "enum", "const", "anyOf", "$ref"})
_STRICT_BY_TYPE = {
    "string": frozenset({"pattern", "format"}),
    "number": frozenset(
        {"multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"}
    ),
    "integer": frozenset(
        {"multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"}
    ),
    "array": frozenset({"items", "minItems", "maxItems"}),
    "object": frozenset({"properties", "required", "additionalProperties"}),
    "boolean": frozenset(),
    "null": frozenset(),
}
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_STRICT_MAX_NESTING = 10
_STRICT_MAX_PROPERTIES = 5000
_STRICT_MAX_ENUM_VALUES = 1000


def openai_parameters(schema: dict[str, Any]) -> dict[str, Any]:
    """The ``parameters`` of an OpenAI function tool (Chat Completions, non-strict)."""
    if not schema:
        return _copy_safe_empty()
    return sanitize_for_openai(schema)


def openai_strict_parameters(schema: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
    """The ``parameters`` and ``strict`` flag of a Responses API function tool.

    Returns:
        ``(None, True)`` for a tool without parameters (the API's own convention); otherwise
        the sanitised schema, closed (``additionalProperties: false`` written out on every
        object with properties) and ``True`` when that meets every rule of strict mode (see
        :func:`strict_violations`), else the sanitised schema as it is and ``False``, which
        keeps optional parameters optional and free-form objects free.
    """
    if not schema:
        return None, True
    sanitized = sanitize_for_openai(schema)
    closed = _closed(sanitized)
    if not strict_violations(closed):
        return closed, True
    return sanitized, False


def anthropic_input_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The ``input_schema`` of an Anthropic tool: always an object schema."""
    sanitized = {**(sanitize_for_anthropic(schema) if schema else {}), "type": "object"}
    sanitized.setdefault("properties", {})
    return sanitized


def sanitize_for_openai(schema: dict[str, Any]) -> dict[str, Any]:
    """References resolved, keywords OpenAI rejects dropped; objects get ``properties``."""
    return _sanitize(schema, _OPENAI_DROP, with_properties=True)


def sanitize_for_anthropic(schema: dict[str, Any]) -> dict[str, Any]:
    """References resolved, keywords Anthropic rejects dropped, the top level an object."""
    return _sanitize(schema, _ANTHROPIC_DROP, with_properties=False)


def strict_violations(schema: dict[str, Any]) -> list[str]:
    """What keeps ``schema`` out of OpenAI's strict mode (``[]``: it qualifies).

    The documented rules: the root is an object; every subschema has a ``type`` (JSON types
    only), ``anyOf``, ``enum``, ``const`` or a local ``$ref``; only the keywords strict mode
    supports for that type appear (no ``minLength``, ``uniqueItems``, ``oneOf``, ``allOf``,
    ``patternProperties``, ...; ``format`` only with a supported value); every object is
    closed (``additionalProperties: false``) and lists all its properties in ``required``;
    at most 10 levels of object nesting, 5000 properties and 1000 enum values.
    """
    problems: list[str] = []
    if schema.get("type") != "object":
        problems.append("the root is not an object schema")
    definitions = schema.get("$defs")
    defs = definitions if isinstance(definitions, dict) else {}
    counts = {"properties": 0, "enum": 0}
    _strict_node(schema, "$", defs, problems, counts, nesting=0, root=True)
    for name, definition in defs.items():
        _strict_node(definition, f"$defs.{name}", defs, problems, counts, nesting=0)
    if counts["properties"] > _STRICT_MAX_PROPERTIES:
        problems.append(f"{counts['properties']} properties (at most {_STRICT_MAX_PROPERTIES})")
    if counts["enum"] > _STRICT_MAX_ENUM_VALUES:
        problems.append(f"{counts['enum']} enum values (at most {_STRICT_MAX_ENUM_VALUES})")
    return problems


def _strict_node(
    node: Any,
    where: str,
    defs: dict[str, Any],
    problems: list[str],
    counts: dict[str, int],
    *,
    nesting: int,
    root: bool = False,
) -> None:
    if not isinstance(node, dict):
        problems.append(f"{where}: not a schema object")
        return
    kinds = node.get("type")
    types = kinds if isinstance(kinds, list) else [kinds] if kinds is not None else []
    if not types and not any(k in node for k in ("anyOf", "enum", "const", "$ref")):
        problems.append(f"{where}: no type (a schema that accepts anything)")
    allowed = set(_STRICT_ANY) | ({"$defs"} if root else set())
    for kind in types:
        if kind not in _STRICT_BY_TYPE:
            problems.append(f"{where}: type {kind!r} is not a JSON type")
        else:
            allowed |= _STRICT_BY_TYPE[kind]
    problems.extend(f"{where}: {key} is not supported" for key in node if key not in allowed)
    if "format" in node and node["format"] not in _STRICT_FORMATS:
        problems.append(f"{where}: format {node['format']!r} is not supported")
    if isinstance(node.get("enum"), list):
        counts["enum"] += len(node["enum"])
    ref = node.get("$ref")
    if ref is not None and not (
        ref == "#" or (isinstance(ref, str) and ref.removeprefix("#/$defs/") in defs)
    ):
        problems.append(f"{where}: $ref {ref!r} does not point into $defs")
    if "object" in types:
        nesting += 1
        if nesting > _STRICT_MAX_NESTING:
            problems.append(f"{where}: objects nested deeper than {_STRICT_MAX_NESTING} levels")
            return
        properties = node.get("properties")
        if not isinstance(properties, dict):
            properties = {}
        counts["properties"] += len(properties)
        if node.get("additionalProperties") is not False:
            problems.append(f"{where}: additionalProperties is not false")
        if not properties and node.get("additionalProperties") is not False:
            problems.append(f"{where}: a free-form object")
        required = node.get("required")
        if not isinstance(required, list) or set(required) != set(properties):
            problems.append(f"{where}: not every property is required")
        for name, child in properties.items():
            _strict_node(child, f"{where}.{name}", defs, problems, counts, nesting=nesting)
    if "array" in types:
        if not isinstance(node.get("items"), dict):
            problems.append(f"{where}: an array without an item schema")
        else:
            _strict_node(node["items"], f"{where}[]", defs, problems, counts, nesting=nesting)
    variants = node.get("anyOf")
    if variants is not None:
        if root:
            problems.append(f"{where}: anyOf at the root")
        if not isinstance(variants, list):
            problems.append(f"{where}: anyOf is not a list")
        else:
            for i, variant in enumerate(variants):
                _strict_node(
                    variant, f"{where}.anyOf[{i}]", defs, problems, counts, nesting=nesting
                )


def _copy_safe_empty() -> dict[str, Any]:
    return {**SAFE_EMPTY_OBJECT, "properties": {}, "required": []}


def _sanitize(
    schema: dict[str, Any], drop: tuple[str, ...], *, with_properties: bool
) -> dict[str, Any]:
    defs = _definitions(schema)
    recursive = _recursive_names(defs)
    resolved = _resolve(schema, defs, recursive, depth=0)
    if not isinstance(resolved, dict):
        return _copy_safe_empty()
    kept = {name: _resolve(defs[name], defs, recursive, depth=1) for name in sorted(recursive)}
    top = _top_level_object(resolved)
    if kept:
        top["$defs"] = kept
    clean: dict[str, Any] = _clean(top, drop, with_properties)
    return clean


def _definitions(schema: dict[str, Any]) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        value = schema.get(key)
        if isinstance(value, dict):
            defs.update({k: v for k, v in value.items() if isinstance(v, dict)})
    return defs


def _ref_name(ref: str) -> str | None:
    """The definition a local ``$ref`` names (``#/$defs/X``, ``#/definitions/X``)."""
    for prefix in _DEF_PREFIXES:
        if ref.startswith(prefix):
            return ref.removeprefix(prefix)
    return None


def _refs_in(node: Any, depth: int = 0) -> Iterator[str]:
    """The definition names ``node`` refers to (down to :data:`MAX_DEPTH`)."""
    if depth > MAX_DEPTH:
        return
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and (name := _ref_name(ref)) is not None:
            yield name
        for key, value in node.items():
            if key not in ("$defs", "definitions"):
                yield from _refs_in(value, depth + 1)
    elif isinstance(node, list):
        for item in node:
            yield from _refs_in(item, depth + 1)


def _recursive_names(defs: dict[str, Any]) -> set[str]:
    """The definitions that can reach themselves through references (linear time).

    Tarjan's strongly connected components, iteratively: a definition is recursive when its
    component has several members or it refers to itself.
    """
    edges = {name: sorted({r for r in _refs_in(body) if r in defs}) for name, body in defs.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    recursive: set[str] = set()
    for root in defs:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            name, next_edge = work.pop()
            if next_edge == 0:
                index[name] = low[name] = len(index)
                stack.append(name)
                on_stack.add(name)
            if next_edge < len(edges[name]):
                work.append((name, next_edge + 1))
                target = edges[name][next_edge]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[name] = min(low[name], index[target])
                continue
            if work:  # back in the caller: pass the lowest index up
                caller = work[-1][0]
                low[caller] = min(low[caller], low[name])
            if low[name] == index[name]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == name:
                        break
                if len(component) > 1 or name in edges[name]:
                    recursive.update(component)
    return recursive


def _resolve(node: Any, defs: dict[str, Any], recursive: set[str], *, depth: int) -> Any:
    """A bounded copy of ``node`` with references inlined, recursive ones kept as pointers."""
    if depth > MAX_DEPTH:
        return {}
    if not isinstance(node, dict):
        return _bounded(node, depth)
    body = {
        key: value if key in _SUBSCHEMA_KEYWORDS else _bounded(value, depth + 1)
        for key, value in node.items()
        if key not in ("$ref", "$defs", "definitions")
    }
    siblings = _map_subschemas(
        body, lambda child: _resolve(child, defs, recursive, depth=depth + 1)
    )
    ref = node.get("$ref")
    if not isinstance(ref, str) or not defs:
        return siblings if ref is None else {**siblings, "$ref": _bounded(ref, depth + 1)}
    name = _ref_name(ref)
    if name in recursive:
        return {"$ref": f"#/$defs/{name}", **siblings}
    if name is None or name not in defs:
        return {**siblings, "$ref": ref} if ref == "#" else _copy_safe_empty()
    target = _resolve(defs[name], defs, recursive, depth=depth + 1)
    return {**target, **siblings} if isinstance(target, dict) else siblings


def _bounded(value: Any, depth: int) -> Any:
    """A copy of JSON data (an ``enum``, a ``default``) cut at :data:`MAX_DEPTH` levels."""
    if isinstance(value, dict | list) and depth > MAX_DEPTH:
        return None
    if isinstance(value, dict):
        return {key: _bounded(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_bounded(item, depth + 1) for item in value]
    return value


def _top_level_object(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` as one object schema: top-level compositions merged (see the module doc)."""
    out = dict(node)
    parts = out.pop("allOf", None)
    if isinstance(parts, list):
        for part in parts:
            if isinstance(part, dict):
                out = _merge(out, _top_level_object(part))
    for key in ("anyOf", "oneOf"):
        variants = out.get(key)
        if not isinstance(variants, list):
            continue
        objects = [_top_level_object(v) for v in variants if isinstance(v, dict)]
        objects = [v for v in objects if v.get("type") != "null"]
        if not objects:
            continue
        out.pop(key)
        united: dict[str, Any] = {}
        for variant in objects:
            united.update({k: v for k, v in variant.items() if k not in ("properties", "required")})
            for name, prop in (variant.get("properties") or {}).items():
                united.setdefault("properties", {}).setdefault(name, prop)
        required = [
            name
            for name in (objects[0].get("required") or [])
            if all(name in (v.get("required") or []) for v in objects)
        ]
        if required:
            united["required"] = required
        out = _merge(out, united)
    if not out.get("type") and ("properties" in out or "required" in out):
        out["type"] = "object"
    return out


def _merge(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """The parent's scalars win; ``properties`` and ``required`` are unioned."""
    merged = {**child, **parent}
    parent_props = parent.get("properties")
    child_props = child.get("properties")
    props = {
        **(child_props if isinstance(child_props, dict) else {}),
        **(parent_props if isinstance(parent_props, dict) else {}),
    }
    if props:
        merged["properties"] = props
    names = [*_names(parent.get("required")), *_names(child.get("required"))]
    if names:
        merged["required"] = list(dict.fromkeys(names))
    return merged


def _names(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _clean(node: Any, drop: tuple[str, ...], with_properties: bool) -> Any:
    """Drop keywords at every level of a schema (not inside data such as ``enum``)."""
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if k not in drop}
    if not out.get("type") and ("properties" in out or "required" in out):
        out["type"] = "object"
    if with_properties and _is_object(out) and not isinstance(out.get("properties"), dict):
        out["properties"] = {}
    return _map_subschemas(out, lambda child: _clean(child, drop, with_properties))


def _map_subschemas(node: dict[str, Any], fn: Callable[[Any], Any]) -> dict[str, Any]:
    """A copy of ``node`` with ``fn`` applied to each of its direct subschemas."""
    out = dict(node)
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: fn(child) for name, child in out[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [fn(child) for child in out[key]]
    for key in _SCHEMA_VALUES:
        value = out.get(key)
        if isinstance(value, dict):
            out[key] = fn(value)
        elif key == "items" and isinstance(value, list):
            out[key] = [fn(child) for child in value]
    return out


def _is_object(node: dict[str, Any]) -> bool:
    """Whether ``node`` may be an object (``"object"``, or a type list such as a nullable's)."""
    kind = node.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind)


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with ``additionalProperties: false`` written out on every object with properties.

    Strict mode demands it explicit; an object without properties (free-form) is left open,
    and then fails the strict check.
    """

    def close(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        out = _map_subschemas(node, close)
        if _is_object(out) and out.get("properties") and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out

    closed: dict[str, Any] = close(schema)
    return closed
