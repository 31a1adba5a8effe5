"""Small building blocks for executor tests: a registry of real tools and a context double."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from sp4rk.agent import (
    CircuitBreakerConfig,
    CompactionResult,
    CompactionStrategy,
    Executor,
    ExecutorResult,
    FillCheck,
    HITLHandler,
    RecordingEvents,
    Step,
    StepLimitResponse,
    VulnerableOutput,
)
from sp4rk.llm import ChatResponse, Message
from sp4rk.llm.testing import ScriptedLLM
from sp4rk.memory import ContextWindow, render_steps
from sp4rk.tools import Registry, RunContext, ToolPolicy, ToolResult, ToolTraits, tool
from sp4rk.tools.builtins.files import EDITS_FILE


def echo_tools(calls: list[tuple[str, str]] | None = None) -> Registry:
    """A registry whose tools record their calls and answer predictably.

    - ``search(q)`` returns a long distinct line per query (never fruitless).
    - ``read_file(path)`` returns ``contents of <path>`` padded past the fruitless limit.
    - ``write_file(path, content)`` / ``edit_file(path, old, new)`` return ``ok``.
    - ``empty(q)`` returns ``""``; ``fail(q)`` raises a ToolError.
    """
    log = calls if calls is not None else []

    @tool(read_only=True)
    def search(q: str) -> str:
        """Search for q."""
        log.append(("search", q))
        return f"results for {q}: " + "x" * 60

    @tool(traits=ToolTraits(read_only=True, file_argument="path"))
    def read_file(path: str) -> str:
        """Read a file."""
        log.append(("read_file", path))
        return f"contents of {path} " + "." * 60

    @tool(traits=EDITS_FILE)
    def write_file(path: str, content: str) -> str:
        """Write a file."""
        log.append(("write_file", path))
        return "ok"

    @tool(traits=EDITS_FILE)
    def edit_file(path: str, old_string: str = "", new_string: str = "") -> str:
        """Edit a file."""
        log.append(("edit_file", path))
        return "edited"

    @tool
    def empty(q: str) -> str:
        """Return nothing."""
        log.append(("empty", q))
        return ""

    @tool
    def fail(q: str) -> str:
        """Always fail."""
        from sp4rk.tools import ToolError

        log.append(("fail", q))
        raise ToolError(f"cannot do {q}")

    @tool(policy=ToolPolicy.USER_CONFIRM)
    def bash_exec(command: str) -> str:
        """Run a command (needs confirmation)."""
        log.append(("bash_exec", command))
        return f"ran {command}"

    return Registry([search, read_file, write_file, edit_file, empty, fail, bash_exec])


def run(
    responses: Sequence[Any],
    *,
    tools: Registry | None = None,
    max_steps: int = 10,
    events: RecordingEvents | None = None,
    cw: Any = None,
    ctx: RunContext | None = None,
    setup: Callable[[Executor], None] | None = None,
    **executor_kwargs: Any,
) -> tuple[ExecutorResult, ScriptedLLM, RecordingEvents]:
    """Run a scripted agent to completion and return (result, llm, events)."""
    registry = tools or echo_tools()
    llm = ScriptedLLM(responses)
    ev = events or RecordingEvents()
    executor = Executor(llm, registry, max_steps, events=ev, **executor_kwargs)
    if setup is not None:
        setup(executor)
    window = cw if cw is not None else ContextWindow(task="do the task")
    result = executor.run_sync(registry.list(), window, ctx)
    return result, llm, ev


@dataclass
class FakeContext:
    """A ContextManager double with a scripted fill; renders like ContextWindow does."""

    fill: list[FillCheck] = field(default_factory=lambda: [FillCheck(10.0, "ok", 1000, 100_000)])
    available: int = 100_000
    limit: int = 8192
    vulnerable: list[VulnerableOutput] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    compactions: int = 0
    compact_result: CompactionResult | None = field(
        default_factory=lambda: CompactionResult(90.0, 40.0)
    )
    corrections: list[int] = field(default_factory=list)
    interjection: str = ""
    consumed: int = 0
    strategy: CompactionStrategy | None = None

    def build_prompt(self) -> list[Message]:
        out = [Message("user", content="task"), *render_steps(self.steps)]
        if self.interjection:
            out.append(Message("user", content=self.interjection))
        return out

    def add_step(self, step: Step) -> None:
        self.steps.append(step)

    async def compact(self) -> CompactionResult | None:
        self.compactions += 1
        return self.compact_result

    def set_strategy(self, strategy: CompactionStrategy) -> None:
        self.strategy = strategy

    def check_fill(self) -> FillCheck:
        return self.fill.pop(0) if len(self.fill) > 1 else self.fill[0]

    def correct_token_count(self, api_input_tokens: int) -> None:
        self.corrections.append(api_input_tokens)

    def fill_percent(self) -> float:
        return self.fill[0].percent

    def available_tokens(self) -> int:
        return self.available

    def output_limit(self) -> int:
        return self.limit

    def vulnerable_outputs(self) -> list[VulnerableOutput]:
        return list(self.vulnerable)


class InterjectingContext(FakeContext):
    """A FakeContext that also holds a one-shot interjection (InterjectionConsumer)."""

    def consume_pending_user_interjection(self) -> None:
        if self.interjection:
            self.consumed += 1
        self.interjection = ""


class RawTool:
    """A hand-written Tool (no decorator) whose execute is a given coroutine function."""

    def __init__(self, name: str, fn: Callable[[RunContext, str], Any], **kw: Any) -> None:
        self.name = name
        self.description = f"the {name} tool"
        self.input_schema: dict[str, Any] = {"type": "object", "properties": {}}
        self.default_policy = kw.get("policy", ToolPolicy.ALWAYS_ALLOW)
        self.is_untrusted = kw.get("untrusted", False)
        self._fn = fn

    async def execute(self, ctx: RunContext, input: str) -> ToolResult:
        result: ToolResult = await self._fn(ctx, input)
        return result


def actions(result: ExecutorResult) -> list[str]:
    """Tool names of the steps that carry an action."""
    return [s.action.name for s in result.steps if s.action is not None]


def nudges(result: ExecutorResult) -> list[str]:
    """Every non-empty user nudge, in order."""
    return [s.user_nudge for s in result.steps if s.user_nudge]


def response(calls: Sequence[tuple[str, Any]], **kw: Any) -> ChatResponse:
    """Shorthand for ``tool_calls_response``."""
    from sp4rk.llm.testing import tool_calls_response

    return tool_calls_response(*calls, **kw)


def only(**thresholds: int) -> CircuitBreakerConfig:
    """Every breaker's nudge and abort off except the given settings."""
    off = {f.name: 0 for f in fields(CircuitBreakerConfig) if f.name.endswith("_threshold")}
    return CircuitBreakerConfig(**{**off, **thresholds})


class Reprieve(HITLHandler):
    """Answers each breaker abort with the next answer, then denies; records the reasons."""

    def __init__(self, *answers: StepLimitResponse) -> None:
        self.answers = list(answers)
        self.reasons: list[str] = []

    async def on_step_limit(
        self, ctx: RunContext, current_step: int, max_steps: int, reason: str
    ) -> StepLimitResponse:
        self.reasons.append(reason)
        return self.answers.pop(0) if self.answers else StepLimitResponse.DENY
