"""``@tool``: turn a typed Python function into a :class:`~sp4rk.tools.Tool`.

The function's type hints become the JSON schema (via pydantic) and validate the model's input
before the function runs; the input is parsed within safety limits first
(:func:`~sp4rk.tools.tool_input.parse_tool_input`). What reaches the model:

- the tool name: the function name, or ``name=``;
- the description: the docstring's summary and body, plus its ``Returns:`` text;
  or ``description=``;
- per-parameter descriptions from the docstring's ``Args:`` section (Google, NumPy or reST
  style), placed in the schema. ``Raises:`` and examples are not sent.

A first parameter annotated ``RunContext`` receives the run's context and is not part of the
schema. Sync functions run in a worker thread so they never block the event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any, Generic, ParamSpec, TypeVar, cast, get_type_hints, overload

import docstring_parser
import pydantic
import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sp4rk.tools.base import ToolError, ToolPolicy, ToolResult, ToolTraits, parse_error_result
from sp4rk.tools.context import RunContext
from sp4rk.tools.tool_input import parse_tool_input

P = ParamSpec("P")
R = TypeVar("R")

_ANY: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(Any)
#: What providers accept as a tool name.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class FunctionTool(Generic[P, R]):
    """A tool backed by a Python function; calling the object calls the function directly."""

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        policy: ToolPolicy = ToolPolicy.ALWAYS_ALLOW,
        untrusted: bool = False,
        read_only: bool = False,
        traits: ToolTraits | None = None,
        require_parameter_descriptions: bool = False,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"@tool needs a function, got {type(fn).__name__}")
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", ""))
        if not _TOOL_NAME.fullmatch(self.name):
            raise ValueError(
                f"tool name {self.name!r} must be 1-64 ASCII letters, digits, '_' or '-' "
                "(what every provider accepts)"
            )
        self.default_policy = policy
        self.is_untrusted = untrusted
        if traits is not None and read_only and not traits.read_only:
            raise ValueError("read_only=True contradicts traits.read_only=False; pass one")
        self.traits: ToolTraits = traits or ToolTraits(read_only=read_only)
        doc = docstring_parser.parse(inspect.getdoc(fn) or "")
        self.description: str = description if description is not None else _describe(doc)
        self._takes_ctx, self._model = _input_model(
            fn, self.name, doc, require_parameter_descriptions
        )
        self.input_schema: dict[str, Any] = _clean_schema(self._model.model_json_schema())
        self._fields = tuple(self._model.model_fields)
        self._is_async = inspect.iscoroutinefunction(fn)

    @property
    def read_only(self) -> bool:
        """Whether the tool changes nothing (``traits.read_only``)."""
        return self.traits.read_only

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the wrapped function directly (handy in tests)."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r})"

    async def execute(self, ctx: RunContext, input: str) -> ToolResult:
        """Validate ``input`` against the schema, call the function, and wrap its return."""
        try:
            raw = parse_tool_input(input)
        except ValueError as exc:
            return parse_error_result(str(exc))
        try:
            parsed = self._model.model_validate(raw)
        except ValidationError as exc:
            return parse_error_result(_format_validation_error(exc))
        kwargs = {k: getattr(parsed, k) for k in self._fields}
        args: tuple[Any, ...] = (ctx,) if self._takes_ctx else ()
        fn = cast("Callable[..., Any]", self.fn)
        try:
            if self._is_async:
                value = await cast("Awaitable[Any]", fn(*args, **kwargs))
            else:
                value = await asyncio.to_thread(fn, *args, **kwargs)
        except ToolError as exc:
            return ToolResult(str(exc), is_error=True)
        return _to_result(value, self.name)


@overload
def tool(fn: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    policy: ToolPolicy = ToolPolicy.ALWAYS_ALLOW,
    untrusted: bool = False,
    read_only: bool = False,
    traits: ToolTraits | None = None,
    require_parameter_descriptions: bool = False,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    policy: ToolPolicy = ToolPolicy.ALWAYS_ALLOW,
    untrusted: bool = False,
    read_only: bool = False,
    traits: ToolTraits | None = None,
    require_parameter_descriptions: bool = False,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Make a tool from a typed function; use as ``@tool`` or ``@tool(name=..., ...)``.

    Args:
        fn: the function (when used without parentheses).
        name: the tool name; defaults to the function name.
        description: the description; defaults to the docstring.
        policy: whether the tool may run without a human's approval.
        untrusted: mark the output as coming from an untrusted source (web, files).
        read_only: the tool changes nothing, so it may run concurrently with other
            read-only calls of the same response (shorthand for ``traits``).
        traits: what the executor may assume about the tool (read-only, mutating, cached,
            brief results, pollable); see :class:`~sp4rk.tools.ToolTraits`.
        require_parameter_descriptions: raise ``TypeError`` if a parameter has no
            description in the docstring.

    Raises:
        TypeError: when the signature cannot become a schema (``*args``, a misplaced
            ``RunContext`` parameter, a missing parameter description when required).
    """

    def wrap(f: Callable[P, R]) -> FunctionTool[P, R]:
        return FunctionTool(
            f,
            name=name,
            description=description,
            policy=policy,
            untrusted=untrusted,
            read_only=read_only,
            traits=traits,
            require_parameter_descriptions=require_parameter_descriptions,
        )

    return wrap if fn is None else wrap(fn)


def _describe(doc: docstring_parser.Docstring) -> str:
    parts = [p for p in (doc.short_description, doc.long_description) if p]
    if doc.returns and doc.returns.description:
        parts.append(f"Returns: {doc.returns.description}")
    return "\n\n".join(parts)


def _input_model(
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


def _to_result(value: Any, tool_name: str) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return ToolResult("")
    if isinstance(value, str):
        return ToolResult(value)
    try:
        return ToolResult(_ANY.dump_json(value).decode())
    except pydantic_core.PydanticSerializationError:
        return ToolResult(
            f"tool {tool_name!r} returned a {type(value).__name__}, which cannot be shown to the "
            "model; return str, ToolResult, or JSON-serialisable data",
            is_error=True,
        )
