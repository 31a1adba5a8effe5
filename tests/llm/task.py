"""One scripted multi-step agent task, run unchanged against every provider.

The same tools, prompt and executor settings serve the scripted wire formats and the local
model; only the LLM caller changes.
"""

from __future__ import annotations

from typing import Any

from sp4rk.agent import Events, Executor, ExecutorResult
from sp4rk.memory import ContextWindow
from sp4rk.tools import Registry, ToolError, tool
from tests.llm.wire import Turn

VALUES = {"answer": 41}


@tool
def lookup(key: str) -> str:
    """Look up a stored number.

    Args:
        key: the name of the number, for example "answer".
    """
    if key not in VALUES:
        raise ToolError(f"no number is stored under {key!r}; try 'answer'")
    return str(VALUES[key])


@tool
def add(a: int, b: int) -> str:
    """Add two integers and return the sum.

    Args:
        a: the first integer.
        b: the second integer.
    """
    return str(a + b)


SYSTEM = "You are an agent. Use the tools, then call finish with the final answer."
TASK = "Look up the number stored under 'answer', add 1 to it with the add tool, and finish."

#: What a model following the task does, one turn per LLM call.
SCRIPT = [
    Turn(text="Looking up the number.", calls=[("call_1", "lookup", '{"key": "answer"}')]),
    Turn(text="Adding one.", calls=[("call_2", "add", '{"a": 41, "b": 1}')], usage=(220, 12)),
    Turn(calls=[("call_3", "finish", '{"answer": "42"}')], usage=(300, 9)),
]


def registry() -> Registry:
    tools = Registry()
    tools.register(lookup)
    tools.register(add)
    return tools


async def run_task(
    llm: Any, *, events: Events | None = None, max_steps: int = 8, window: int = 32_000
) -> ExecutorResult:
    tools = registry()
    executor = Executor(llm, tools, max_steps, events=events)
    context = ContextWindow(window, 1024, system_prompt=SYSTEM, task=TASK)
    return await executor.run(tools.list(), context)


def trajectory(result: ExecutorResult) -> list[dict[str, Any]]:
    """The run as plain data: comparable across providers and replays."""
    return [step.to_dict() for step in result.steps]
