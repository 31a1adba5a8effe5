"""Tool input schemas rewritten into what each provider's API accepts.

Tools describe their input with ordinary JSON Schema (pydantic output, MCP servers, hand
written). The APIs accept narrower dialects:

- OpenAI rejects documentation keywords such as ``$schema`` in some modes, does not resolve
  ``$ref`` for every model, and its *strict* mode (the Responses API default) demands that every
  object be closed and list all its properties as required. Strict mode is used only when the
  schema already satisfies it, so an optional parameter never silently becomes mandatory.
- Anthropic wants a plain object schema without composition keywords at the top, so
  ``allOf``/``oneOf``/``anyOf`` are flattened at every level.

Both sanitisers work on a deep copy and never raise: a ``$ref`` they cannot resolve (unknown
target, or a cycle) becomes the safe empty object.
"""

from __future__ import annotations

import copy
from typing import Any

#: The schema used for a tool without parameters, and in place of unresolvable references.
SAFE_EMPTY_OBJECT: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "required": [],
    "additionalProperties": False,
}

_OPENAI_DROP = ("$schema", "$id", "$comment", "$defs", "definitions", "default", "examples")
_ANTHROPIC_DROP = ("$schema", "$id", "$comment", "$defs", "definitions", "patternProperties")
_COMPOSITION = ("anyOf", "oneOf", "allOf")


def openai_parameters(schema: dict[str, Any]) -> dict[str, Any]:
    """The ``parameters`` of an OpenAI function tool (Chat Completions, non-strict)."""
    if not schema:
        return copy.deepcopy(SAFE_EMPTY_OBJECT)
    return sanitize_for_openai(schema)


def openai_strict_parameters(schema: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
    """The ``parameters`` and ``strict`` flag of a Responses API function tool.

    Returns:
        ``(None, True)`` for a tool without parameters (the API's own convention); otherwise
        the sanitised schema, with ``True`` when it already is strict-compatible (every
        object, nullable ones included, closed with every property required) and ``False``
        when not, which keeps optional parameters optional and free-form objects free.
    """
    if not schema:
        return None, True
    sanitized = sanitize_for_openai(schema)
    if _strict_compatible(sanitized):
        return _closed(sanitized), True
    return sanitized, False


def anthropic_input_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The ``input_schema`` of an Anthropic tool: always an object schema."""
    sanitized = {**(sanitize_for_anthropic(schema) if schema else {}), "type": "object"}
    sanitized.setdefault("properties", {})
    return sanitized


def sanitize_for_openai(schema: dict[str, Any]) -> dict[str, Any]:
    """Resolve references and drop keywords OpenAI rejects; objects get ``properties``."""
    defs = _definitions(schema)
    result: dict[str, Any] = _openai_node(_resolve(schema, defs, frozenset()))
    return result


def sanitize_for_anthropic(schema: dict[str, Any]) -> dict[str, Any]:
    """Resolve references, flatten composition and drop keywords Anthropic rejects."""
    defs = _definitions(schema)
    result: dict[str, Any] = _anthropic_node(_resolve(schema, defs, frozenset()))
    return result


def _definitions(schema: dict[str, Any]) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        value = schema.get(key)
        if isinstance(value, dict):
            defs.update(value)
    return defs


def _resolve(node: Any, defs: dict[str, Any], seen: frozenset[str]) -> Any:
    """Inline every ``$ref`` found in ``defs`` (by its last pointer segment)."""
    if isinstance(node, list):
        return [_resolve(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and defs:
        name = ref.rsplit("/", 1)[-1]
        if name in seen or not isinstance(defs.get(name), dict):
            return copy.deepcopy(SAFE_EMPTY_OBJECT)
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        target = _resolve(defs[name], defs, seen | {name})
        return {**target, **_resolve(siblings, defs, seen)}
    return {
        key: value if key in ("$defs", "definitions") else _resolve(value, defs, seen)
        for key, value in node.items()
    }


def _infer_object(node: dict[str, Any]) -> None:
    if not node.get("type") and ("properties" in node or "required" in node):
        node["type"] = "object"


def _is_object(node: dict[str, Any]) -> bool:
    """Whether ``node`` may be an object (``"object"``, or a type list such as a nullable's)."""
    kind = node.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind)


def _openai_node(node: Any) -> Any:
    if isinstance(node, list):
        return [_openai_node(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if k not in _OPENAI_DROP}
    _infer_object(out)
    if _is_object(out) and not isinstance(out.get("properties"), dict):
        out["properties"] = {}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _openai_node(v) for k, v in out["properties"].items()}
    for key in ("items", *_COMPOSITION):
        if key in out:
            out[key] = _openai_node(out[key])
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _openai_node(out["additionalProperties"])
    return out


def _object_nodes(node: Any) -> list[dict[str, Any]]:
    """Every object schema in ``node`` (nullable ones too), outermost first."""
    if isinstance(node, list):
        return [found for item in node for found in _object_nodes(item)]
    if not isinstance(node, dict):
        return []
    found = [node] if _is_object(node) else []
    children: list[Any] = list((node.get("properties") or {}).values())
    children += [node[k] for k in ("items", "additionalProperties", *_COMPOSITION) if k in node]
    return found + _object_nodes(children)


def _strict_compatible(schema: dict[str, Any]) -> bool:
    for obj in _object_nodes(schema):
        properties = obj.get("properties") or {}
        if not properties or obj.get("additionalProperties", False) is not False:
            return False
        if set(obj.get("required") or []) != set(properties):
            return False
    return True


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (strict-compatible) with every object's ``additionalProperties: false`` explicit.

    Strict mode demands it written out; ``required`` already lists every property.
    """
    result = copy.deepcopy(schema)
    for obj in _object_nodes(result):
        obj["additionalProperties"] = False
    return result


def _anthropic_node(node: Any) -> Any:
    if isinstance(node, list):
        return [_anthropic_node(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = _flatten(dict(node))
    out = {k: v for k, v in out.items() if k not in _ANTHROPIC_DROP and k != "$ref"}
    _infer_object(out)
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _anthropic_node(v) for k, v in out["properties"].items()}
    if "items" in out:
        out["items"] = _anthropic_node(out["items"])
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _anthropic_node(out["additionalProperties"])
    for key in _COMPOSITION:
        if key in out:
            out[key] = _anthropic_node(out[key])
    return out


def _flatten(node: dict[str, Any]) -> dict[str, Any]:
    """Merge ``allOf`` (all of it) or one ``oneOf``/``anyOf`` variant into ``node``.

    The variant is the first that is not ``{"type": "null"}``: an optional value written
    ``anyOf: [{"type": "null"}, {...}]`` keeps the shape of its real value.
    """
    all_of = node.pop("allOf", None)
    if isinstance(all_of, list) and all_of:
        for part in all_of:
            if isinstance(part, dict):
                node = _merge(node, _flatten(dict(part)))
        return node
    for key in ("oneOf", "anyOf"):
        variants = node.get(key)
        if not isinstance(variants, list):
            continue
        chosen = next(
            (v for v in variants if isinstance(v, dict) and v.get("type") != "null"),
            next((v for v in variants if isinstance(v, dict)), None),
        )
        if chosen is not None:
            node.pop(key)
            return _merge(node, _flatten(dict(chosen)))
    return node


def _merge(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """The parent's scalars win; ``properties`` and ``required`` are unioned."""
    merged = {**child, **parent}
    props = {**(child.get("properties") or {}), **(parent.get("properties") or {})}
    if props:
        merged["properties"] = props
    required = list(
        dict.fromkeys([*(parent.get("required") or []), *(child.get("required") or [])])
    )
    if required:
        merged["required"] = required
    return merged
