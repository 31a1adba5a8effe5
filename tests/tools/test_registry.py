"""Registry: lookups, policies, sources, and turning every failure into an error result."""

from __future__ import annotations

import pytest

from sp4rk.tools import CacheMode, Registry, RunContext, ToolPolicy, ToolResult, tool


@tool
def read_file(path: str) -> str:
    """Read."""
    return f"read {path}"


@tool(policy=ToolPolicy.USER_CONFIRM)
def deploy(env: str) -> str:
    """Deploy."""
    return f"deployed {env}"


@tool(policy=ToolPolicy.ALWAYS_DENY)
def format_disk() -> str:
    """Never."""
    return "formatted"


class Remote:
    name = "read_file"
    description = "remote read"
    input_schema = {"type": "object"}  # noqa: RUF012
    default_policy = ToolPolicy.ALWAYS_ALLOW
    is_untrusted = False

    async def execute(self, ctx: RunContext, input: str) -> ToolResult:
        return ToolResult("remote")

    def is_content_backed(self) -> bool:
        return True


async def test_unknown_tool_is_an_error_listing_what_exists() -> None:
    registry = Registry([read_file])
    result = await registry.execute(RunContext(), "nope", "{}")
    assert result.is_error and result.content == "tool not found: nope. Available tools: read_file"


async def test_policies_deny_confirm_and_allow(caplog: pytest.LogCaptureFixture) -> None:
    registry = Registry([read_file, deploy, format_disk])
    denied = await registry.execute(RunContext(), "format_disk", "{}")
    assert denied.is_error and "blocked by security policy" in denied.content
    unconfirmed = await registry.execute(RunContext(), "deploy", '{"env": "prod"}')
    assert unconfirmed.is_error and "needs a human's approval" in unconfirmed.content
    assert "HITLToolDecision(allow=True)" in caplog.text  # the host is told how to allow it
    approved = await registry.execute(
        RunContext(tool_call_approved=True), "deploy", '{"env": "prod"}'
    )
    assert approved == ToolResult("deployed prod")
    registry.set_policy("deploy", ToolPolicy.ALWAYS_ALLOW)
    assert registry.policy("deploy") is ToolPolicy.ALWAYS_ALLOW
    assert (await registry.execute(RunContext(), "deploy", '{"env": "dev"}')).content == (
        "deployed dev"
    )
    registry.register(deploy, replace=True)  # re-registering drops the override
    assert registry.policy("deploy") is ToolPolicy.USER_CONFIRM
    with pytest.raises(KeyError):
        registry.set_policy("ghost", ToolPolicy.ALWAYS_ALLOW)


async def test_unexpected_exceptions_become_error_results(caplog: pytest.LogCaptureFixture) -> None:
    @tool
    def broken() -> str:
        """Broken."""
        raise ZeroDivisionError("division by zero")

    result = await Registry([broken]).execute(RunContext(), "broken", "{}")
    assert result == ToolResult("ZeroDivisionError: division by zero", is_error=True)
    assert "broken" in caplog.text


def test_mcp_tools_never_shadow_core_tools_but_core_replaces_mcp() -> None:
    registry = Registry([read_file])
    with pytest.raises(ValueError, match="shadow"):
        registry.register(Remote(), source="filesystem")
    assert registry.get_tool_source("read_file") == "core"
    other = Registry()
    other.register(Remote(), source="filesystem")
    assert other.get_tool_source("read_file") == "filesystem"
    assert other.is_tool_untrusted("read_file")  # MCP output is always untrusted
    assert other.list()[0].source_category == "mcp"
    other.register(read_file, replace=True)
    assert other.get_tool_source("read_file") == "core"
    assert not other.is_tool_untrusted("read_file")


def test_lookups_and_descriptors() -> None:
    registry = Registry([read_file, deploy])
    assert "read_file" in registry and len(registry) == 2
    assert registry.get("deploy") is deploy and registry.get("x") is None
    assert registry.get_tool_source("x") == "" and not registry.is_tool_untrusted("x")
    assert [d.name for d in registry.list()] == ["read_file", "deploy"]
    registry.unregister("deploy")
    assert registry.policy("deploy") is None


def test_cache_strategy_follows_content_backed_readers() -> None:
    registry = Registry()
    registry.register(Remote(), source="srv")
    assert registry.cache_strategy(RunContext(), "read_file", "{}") is CacheMode.CONTENT_BACKED
    assert Registry([read_file]).cache_strategy(RunContext(), "read_file", "{}") is (
        CacheMode.DEFAULT
    )


def test_non_tools_are_refused() -> None:
    with pytest.raises(TypeError, match="not a Tool"):
        Registry().register(object())  # type: ignore[arg-type]


class Judged:
    """An ALWAYS_ALLOW tool whose judge flags some calls."""

    name = "shell"
    description = "runs commands"
    input_schema = {"type": "object"}  # noqa: RUF012
    default_policy = ToolPolicy.ALWAYS_ALLOW
    is_untrusted = False

    async def execute(self, ctx: RunContext, input: str) -> ToolResult:
        return ToolResult("ran")

    def judge(self, ctx: RunContext, input: str) -> str:
        return "it reaches the network" if "curl" in input else ""


async def test_a_judge_escalates_single_calls_to_confirmation() -> None:
    registry = Registry([Judged()])  # type: ignore[list-item]
    ctx = RunContext()
    assert registry.review(ctx, "shell", '{"c": "ls"}').policy is ToolPolicy.ALWAYS_ALLOW  # type: ignore[union-attr]
    review = registry.review(ctx, "shell", '{"c": "curl x"}')
    assert review is not None and review.policy is ToolPolicy.USER_CONFIRM
    assert review.reason == "it reaches the network"
    assert registry.review(ctx, "nope", "{}") is None
    assert (await registry.execute(ctx, "shell", '{"c": "ls"}')).content == "ran"
    refused = await registry.execute(ctx, "shell", '{"c": "curl x"}')
    assert refused.is_error and "because it reaches the network" in refused.content
    approved = await registry.execute(
        RunContext(tool_call_approved=True), "shell", '{"c": "curl x"}'
    )
    assert approved.content == "ran"
