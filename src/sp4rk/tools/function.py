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

The description and the pydantic model come from :mod:`sp4rk.tools.input_model`, loaded with
the first tool built, so that importing sp4rk (the executor included) loads neither pydantic
nor docstring_parser. ``@tool`` builds them at decoration, so a signature or a type that
cannot become a schema fails where the tool is defined. sp4rk's own tools that load with the
executor (``own_tool``) build them on first use instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, ParamSpec, TypeVar, cast, overload

from sp4rk.tools.base import ToolError, ToolPolicy, ToolResult, ToolTraits, parse_error_result
from sp4rk.tools.context import RunContext
from sp4rk.tools.tool_input import parse_tool_input

if TYPE_CHECKING:
    from sp4rk.tools.input_model import InputModel

P = ParamSpec("P")
R = TypeVar("R")

#: What providers accept as a tool name.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: Serialises the builds of tools built on first use: a module-level tool may be first used
#: by several threads at once (each with its own event loop), and each must get the same model.
_BUILD_LOCK = threading.RLock()


class FunctionTool(Generic[P, R]):
    """A tool backed by a Python function; calling the object calls the function directly."""

    #: Build the description and input model in the constructor (a bad signature fails where
    #: the tool is defined), or on first use (``own_tool``).
    _BUILT_AT_DEFINITION: ClassVar[bool] = True

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
        self._is_async = inspect.iscoroutinefunction(fn)
        self._description = description
        self._require_docs = require_parameter_descriptions
        self._input: InputModel | None = None
        if self._BUILT_AT_DEFINITION:
            self._input = self._build()

    @property
    def description(self) -> str:
        """What the tool does, for the model: ``description=``, else from the docstring."""
        return (self._input or self._build_once()).description

    @description.setter
    def description(self, text: str) -> None:
        self._input = dataclasses.replace(self._input or self._build_once(), description=text)

    @property
    def input_schema(self) -> dict[str, Any]:
        """JSON schema of the tool's input object, from the parameters' type hints."""
        return (self._input or self._build_once()).schema

    @input_schema.setter
    def input_schema(self, schema: dict[str, Any]) -> None:
        """Replace the schema the model is shown (inputs are still checked by the signature)."""
        self._input = dataclasses.replace(self._input or self._build_once(), schema=schema)

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
        built = self._input or self._build_once()
        try:
            kwargs = built.arguments(raw)
        except ValueError as exc:
            return parse_error_result(str(exc))
        args: tuple[Any, ...] = (ctx,) if built.takes_ctx else ()
        fn = cast("Callable[..., Any]", self.fn)
        try:
            if self._is_async:
                value = await cast("Awaitable[Any]", fn(*args, **kwargs))
            else:
                value = await asyncio.to_thread(fn, *args, **kwargs)
        except ToolError as exc:
            return ToolResult(str(exc), is_error=True)
        return _to_result(value, self.name)

    def _build(self) -> InputModel:
        from sp4rk.tools.input_model import build_input_model  # pydantic: see the module doc

        return build_input_model(self.fn, self.name, self._description, self._require_docs)

    def _build_once(self) -> InputModel:
        """The description and input model, built once, whichever thread asks first."""
        with _BUILD_LOCK:
            if self._input is None:
                self._input = self._build()
            return self._input


class _OwnTool(FunctionTool[P, R]):
    """One of sp4rk's own tools, built on first use (its signature is tested, not the user's)."""

    _BUILT_AT_DEFINITION = False


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


def own_tool(
    *, name: str, untrusted: bool = False, traits: ToolTraits | None = None
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """``@tool`` for sp4rk's own module-level tools, which load with the executor.

    The same tool, but its description and pydantic model are built on first use (listed to
    a model, or called), so that importing the executor loads neither pydantic nor
    docstring_parser. Not for users' tools: those must fail at definition when their
    signature cannot become a schema. Each own tool's schema is built in the tests.
    """

    def wrap(f: Callable[P, R]) -> FunctionTool[P, R]:
        return _OwnTool(f, name=name, untrusted=untrusted, traits=traits)

    return wrap


def _to_result(value: Any, tool_name: str) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return ToolResult("")
    if isinstance(value, str):
        return ToolResult(value)
    from sp4rk.tools.input_model import to_json  # loaded already: the tool was built

    text = to_json(value)
    if text is None:
        return ToolResult(
            f"tool {tool_name!r} returned a {type(value).__name__}, which cannot be shown to the "
            "model; return str, ToolResult, or JSON-serialisable data",
            is_error=True,
        )
    return ToolResult(text)
