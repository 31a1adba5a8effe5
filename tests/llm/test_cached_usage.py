"""Cached prompt tokens, as each provider reports them, reach ``TokenUsage`` (for pricing)."""

from __future__ import annotations

from typing import Any

from sp4rk.llm.types import ChatRequest, Message
from tests.llm.conftest import ProviderFactory
from tests.llm.fakeserver import FakeServer, Reply
from tests.llm.wire import Turn, anthropic_json, chat_json, chat_sse, responses_json

REQUEST = ChatRequest(messages=[Message("user", "go")])


def _with_usage(reply: Reply, **extra: Any) -> Reply:
    reply.body["usage"].update(extra)
    return reply


async def test_chat_completions_report_cached_prompt_tokens(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    reply = chat_json(Turn(text="ok", usage=(1000, 20)))
    reply.body["usage"]["prompt_tokens_details"] = {"cached_tokens": 640}
    server.queue("/v1/chat/completions", reply)
    usage = (await make_provider("chat").call(REQUEST)).usage
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_write_tokens) == (
        1000,
        640,
        0,
    )


async def test_streamed_chat_completions_report_cached_prompt_tokens(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    reply = chat_sse(Turn(text="ok", usage=(1000, 20)))
    assert reply.events is not None
    _, last = reply.events[-2]  # the usage chunk, before [DONE]
    last["usage"]["prompt_tokens_details"] = {"cached_tokens": 512}
    server.queue("/v1/chat/completions", reply)
    usage = (await make_provider("chat").call_stream(REQUEST, lambda _: None)).usage
    assert (usage.input_tokens, usage.cached_input_tokens) == (1000, 512)


async def test_responses_report_cached_input_tokens(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    reply = responses_json(Turn(text="ok", usage=(900, 9)))
    reply.body["usage"]["input_tokens_details"] = {"cached_tokens": 300}
    server.queue("/v1/responses", reply)
    usage = (await make_provider("responses").call(REQUEST)).usage
    assert (usage.input_tokens, usage.cached_input_tokens) == (900, 300)


async def test_anthropic_reports_cache_reads_and_writes_within_the_input(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    reply = _with_usage(
        anthropic_json(Turn(text="ok", usage=(1200, 34))),
        cache_creation_input_tokens=100,
        cache_read_input_tokens=50,
    )
    server.queue("/v1/messages", reply)
    usage = (await make_provider("anthropic").call(REQUEST)).usage
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_write_tokens) == (
        1350,
        50,
        100,
    )


async def test_hostile_cache_counts_count_zero(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    reply = chat_json(Turn(text="ok", usage=(10, 2)))
    reply.body["usage"]["prompt_tokens_details"] = {"cached_tokens": "many"}
    server.queue("/v1/chat/completions", reply)
    usage = (await make_provider("chat").call(REQUEST)).usage
    assert (usage.input_tokens, usage.cached_input_tokens) == (10, 0)
