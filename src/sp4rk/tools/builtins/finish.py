"""The ``finish`` tool: the only way a run completes. The executor intercepts its calls.

By default the model finishes with a text ``answer``. Given an ``output_type`` (a pydantic
model, a dataclass, a ``TypedDict``, or any type pydantic validates), the tool's input schema
is that type's, and an answer counts only once it validates: the model is told what is wrong
otherwise, and tries again.
"""

from __future__ import annotations

from typing import Any

from sp4rk._internal import safejson
from sp4rk.tools.base import ToolPolicy, ToolResult, ToolTraits
from sp4rk.tools.context import RunContext

FINISH_TOOL_NAME = "finish"

_TEXT_DESCRIPTION = (
    "Call this when the task is complete, with your final answer for the user. "
    "This is the only way to finish: a reply without a tool call does not end the task."
)
_TYPED_DESCRIPTION = (
    "Call this when the task is complete. Its arguments are your final answer, in exactly "
    "the structure of this schema. This is the only way to finish: a reply without a tool "
    "call does not end the task."
)
_TEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "description": "The final answer or summary of the work."}
    },
    "required": ["answer"],
    "additionalProperties": False,
}
#: How much of a validation error reaches the model.
_MAX_ERROR_CHARS = 2000


class FinishTool:
    """Signals task completion; its input becomes the run's output.

    The executor appends it to every run's tools and handles its calls itself (finish guard,
    mutation and checklist gates); ``execute`` only matters when called outside an executor.

    Args:
        output_type: the type of a structured answer (``Executor(..., output_type=...)``
            passes it here). ``None`` (the default) asks for a text ``answer``. A type whose
            JSON schema is an object (a model, a dataclass, a ``TypedDict``) is the tool's
            input schema itself; any other (``list[str]``, ``int``) is asked for as
            ``{"answer": ...}``.

    Raises:
        TypeError: when pydantic cannot validate ``output_type``.
    """

    name = FINISH_TOOL_NAME
    default_policy = ToolPolicy.ALWAYS_ALLOW
    is_untrusted = False
    traits = ToolTraits(cacheable=False)

    def __init__(self, output_type: Any = None) -> None:
        self.output_type: Any = output_type
        """The type of a structured answer (``None``: a text answer)."""
        self.description = _TEXT_DESCRIPTION
        self.input_schema: dict[str, Any] = _TEXT_SCHEMA
        self._adapter: Any = None
        self._wrapped = True
        if output_type is None:
            return
        if isinstance(output_type, str):
            raise TypeError(
                f"output_type must be a type, not the string {output_type!r}: pass the type "
                "itself (output_type=MyModel)"
            )
        if output_type is object or output_type is Any:
            raise TypeError(
                f"output_type={getattr(output_type, '__name__', output_type)} accepts any answer "
                "at all: leave output_type unset for a text answer, or give the answer's type"
            )
        from pydantic import PydanticUserError, TypeAdapter

        try:
            self._adapter = TypeAdapter(output_type)
            schema = self._adapter.json_schema()
        except (PydanticUserError, TypeError) as exc:
            raise TypeError(
                f"output_type must be a type pydantic can validate (a pydantic model, a "
                f"dataclass, a TypedDict, list[...], ...), got {output_type!r}: "
                f"{str(exc).splitlines()[0]}"
            ) from None
        self._wrapped = schema.get("type") != "object"
        if self._wrapped:
            defs = schema.pop("$defs", None)
            schema = {
                "type": "object",
                "properties": {"answer": schema},
                "required": ["answer"],
                "additionalProperties": False,
            }
            if defs:
                schema["$defs"] = defs
        self.description = _TYPED_DESCRIPTION
        self.input_schema = schema

    @property
    def typed(self) -> bool:
        """Whether the answer must validate against an ``output_type``."""
        return self._adapter is not None

    def parse(self, raw: str) -> tuple[str, Any]:
        """The answer of a finish call's raw JSON input: its text, and the validated object.

        The text is the ``answer`` string, or, for a typed answer, the validated object as
        JSON. The object is ``None`` for a text answer.

        Raises:
            ValueError: starting with "failed to parse input" when the input is not valid,
                saying what is wrong (pydantic's errors for a typed answer).
        """
        if self._adapter is None:
            return parse_finish_answer(raw), None
        try:
            data = safejson.loads(raw) if raw.strip() else None
        except ValueError as exc:
            raise ValueError(
                f"failed to parse input: finish needs a JSON object matching its schema ({exc})"
            ) from None
        if not isinstance(data, dict):
            raise ValueError(
                "failed to parse input: finish needs a JSON object matching its schema, "
                f"got {raw[:200]!r}"
            )
        return self._validate(data["answer"] if self._wrapped and "answer" in data else data)

    def parse_text(self, text: str) -> tuple[str, Any]:
        """Validate a text reply as the answer: JSON, bare or in a fenced block.

        Raises:
            ValueError: starting with "failed to parse input" when it does not validate.
        """
        if self._adapter is None:
            return text, None
        body = _unfenced(text)
        try:
            data = safejson.loads(body)
        except ValueError:
            if not self._wrapped:
                raise ValueError("failed to parse input: the reply is text, not JSON") from None
            data = body  # a plain value (a str answer type) may be given as text
        if self._wrapped and isinstance(data, dict) and "answer" in data:
            data = data["answer"]
        return self._validate(data)

    def _validate(self, data: Any) -> tuple[str, Any]:
        from pydantic import ValidationError

        try:
            value = self._adapter.validate_python(data)
        except ValidationError as exc:
            errors = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(the answer)'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            raise ValueError(
                f"failed to parse input: the answer does not match the finish schema: "
                f"{errors[:_MAX_ERROR_CHARS]}. Call finish again with a corrected answer."
            ) from None
        text = self._adapter.dump_json(value).decode()
        return text, value

    async def execute(self, ctx: RunContext, input: str) -> ToolResult:
        """Echo the answer, or report why the input is not a valid finish call."""
        try:
            return ToolResult(self.parse(input)[0])
        except ValueError as exc:
            return ToolResult(str(exc), is_error=True)


def new_finish_tool(output_type: Any = None) -> FinishTool:
    """A new :class:`FinishTool` (for a structured answer: of ``output_type``)."""
    return FinishTool(output_type)


def parse_finish_answer(raw: str) -> str:
    """The ``answer`` of a text finish call's raw JSON input.

    Raises:
        ValueError: starting with "failed to parse input" when the input is not a JSON
            object with a string ``answer``.
    """
    try:
        data = safejson.loads(raw) if raw.strip() else None
    except ValueError as exc:
        raise ValueError(
            f'failed to parse input: finish needs JSON like {{"answer": "..."}} ({exc})'
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("answer"), str):
        raise ValueError(
            'failed to parse input: finish needs a JSON object with a string "answer", '
            f"got {raw[:200]!r}"
        )
    answer: str = data["answer"]
    return answer


def _unfenced(text: str) -> str:
    """The body of a fenced code block in ``text`` (```json ... ```), or ``text`` stripped."""
    stripped = text.strip()
    start = stripped.find("```")
    if start < 0:
        return stripped
    body_start = stripped.find("\n", start)
    end = stripped.find("```", body_start + 1) if body_start >= 0 else -1
    if body_start < 0 or end < 0:
        return stripped
    return stripped[body_start + 1 : end].strip()
