"""The meta tools the executor relies on: tool_result_read, update_checklist, facts."""

from __future__ import annotations

import pytest

from sp4rk.agent import ToolResultCache, ToolTruncationConfig
from sp4rk.tools import RunContext, ToolResult
from sp4rk.tools.builtins import (
    parse_checklist,
    search_facts,
    store_fact,
    tool_result_read,
    update_checklist,
)
from sp4rk.tools.stores import InMemoryFactStore


def cache_with(content: str, tool: str = "dump") -> tuple[RunContext, str]:
    cache = ToolResultCache()
    h = cache.store(tool, content)
    return RunContext(tool_result_cache=cache), h


def lines(n: int) -> str:
    return "\n".join(f"l{i}" for i in range(1, n + 1))


def framed(result: ToolResult) -> tuple[str, str, str]:
    """A page's header, the cached text inside its boundary, and the notes after it."""
    header, _, rest = result.content.partition("\n")
    opening, _, rest = rest.partition("\n")
    assert opening.startswith('<untrusted-content source="'), result.content
    body, _, notes = rest.partition("\n</untrusted-content>")
    assert result.self_wrapped
    return header, body, notes.strip()


async def test_pages_default_to_500_lines_with_a_continuation_hint() -> None:
    ctx, h = cache_with(lines(1200))
    result = await tool_result_read.execute(ctx, f'{{"hash": "{h[:8]}"}}')
    header, body, notes = framed(result)
    assert header == f"[Lines 1-500 of 1200 from cached dump result | hash: {h[:8]}]"
    assert body.split("\n")[499] == "l500"
    assert f'tool_result_read(hash="{h[:8]}", start_line=501, num_lines=500)' in notes


async def test_page_size_is_capped_by_the_tools_line_limit() -> None:
    ctx, h = cache_with(lines(9000), tool="ripgrep")
    ctx = ctx.replace(
        per_tool_truncation={
            "ripgrep": ToolTruncationConfig(max_lines=5000),
            "web": ToolTruncationConfig(max_bytes=10),
        }
    )
    result = await tool_result_read.execute(ctx, f'{{"hash": "{h}", "num_lines": 9000}}')
    assert result.content.startswith("[Lines 1-5000 of 9000")


async def test_single_lines_and_clamping() -> None:
    ctx, h = cache_with(lines(10))
    past = await tool_result_read.execute(ctx, f'{{"hash": "{h}", "start_line": 50}}')
    assert past.content.startswith("[Lines 10-10 of 10")
    one = await tool_result_read.execute(ctx, f'{{"hash": "{h}", "line": 3}}')
    header, body, notes = framed(one)
    assert header.startswith("[Line 3 of 10") and body == "l3" and notes == ""
    beyond = await tool_result_read.execute(ctx, f'{{"hash": "{h}", "line": 11}}')
    assert not beyond.is_error and "past end" in beyond.content and "(10 lines)" in beyond.content


async def test_pattern_search_lists_matching_lines() -> None:
    ctx, h = cache_with("alpha\nbeta\nalphabet\ngamma")
    found = await tool_result_read.execute(ctx, f'{{"hash": "{h}", "pattern": "^alpha"}}')
    assert framed(found)[1].split("\n") == ["1: alpha", "3: alphabet"]
    bad = await tool_result_read.execute(ctx, f'{{"hash": "{h}", "pattern": "("}}')
    assert bad.is_error and "invalid pattern" in bad.content


@pytest.mark.parametrize(
    ("ctx", "raw", "fragment"),
    [
        (RunContext(), '{"hash": "abcdefgh"}', "cache not available"),
        (RunContext(tool_result_cache=ToolResultCache()), '{"hash": " "}', "hash is required"),
        (
            RunContext(tool_result_cache=ToolResultCache()),
            '{"hash": "abcdefgh"}',
            "Re-run the original tool call",
        ),
    ],
)
async def test_errors_say_what_to_do(ctx: RunContext, raw: str, fragment: str) -> None:
    result = await tool_result_read.execute(ctx, raw)
    assert result.is_error and fragment in result.content


def test_checklist_parsing() -> None:
    items, errors = parse_checklist("- [x] a\n- [ ] b  \n\n")
    assert [(i.text, i.done) for i in items] == [("a", True), ("b", False)] and errors == []
    _, errors = parse_checklist("- [x] a\n- [X] b\n  - [ ] nested\nplain")
    assert errors == [
        "line 2: checkbox must be '[ ]' or '[x]': '- [X] b'",
        "line 3: nested lists are not allowed",
        "line 4: not a checklist item: 'plain'",
    ]
    assert parse_checklist("")[1] == ["checklist is empty"]


async def test_update_checklist_reports_progress() -> None:
    ok = await update_checklist.execute(RunContext(), '{"todo_list": "- [x] a\\n- [ ] b"}')
    assert ok.content.startswith("Checklist updated: 1/2 done.")
    done = await update_checklist.execute(RunContext(step_id="s"), '{"todo_list": "- [x] a"}')
    assert done.content == "Checklist updated for step s: 1/1 done."
    bad = await update_checklist.execute(RunContext(), '{"todo_list": "- [X] a"}')
    assert bad.is_error and "line 1" in bad.content and "lower-case x" in bad.content


async def test_facts_round_trip_and_secrets_are_refused() -> None:
    store = InMemoryFactStore()
    ctx = RunContext(fact_store=store, step_id="s1")
    ok = await store_fact.execute(
        ctx,
        '{"keywords": ["db", "port", "config"], "content": "the test database listens on 5433"}',
    )
    assert ok == ToolResult("Fact stored with keywords: db, port, config")
    found = await search_facts.execute(ctx, '{"keywords": ["port"]}')
    assert "5433" in found.content and "(by s1)" in found.content
    none = await search_facts.execute(ctx, '{"keywords": ["nothing"]}')
    assert not none.is_error and none.content.startswith("no facts found")
    few = await store_fact.execute(ctx, '{"keywords": ["a", "b"], "content": "x"}')
    assert few.is_error and "at least 3" in few.content
    secret = await store_fact.execute(
        ctx, '{"keywords": ["k", "e", "y"], "content": "OPENAI_API_KEY=sk-abcdefghijklmnopqrstuv"}'
    )
    assert secret.is_error and "secret" in secret.content
    assert len(store.all()) == 1
    missing = await store_fact.execute(
        RunContext(), '{"keywords": ["a", "b", "c"], "content": "x"}'
    )
    assert missing.is_error and "not available" in missing.content


async def test_a_single_huge_line_can_be_read_in_full_by_offset() -> None:
    content = "".join(f"{i:08d}" for i in range(150_000))  # 1.2 MB, one line
    ctx, h = cache_with(content)
    page = await tool_result_read.execute(ctx, f'{{"hash": "{h}"}}')
    assert "were cut at 2000 characters" in framed(page)[2] and len(page.content) < 3000
    seen = ""
    offset = 0
    while True:
        chunk = await tool_result_read.execute(
            ctx, f'{{"hash": "{h}", "line": 1, "char_offset": {offset}}}'
        )
        body = framed(chunk)[1]
        seen += body
        if "to continue this line" not in chunk.content:
            break
        offset += len(body)
    assert seen == content
