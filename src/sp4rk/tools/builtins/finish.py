"""The ``finish`` tool: the only way a run completes. The executor intercepts its calls."""

from __future__ import annotations

from typing import Any

from sp4rk._internal import safejson
from sp4rk.tools.base import ToolPolicy, ToolResult, ToolTraits
from sp4rk.tools.context import RunContext

FINISH_TOOL_NAME = "finish"


class FinishTool:
    """Signals task completion; its ``answer`` becomes the run's output.

    The executor appends it to every run's tools and handles its calls itself (finish guard,
    mutation and checklist gates); ``execute`` only matters when called outside an executor.
    """

    name = FINISH_TOOL_NAME
    description = (
        "Call this when the task is complete, with your final answer for the user. "
        "This is the only way to finish: a reply without a tool call does not end the task."
    )
    input_schema: dict[str, Any] = {  # noqa: RUF012 - read-only by convention
        "type": "object",
        "properties": {
            "answer": {"type": "string", "description": "The final answer or summary of the work."}
        },
        "required": ["answer"],
        "additionalProperties": False,
    }
    default_policy = ToolPolicy.ALWAYS_ALLOW
    is_untrusted = False
    traits = ToolTraits(cacheable=False)

    async def execute(self, ctx: RunContext, input: str) -> ToolResult:
        """Echo the answer, or report why the input is not a valid finish call."""
        try:
            return ToolResult(parse_finish_answer(input))
        except ValueError as exc:
            return ToolResult(str(exc), is_error=True)


def new_finish_tool() -> FinishTool:
    """A new :class:`FinishTool`."""
    return FinishTool()


def parse_finish_answer(raw: str) -> str:
    """The ``answer`` of a finish call's raw JSON input.

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
