"""Tool output on its way into the context: Stage 1 limits, Stage 2 budget, the result cache."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sp4rk.agent import (
    Executor,
    RecordingEvents,
    ToolResultBudget,
    ToolResultCache,
    ToolTruncationConfig,
    compute_tool_result_hash,
)
from sp4rk.llm import ChatRequest, ChatResponse
from sp4rk.llm.testing import FunctionLLM, ScriptedLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow
from sp4rk.tools import Registry, RunContext, ToolPolicy, ToolResult, ToolTraits, tool

from .helpers import FakeContext, run


def big_tools(text: str) -> Registry:
    @tool
    def dump(q: str) -> str:
        """Return a big output."""
        return text

    @tool(traits=ToolTraits(cacheable=False))
    def store_fact(q: str) -> str:
        """A non-cacheable meta tool (by its traits)."""
        return text

    return Registry([dump, store_fact])


def numbered(n: int) -> str:
    return "\n".join(f"line {i}" for i in range(1, n + 1))


def test_stage1_cuts_lines_and_points_to_the_cached_full_result() -> None:
    full = numbered(100)
    llm_text = [tool_calls_response(("dump", {"q": "x"})), finish_response("d")]
    result, _, _ = run(
        llm_text,
        tools=big_tools(full),
        setup=lambda ex: ex.set_per_tool_truncation({"dump": ToolTruncationConfig(max_lines=10)}),
    )
    step = result.steps[0]
    assert step.observation.startswith(numbered(10) + "\n\n[This output was truncated to 10 lines")
    assert "line 11" not in step.observation.split("\n\n[")[0]
    assert step.cache_hash == compute_tool_result_hash("dump", full)
    short = re.search(r'hash="([0-9a-f]+)"', step.observation)
    assert short is not None and len(short.group(1)) >= 8
    assert step.cache_hash.startswith(short.group(1))


def test_stage1_byte_cut_never_splits_a_code_point() -> None:
    full = "ab€" * 1000
    result, _, _ = run(
        [tool_calls_response(("dump", {"q": "x"})), finish_response("d")],
        tools=big_tools(full),
        setup=lambda ex: ex.set_per_tool_truncation({"dump": ToolTruncationConfig(max_bytes=7)}),
    )
    body = result.steps[0].observation.split("\n\n[")[0]
    assert body == "ab€ab"
    assert "byte limit (7 bytes)" in result.steps[0].observation


def test_default_stage1_limits_apply_until_replaced() -> None:
    calls = [tool_calls_response(("dump", {"q": "x"})), finish_response("d")]
    registry = big_tools(numbered(20_000))

    @tool(name="bash_exec")
    def bash(command: str) -> str:
        """Stand-in with the default 10 000-line limit."""
        return numbered(20_000)

    registry.register(bash)
    result, _, _ = run(
        [tool_calls_response(("bash_exec", {"command": "x"})), finish_response("d")],
        tools=registry,
        tool_result_budget=ToolResultBudget(hard_cap_tokens=0),
    )
    assert "truncated to 10000 lines for 'bash_exec'" in result.steps[0].observation
    off, _, _ = run(
        calls,
        tools=registry,
        tool_result_budget=ToolResultBudget(hard_cap_tokens=0),
        setup=lambda ex: ex.set_per_tool_truncation(None),
    )
    assert "truncated" not in off.steps[0].observation


def test_set_per_tool_truncation_deep_copies() -> None:
    config = {"dump": ToolTruncationConfig(max_lines=5)}
    llm = ScriptedLLM([tool_calls_response(("dump", {"q": "x"})), finish_response("d")])
    tools = big_tools(numbered(50))
    executor = Executor(llm, tools, 5)
    executor.set_per_tool_truncation(config)
    config["dump"].max_lines = 40
    result = executor.run_sync(tools.list(), ContextWindow())
    assert "truncated to 5 lines" in result.steps[0].observation


def test_stage2_caps_a_result_to_its_share_of_the_window() -> None:
    full = "a" * 4000
    cw = FakeContext(available=1000)  # cap = 40 % of 1000 = 400 tokens = 1600 bytes
    result, _, _ = run(
        [tool_calls_response(("dump", {"q": "x"})), finish_response("d")],
        tools=big_tools(full),
        cw=cw,
    )
    obs = result.steps[0].observation
    assert obs.startswith("a" * 1600 + "\n\n[OUTPUT TRUNCATED: showing ~400 of ~1000 tokens (40%).")
    assert "a" * 1601 not in obs
    assert "tool_result_read(hash=" in obs


def test_stage2_floor_is_256_tokens() -> None:
    cw = FakeContext(available=100)
    ok, _, _ = run(
        [tool_calls_response(("dump", {"q": "x"})), finish_response("d")],
        tools=big_tools("b" * 1024),
        cw=cw,
    )
    assert ok.steps[0].observation == "b" * 1024
    cut, _, _ = run(
        [tool_calls_response(("dump", {"q": "x"})), finish_response("d")],
        tools=big_tools("b" * 1028),
        cw=FakeContext(available=100),
    )
    assert "OUTPUT TRUNCATED" in cut.steps[0].observation


def test_stage2_accounts_for_earlier_results_of_the_same_response() -> None:
    cw = FakeContext(available=10_000)
    two = tool_calls_response(("dump", {"q": "1"}), ("dump", {"q": "2"}))
    result, _, _ = run([two, finish_response("d")], tools=big_tools("c" * 16_000), cw=cw)
    first, second = result.steps[0].observation, result.steps[1].observation
    assert len(first.split("\n\n[")[0]) == 16_000  # 4000 tokens = the 40 % cap exactly
    assert len(second.split("\n\n[")[0]) < 16_000  # less room left for the second


def test_non_cacheable_tools_are_cached_only_when_cut() -> None:
    small, _, _ = run(
        [tool_calls_response(("store_fact", {"q": "x"})), finish_response("d")],
        tools=big_tools("short fact"),
    )
    assert small.steps[0].cache_hash == ""
    big, _, _ = run(
        [tool_calls_response(("store_fact", {"q": "x"})), finish_response("d")],
        tools=big_tools("f" * 4000),
        cw=FakeContext(available=1000),
    )
    assert big.steps[0].cache_hash == compute_tool_result_hash("store_fact", "f" * 4000)
    assert "Hash:" in big.steps[0].observation


def test_without_a_cache_nothing_is_hashed() -> None:
    result, llm, _ = run(
        [tool_calls_response(("dump", {"q": "x"})), finish_response("d")],
        tools=big_tools(numbered(30)),
        setup=lambda ex: (
            ex.set_tool_cache(None),
            ex.set_per_tool_truncation({"dump": ToolTruncationConfig(max_lines=3)}),
        ),
    )
    assert result.steps[0].cache_hash == ""
    assert "tool_result_read" not in result.steps[0].observation
    assert "tool_result_read" not in [d.name for d in llm.requests[0].tools]


def test_the_model_pages_the_rest_back_with_tool_result_read() -> None:
    full = numbered(100)

    def model(request: ChatRequest) -> ChatResponse:
        last = request.messages[-1].content
        if len(request.messages) == 1:
            return tool_calls_response(("dump", {"q": "x"}))
        if "truncated to 10 lines" in last:
            match = re.search(r'hash="([0-9a-f]+)"', last)
            assert match is not None
            return tool_calls_response(
                ("tool_result_read", {"hash": match.group(1), "start_line": 11, "num_lines": 5})
            )
        return finish_response(last)

    tools = big_tools(full)
    executor = Executor(FunctionLLM(model), tools, 20, events=(events := RecordingEvents()))
    executor.set_per_tool_truncation({"dump": ToolTruncationConfig(max_lines=10)})
    result = executor.run_sync(tools.list(), ContextWindow(task="page it"))
    obs = result.steps[1].observation
    assert re.match(
        r"\[Lines 11-15 of 100 from cached dump result \| hash: [0-9a-f]{8,}\]\n"
        r'<untrusted-content source="dump">\nline 11\n',
        obs,
    )
    assert "line 16" not in obs and "start_line=16" in obs
    # The page wrapped itself (header and hints outside): it is not wrapped again whole.
    assert not result.steps[1].is_untrusted
    assert events.of("tool_call")[1][2] == "dump (cached)"
    assert result.output.startswith("[Lines 11-15")  # what the model was shown
    assert "\nline 11\nline 12\nline 13\nline 14\nline 15\n" in result.output


def test_a_stale_file_backed_entry_tells_the_model_to_rerun(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text(numbered(30))

    @tool(traits=ToolTraits(file_argument="path"))
    def read_file(ctx: RunContext, path: str) -> str:
        """Read a file in the workspace."""
        assert ctx.workspace is not None
        return (ctx.workspace / path).read_text()

    tools = Registry([read_file])
    cache = ToolResultCache()
    ctx = RunContext(workspace=tmp_path)
    result, _, _ = run(
        [tool_calls_response(("read_file", {"path": "notes.txt"})), finish_response("d")],
        tools=tools,
        ctx=ctx,
        setup=lambda ex: ex.set_tool_cache(cache),
    )
    full_hash = result.steps[0].cache_hash
    assert cache.check_coherence(full_hash)
    target.write_text("changed, and longer than before\n" * 3)
    assert not cache.check_coherence(full_hash)
    read = tool_calls_response(("tool_result_read", {"hash": full_hash[:10]}))
    stale, _, _ = run(
        [read, finish_response("d")],
        tools=tools,
        ctx=ctx,
        setup=lambda ex: ex.set_tool_cache(cache),
    )
    assert stale.steps[0].is_error and "is stale" in stale.steps[0].observation
    assert "Re-run the original tool" in stale.steps[0].observation


def test_binary_and_invalid_text_outputs_do_not_break_the_run() -> None:
    weird = "\x00\x01\udcff" + "é" * 10 + "\ufffd"
    result, llm, _ = run(
        [tool_calls_response(("dump", {"q": "x"})), finish_response("d")], tools=big_tools(weird)
    )
    assert result.finished
    json.dumps([m.to_dict() for m in llm.requests[1].messages])  # still serialisable


def test_content_backed_readers_are_snapshots_without_staleness(tmp_path: Path) -> None:
    target = tmp_path / "doc.txt"
    target.write_text("version one")

    class SnapshotReader:
        name = "read_file"
        description = "reads a file as a snapshot"
        input_schema = {"type": "object"}  # noqa: RUF012
        default_policy = ToolPolicy.ALWAYS_ALLOW
        is_untrusted = False

        async def execute(self, ctx: RunContext, input: str) -> ToolResult:
            return ToolResult(target.read_text())

        def is_content_backed(self) -> bool:
            return True

    cache = ToolResultCache()
    result, _, _ = run(
        [tool_calls_response(("read_file", {"path": "doc.txt"})), finish_response("d")],
        tools=Registry([SnapshotReader()]),
        ctx=RunContext(workspace=tmp_path),
        setup=lambda ex: ex.set_tool_cache(cache),
    )
    target.write_text("version two, longer")
    assert cache.check_coherence(result.steps[0].cache_hash)  # a snapshot never goes stale
    assert cache.get(result.steps[0].cache_hash) == "version one"


def test_a_tools_own_notes_follow_its_untrusted_content_outside_the_wrapper() -> None:
    @tool(untrusted=True)
    def search(q: str) -> ToolResult:
        """An untrusted search that says why it stopped."""
        return ToolResult("match one\nmatch two", notes="[stopped early: narrow the pattern]")

    seen: list[str] = []

    def model(request: ChatRequest) -> ChatResponse:
        if len(request.messages) == 1:
            return tool_calls_response(("search", {"q": "x"}))
        seen.append(request.messages[-1].content)
        return finish_response("done")

    tools = Registry([search])
    result = Executor(FunctionLLM(model), tools, 5).run_sync(
        tools.list(), ContextWindow(task="search")
    )
    note = "[stopped early: narrow the pattern]"
    assert result.steps[0].observation == f"match one\nmatch two\n{note}"
    wrapped, _, after = seen[0].partition("</untrusted-content>")
    assert "match two" in wrapped and "stopped early" not in wrapped
    assert after == "\n[stopped early: narrow the pattern]"
