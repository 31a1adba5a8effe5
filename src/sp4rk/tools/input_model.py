"""What a :class:`~sp4rk.tools.FunctionTool` derives from its function: description and model.

The docstring becomes the description, the type hints a pydantic model that gives the JSON
schema and validates the model's input. This module holds everything of ``@tool`` that needs
pydantic and docstring_parser, so that ``import sp4rk.tools`` (and the executor) loads
neither: it is imported when the first tool is built (see ``FunctionTool``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_type_hints

import docstring_parser
import pydantic
import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sp4rk.tools.context import RunContext

_ANY: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(Any)


@dataclass(frozen=True, slots=True)
class InputModel:
    """A function tool's description, whether it takes the run's context, and its input model."""

    description: str
    takes_ctx: bool
    model: type[BaseModel]
    #: The model's JSON schema as sent to the model (pydantic's ``title`` keys dropped).
    schema: dict[str, Any]
    fields: tuple[str, ...]

    def arguments(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The function's keyword arguments from the parsed input (the context excluded).

        Raises:
            ValueError: the input does not fit the schema; the message lists each problem.
        """
        try:
            parsed = self.model.model_validate(raw)
        except ValidationError as exc:
            raise ValueError(_format_validation_error(exc)) from None
        return {k: getattr(parsed, k) for k in self.fields}


def build_input_model(
    fn: Callable[..., Any], tool_name: str, description: str | None, require_docs: bool
) -> InputModel:
    """Read ``fn``'s docstring and signature; ``description`` replaces the docstring's.

    Raises:
        TypeError: when the signature cannot become a schema (``*args``, a misplaced
            ``RunContext`` parameter, a missing parameter description when required, a hint
            that does not resolve).
        pydantic.PydanticUserError: a parameter type pydantic cannot validate.
    """
    doc = docstring_parser.parse(inspect.getdoc(fn) or "")
    takes_ctx, model = _model(fn, tool_name, doc, require_docs)
    return InputModel(
        description=description if description is not None else _describe(doc),
        takes_ctx=takes_ctx,
        model=model,
        schema=_clean_schema(model.model_json_schema()),
        fields=tuple(model.model_fields),
    )


def to_json(value: Any) -> str | None:
    """``value`` as JSON text, or ``None`` when pydantic cannot serialise it."""
    try:
        return _ANY.dump_json(value).decode()
    except pydantic_core.PydanticSerializationError:
        return None


def _describe(doc: docstring_parser.Docstring) -> str:
    parts = [p for p in (doc.short_description, doc.long_description) if p]
    if doc.returns and doc.returns.description:
        parts.append(f"Returns: {doc.returns.description}")
    return "\n\n".join(parts)


def _model(
    fn: Callable[..., Any], tool_name: str, doc: docstring_parser.Docstring, require_docs: bool
) -> tuple[bool, type[BaseModel]]:
    try:
        hints = _parameter_hints(fn)
    except NameError as exc:
        raise TypeError(
            f"tool {tool_name!r}: cannot resolve a parameter type hint ({exc}); define the "
            "types the tool uses at module level"
        ) from exc
    param_docs = {p.arg_name: p.description or "" for p in doc.params}
    fields: dict[str, Any] = {}
    takes_ctx = False
    for index, param in enumerate(inspect.signature(fn).parameters.values()):
        annotation = hints.get(param.name, Any)
        if annotation is RunContext:
            if index != 0:
                raise TypeError(
                    f"tool {tool_name!r}: the RunContext parameter {param.name!r} must come first"
                )
            takes_ctx = True
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(
                f"tool {tool_name!r}: *args and **kwargs cannot be described to a model; "
                "declare each parameter"
            )
        description = param_docs.get(param.name, "")
        if require_docs and not description:
            raise TypeError(
                f"tool {tool_name!r}: parameter {param.name!r} has no description in the "
                "docstring's Args section"
            )
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, Field(default, description=description or None))
    model_name = "".join(part.capitalize() for part in tool_name.replace("-", "_").split("_"))
    model = pydantic.create_model(
        f"{model_name}Input", __config__=ConfigDict(extra="forbid"), **fields
    )
    return takes_ctx, model


def _parameter_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """Resolved parameter annotations; the return annotation is not needed, nor evaluated."""
    annotations = dict(getattr(fn, "__annotations__", {}))
    annotations.pop("return", None)

    def shim() -> None: ...

    shim.__annotations__ = annotations
    return get_type_hints(shim, globalns=getattr(fn, "__globals__", None), include_extras=True)


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's auto-generated ``title`` keys: noise to a model."""

    def clean(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, dict):
            return {
                k: clean(v, in_properties=(k == "properties"))
                for k, v in node.items()
                if in_properties or k != "title"
            }
        if isinstance(node, list):
            return [clean(v) for v in node]
        return node

    cleaned: dict[str, Any] = clean(schema)
    cleaned.setdefault("properties", {})
    return cleaned


def _format_validation_error(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "input"
        problems.append(f"{where}: {err['msg']}")
    return "; ".join(problems)
