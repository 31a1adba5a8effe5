"""A shape through sp4rk's real ``Executor``, with its default breakers and HITL handler.

The default HITL handler denies every reprieve, so a breaker's abort ends the run. The model is
a ``FunctionLLM`` that answers the n-th call with the shape's n-th reply, whatever it was told.
"""

from __future__ import annotations

from dataclasses import dataclass

from shapes import Shape, Turn
from world import World

from sp4rk.agent import Executor, ExitReason, RecordingEvents
from sp4rk.llm import ChatRequest, ChatResponse
from sp4rk.llm.testing import FunctionLLM, finish_response, text_response, tool_calls_response
from sp4rk.memory import ContextWindow

#: Exit reasons that mean "a loop detector stopped the run".
BREAKER_EXITS = {
    ExitReason.REPEAT_ABORT,
    ExitReason.TRUNCATION_ABORT,
    ExitReason.PARSE_ERROR_ABORT,
    ExitReason.FRUITLESS_ABORT,
    ExitReason.SAME_TOOL_ABORT,
    ExitReason.CYCLE_ABORT,
    ExitReason.NO_PROGRESS_ABORT,
}
#: Diagnostics of a breaker's warning to the model (a false alarm on legitimate work).
NUDGES = {
    "repeated_tool_call_nudge",
    "fruitless_nudge",
    "same_tool_repeat_nudge",
    "cycle_nudge",
    "no_progress_nudge",
    "truncation_detected",
}
TEXT_NUDGES = {"executor_finish_nudge", "tool_call_syntax_nudge"}


@dataclass(frozen=True)
class Outcome:
    """How one run ended, in model calls."""

    model_calls: int
    exit_reason: str
    stopped_by: str
    """The breaker (or rule) that stopped the run; ``""`` when it ran to its end or limit."""
    first_warning: int
    """The model call after which the first stuck warning was given (0: none)."""
    warnings: list[str]


def _response(turn: Turn, n: int) -> ChatResponse:
    if turn.answer is not None:
        return finish_response(turn.answer)
    if not turn.calls:
        return text_response(turn.text)
    response = tool_calls_response(*turn.calls, thought=turn.text)
    for i, call in enumerate(response.message.tool_calls):
        call.id = f"call_{n}_{i}"
    return response


def run(shape: Shape, max_calls: int) -> Outcome:
    """Run ``shape`` until it ends, a breaker stops it, or ``max_calls`` model calls."""
    world = World()
    shape.setup(world)
    tools = world.registry()
    calls = 0

    def model(request: ChatRequest) -> ChatResponse:
        nonlocal calls
        calls += 1
        return _response(shape.turn(calls - 1), calls - 1)

    events = RecordingEvents()
    executor = Executor(FunctionLLM(model), tools, max_calls, events=events)
    result = executor.run_sync(tools.list(), ContextWindow(task="Fix the failing test."))
    diagnostics = [
        (step, name, details) for step, name, details in events.of("executor_diagnostic")
    ]
    warnings = [f"{name}@{step}" for step, name, _ in diagnostics if name in NUDGES | TEXT_NUDGES]
    first = min((step for step, name, _ in diagnostics if name in NUDGES | TEXT_NUDGES), default=0)
    reason = result.exit_reason
    if reason in BREAKER_EXITS:
        stopped_by = reason.value.removesuffix("_abort")
    elif reason is ExitReason.IMPLICIT_FINISH:
        stopped_by = "text replies"
    else:
        stopped_by = ""
    return Outcome(calls, reason.value, stopped_by, first, warnings)
