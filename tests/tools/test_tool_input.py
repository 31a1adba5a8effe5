"""Hostile tool input: every kind is a parse-error result (never an exception), text is valid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sp4rk.tools import Registry, RunContext, ToolPolicy, ToolResult, tool
from sp4rk.tools.base import PARSE_ERROR_PREFIX
from sp4rk.tools.builtins import builtin_tools
from sp4rk.tools.builtins.shell_rules import MAX_COMMAND_BYTES, judge_command
from sp4rk.tools.tool_input import checked_input, parse_tool_input
from tests.tools.builtin_helpers import by_name, call

HOSTILE = {
    "deep": '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "digits": '{"a": ' + "9" * 5000 + "}",
    "nan": '{"a": NaN}',
    "infinity": '{"a": -Infinity}',
    "huge float": '{"a": 1e999}',
    "duplicate keys": '{"a": 1, "a": 2}',
}


@tool
def echo(a: object = None) -> str:
    """Echo a."""
    return repr(a)


class RawJSONTool:
    """A hand-written tool that parses its input with json.loads."""

    name = "raw"
    description = "raw"
    input_schema = {"type": "object"}  # noqa: RUF012
    default_policy = ToolPolicy.ALWAYS_ALLOW
    is_untrusted = False

    async def execute(self, ctx: RunContext, input: str) -> ToolResult:
        return ToolResult(repr(json.loads(input)))


@pytest.mark.parametrize("raw", HOSTILE.values(), ids=HOSTILE.keys())
def test_the_parser_refuses_hostile_json_with_a_value_error(raw: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the messages differ per case
        parse_tool_input(raw)
    with pytest.raises(ValueError):  # noqa: PT011
        checked_input(raw)


@pytest.mark.parametrize("raw", HOSTILE.values(), ids=HOSTILE.keys())
@pytest.mark.parametrize("name", ["echo", "raw"])
async def test_hostile_json_is_a_parse_error_through_the_registry(raw: str, name: str) -> None:
    registry = Registry([echo, RawJSONTool()])
    result = await registry.execute(RunContext(), name, raw)
    assert result.is_error
    assert result.content.startswith(PARSE_ERROR_PREFIX + ": ")


@pytest.mark.parametrize("raw", HOSTILE.values(), ids=HOSTILE.keys())
async def test_a_function_tool_called_directly_refuses_hostile_json(raw: str) -> None:
    result = await echo.execute(RunContext(), raw)
    assert result.is_error and result.content.startswith(PARSE_ERROR_PREFIX)


async def test_lone_surrogates_are_replaced_before_any_tool_sees_them() -> None:
    registry = Registry([echo, RawJSONTool()])
    escaped = '{"a": "x\\ud800y", "\\udc00": 1}'
    assert parse_tool_input(escaped) == {"a": "x\ufffdy", "\ufffd": 1}
    assert (await registry.execute(RunContext(), "echo", '{"a": "x\\ud800y"}')).content == (
        "'x\ufffdy'"
    )
    raw = await registry.execute(RunContext(), "raw", '{"a": "x\ud800y"}')
    assert raw.content == "{'a': 'x\ufffdy'}"
    assert checked_input('{"a": 1}') == '{"a": 1}'  # valid input passes unchanged


def test_empty_and_non_object_inputs() -> None:
    assert parse_tool_input("") == parse_tool_input(" null ") == {}
    with pytest.raises(ValueError, match="expected a JSON object, got an array"):
        parse_tool_input("[1]")
    assert checked_input("[1]") == "[1]"  # the registry leaves object checks to the tool


@pytest.mark.parametrize("raw", HOSTILE.values(), ids=HOSTILE.keys())
async def test_builtin_tools_and_the_shell_judge_survive_hostile_json(
    tmp_path: Path, raw: str
) -> None:
    tools = by_name(builtin_tools(tmp_path))
    registry = Registry(tools.values())
    ctx = RunContext(tool_call_approved=True)
    for name in tools:
        result = await registry.execute(ctx, name, raw)
        assert result.is_error and result.content.startswith(PARSE_ERROR_PREFIX), name
    assert registry.review(ctx, "bash_exec", raw) is not None


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("'' " * 5000 + "ls", ""),  # words that expand to nothing used to recurse
        ("nice " * 25 + "curl x", "too complex to judge"),  # wrappers used to multiply
        ("cd a; " * 3000, "too complex to judge"),
        ("a" * (MAX_COMMAND_BYTES + 1), "too long to judge"),
    ],
)
def test_the_shell_judge_stays_bounded_on_hostile_commands(
    tmp_path: Path, command: str, reason: str
) -> None:
    verdict = judge_command(command, roots=[tmp_path], cwd=tmp_path)
    assert reason in verdict.reason
    assert verdict.needs_confirmation is bool(reason)


async def test_a_command_too_long_for_the_system_is_refused(tmp_path: Path) -> None:
    result = await call(by_name(builtin_tools(tmp_path))["bash_exec"], command="#" * 200_000)
    assert result.is_error and "write a script file" in result.content


def test_a_checked_input_is_parsed_once_and_handed_out_once() -> None:
    text = '{"a": [1, {"b": "c"}]}'
    assert checked_input(text) is text
    first = parse_tool_input(text)  # the check's own parse
    first["a"].append("changed by the tool")
    second = parse_tool_input(text)  # parsed afresh: the first tool's change is not seen
    assert first is not second
    assert second == {"a": [1, {"b": "c"}]}


def test_a_parse_never_returns_another_strings_checked_value() -> None:
    checked_input('{"a": 1}')
    assert parse_tool_input('{"b": 2}') == {"b": 2}
    assert parse_tool_input("null") == {}
