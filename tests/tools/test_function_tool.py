"""The @tool decorator: schema generation, validation, sync/async execution, return values."""

from __future__ import annotations

import asyncio
import threading
from typing import Literal

import pydantic
import pytest
from pydantic import BaseModel

from sp4rk.tools import FunctionTool, RunContext, Tool, ToolError, ToolPolicy, ToolResult, tool
from sp4rk.tools import function as function_module
from sp4rk.tools import input_model as input_model_module
from sp4rk.tools.builtins import search_facts, store_fact, tool_result_read, update_checklist
from sp4rk.tools.function import own_tool


@tool
def grep(pattern: str, limit: int = 10, mode: Literal["fast", "full"] = "fast") -> str:
    """Search the code base.

    Longer explanation for the model.

    Args:
        pattern: the regular expression.
        limit: most matches returned.
        mode: how thorough to be.

    Returns:
        One match per line.

    Raises:
        ValueError: never reaches the model.
    """
    return f"{pattern}:{limit}:{mode}"


def test_schema_and_description_come_from_hints_and_docstring() -> None:
    assert isinstance(grep, Tool) and isinstance(grep, FunctionTool)
    assert grep.name == "grep" and grep.default_policy is ToolPolicy.ALWAYS_ALLOW
    assert grep.description == (
        "Search the code base.\n\nLonger explanation for the model.\n\nReturns: One match per line."
    )
    assert "Raises" not in grep.description and "never reaches" not in grep.description
    schema = grep.input_schema
    assert schema["required"] == ["pattern"] and schema["additionalProperties"] is False
    assert schema["properties"]["pattern"] == {
        "description": "the regular expression.",
        "type": "string",
    }
    assert schema["properties"]["limit"]["default"] == 10
    assert schema["properties"]["mode"]["enum"] == ["fast", "full"]
    assert "title" not in schema


async def test_valid_input_runs_and_direct_calls_still_work() -> None:
    assert await grep.execute(RunContext(), '{"pattern": "x", "limit": 3}') == ToolResult(
        "x:3:fast"
    )
    assert grep("y") == "y:10:fast"


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ('{"pattern": 5}', "pattern: Input should be a valid string"),
        ('{"limit": 3}', "pattern: Field required"),
        ('{"pattern": "x", "mode": "slow"}', "mode: Input should be 'fast' or 'full'"),
        ('{"pattern": "x", "extra": 1}', "extra: Extra inputs are not permitted"),
        ("[1, 2]", "expected a JSON object, got an array"),
        ('{"pattern": ', "invalid JSON"),
    ],
)
async def test_bad_input_is_a_parse_error_result(raw: str, fragment: str) -> None:
    result = await grep.execute(RunContext(), raw)
    assert result.is_error and result.content.startswith("failed to parse input: ")
    assert fragment in result.content


async def test_empty_input_means_no_arguments() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    assert (await ping.execute(RunContext(), "")).content == "pong"


async def test_context_is_injected_and_not_in_the_schema(tmp_path: object) -> None:
    @tool(name="where", description="Says where.", untrusted=True, read_only=True)
    async def where_am_i(ctx: RunContext, verbose: bool = False) -> str:
        return f"{ctx.step_id}:{verbose}"

    assert where_am_i.name == "where" and where_am_i.is_untrusted and where_am_i.read_only
    assert "ctx" not in where_am_i.input_schema["properties"]
    result = await where_am_i.execute(RunContext(step_id="s9"), '{"verbose": true}')
    assert result.content == "s9:True"


async def test_sync_functions_run_in_a_worker_thread() -> None:
    seen: list[str] = []

    @tool
    def who() -> str:
        """Report the thread."""
        seen.append(threading.current_thread().name)
        return "ok"

    await who.execute(RunContext(), "{}")
    assert seen and seen[0] != threading.main_thread().name


async def test_return_values_are_converted() -> None:
    class Point(BaseModel):
        x: int
        y: int

    @tool
    def as_model() -> Point:
        """Model."""
        return Point(x=1, y=2)

    @tool
    def as_dict() -> dict[str, int]:
        """Dict."""
        return {"a": 1}

    @tool
    def as_none() -> None:
        """None."""

    @tool
    def as_error_result() -> ToolResult:
        """Explicit."""
        return ToolResult("bad", is_error=True)

    @tool
    def as_object() -> object:
        """Unserialisable."""
        return threading.Lock()

    ctx = RunContext()
    assert (await as_model.execute(ctx, "{}")).content == '{"x":1,"y":2}'
    assert (await as_dict.execute(ctx, "{}")).content == '{"a":1}'
    assert (await as_none.execute(ctx, "{}")).content == ""
    assert await as_error_result.execute(ctx, "{}") == ToolResult("bad", is_error=True)
    odd = await as_object.execute(ctx, "{}")
    assert odd.is_error and "cannot be shown to the model" in odd.content


async def test_tool_error_becomes_the_observation_and_other_exceptions_propagate() -> None:
    @tool
    def picky(n: int) -> str:
        """Picky."""
        if n < 0:
            raise ToolError("n must be positive; try n=1")
        raise KeyError("bug")

    assert await picky.execute(RunContext(), '{"n": -1}') == ToolResult(
        "n must be positive; try n=1", is_error=True
    )
    with pytest.raises(KeyError):  # the Registry turns these into error results
        await picky.execute(RunContext(), '{"n": 1}')


def test_signatures_that_cannot_be_described_are_rejected() -> None:
    def varargs(*names: str) -> str:
        return ""

    def late_ctx(x: int, ctx: RunContext) -> str:
        return ""

    def undocumented(x: int) -> str:
        """No args section."""
        return ""

    with pytest.raises(TypeError, match=r"\*args"):
        tool(varargs)
    with pytest.raises(TypeError, match="must come first"):
        tool(late_ctx)
    with pytest.raises(TypeError, match="no description"):
        tool(require_parameter_descriptions=True)(undocumented)
    with pytest.raises(ValueError, match="tool name"):
        tool(name="bad name!")(undocumented)


class Opaque:
    """A type pydantic knows nothing of."""


def test_a_type_pydantic_cannot_validate_fails_where_the_tool_is_defined() -> None:
    def takes_opaque(thing: Opaque) -> str:
        return ""

    with pytest.raises(pydantic.PydanticSchemaGenerationError):
        tool(takes_opaque)


@pytest.mark.parametrize("own", [update_checklist, store_fact, search_facts, tool_result_read])
def test_own_tools_built_on_first_use_are_what_tool_builds(own: FunctionTool[..., object]) -> None:
    twin = tool(name=own.name, untrusted=own.is_untrusted, traits=own.traits)(own.fn)
    assert own.input_schema == twin.input_schema and own.input_schema["properties"]
    assert own.description == twin.description != ""


async def test_an_own_tool_is_built_once_by_the_first_of_many_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    threads = 5
    builds: list[str] = []
    arrived = 0
    counted = threading.Condition()

    class CountingLock:
        """The build lock, counting the threads that reached it."""

        def __init__(self) -> None:
            self.inner = threading.RLock()

        def __enter__(self) -> None:
            nonlocal arrived
            with counted:
                arrived += 1
                counted.notify_all()
            self.inner.acquire()

        def __exit__(self, *exc: object) -> None:
            self.inner.release()

    real_build = input_model_module.build_input_model

    def slow_build(*args: object, **kwargs: object) -> input_model_module.InputModel:
        builds.append(threading.current_thread().name)
        with counted:  # every thread asks while this build is under way
            assert counted.wait_for(lambda: arrived == threads, timeout=10), arrived
        return real_build(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(input_model_module, "build_input_model", slow_build)
    monkeypatch.setattr(function_module, "_BUILD_LOCK", CountingLock())

    @own_tool(name="shared")
    def shared(n: int) -> int:
        """Double a number.

        Args:
            n: the number.
        """
        return 2 * n

    schemas: list[dict[str, object]] = []

    def ask() -> None:
        schemas.append(shared.input_schema)

    workers = [threading.Thread(target=ask) for _ in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(timeout=30)
    assert len(builds) == 1 and len(schemas) == threads
    assert all(schema is schemas[0] for schema in schemas)
    assert await shared.execute(RunContext(), '{"n": 4}') == ToolResult("8")


def test_a_tools_description_and_schema_can_still_be_replaced() -> None:
    @tool
    def ping(host: str) -> str:
        """Ping a host."""
        return host

    ping.description = "Ping one host, once."
    ping.input_schema = {**ping.input_schema, "additionalProperties": False}
    assert ping.description == "Ping one host, once."
    assert ping.input_schema["additionalProperties"] is False
    assert ping.input_schema["properties"] == {"host": {"type": "string"}}


async def test_cancelling_an_async_tool_propagates() -> None:
    started = asyncio.Event()

    @tool
    async def hang() -> str:
        """Hang."""
        started.set()
        await asyncio.Event().wait()
        return ""

    running = asyncio.create_task(hang.execute(RunContext(), "{}"))
    await started.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
