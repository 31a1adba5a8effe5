"""AnthropicProvider through the official SDK against a local Messages API server."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import anthropic
import pytest

from sp4rk.llm import AnthropicProvider
from sp4rk.llm.anthropic import supports_effort
from sp4rk.llm.errors import LLMError, ProviderOverloadedError
from sp4rk.llm.types import ChatRequest, Message, ReasoningItem, ToolCall
from tests.llm.conftest import API_KEY, ProviderFactory
from tests.llm.conversation import full_request
from tests.llm.fakeserver import FakeServer, Reply
from tests.llm.wire import Turn, anthropic_json, anthropic_sse

PATH = "/v1/messages"
#: ``call:1`` in the characters the API allows, with a hash of the original id.
CALL_ID = "call_1_" + hashlib.sha256(b"call:1").hexdigest()[:8]


async def test_request_maps_every_field(server: FakeServer, make_provider: ProviderFactory) -> None:
    server.queue(PATH, anthropic_json(Turn(text="ok")))
    await make_provider("anthropic").call(full_request())
    received = server.received[0]
    body = received.body
    auth = received.headers.get("x-api-key") or received.headers.get("authorization", "")
    assert auth.removeprefix("Bearer ") == API_KEY
    assert body["model"] == "test-model"
    assert body["max_tokens"] == 4000
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Plan: step 1"},
    ]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look at this"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {
                    "type": "tool_use",
                    "id": CALL_ID,
                    "name": "read_file",
                    "input": {"path": "a.txt"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": CALL_ID,
                    "content": "(no output)",
                    "is_error": False,
                },
                {"type": "text", "text": "continue"},
            ],
        },
    ]
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.2, 0.9, 40)
    assert "presence_penalty" not in body
    assert "thinking" not in body
    assert "output_config" not in body  # "test-model" is not known to take an effort
    assert body["tools"] == [
        {
            "name": "read_file",
            "description": "Read a file.",
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "File path."}},
                "required": ["path"],
                "additionalProperties": False,
            },
        }
    ]


async def test_thinking_on_sends_budget_drops_sampling_and_returns_thinking_blocks(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(PATH, anthropic_json(Turn(text="ok")))
    await make_provider("anthropic").call(full_request(reasoning_effort="On"))
    body = server.bodies(PATH)[0]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2000}
    assert not {"temperature", "top_p", "top_k"} & set(body)
    assistant = body["messages"][1]["content"]
    # the thinking block goes back first, with its signature; the OpenAI item does not
    assert assistant[0] == {"type": "thinking", "thinking": "thought one", "signature": "sig-1"}
    assert [b["type"] for b in assistant] == ["thinking", "text", "tool_use"]


async def test_single_system_part_is_a_string_and_default_max_tokens(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(PATH, anthropic_json(Turn(text="ok")))
    request = ChatRequest(messages=[Message("system", "Be brief."), Message("user", "hi")])
    await make_provider("anthropic").call(request)
    body = server.bodies(PATH)[0]
    assert body["system"] == "Be brief."
    assert body["max_tokens"] == 8192
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


TURN = Turn(
    text="Reading now.",
    calls=[("toolu_1", "read_file", '{"path": "a b.txt"}')],
    reasoning=[("", "Let me think.", "sig-xyz")],
    usage=(1200, 34),
)


async def test_response_keeps_thinking_as_reasoning_and_round_trips_it(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    body = anthropic_json(TURN).body
    body["content"].insert(1, {"type": "redacted_thinking", "data": "opaque"})
    body["usage"].update(cache_creation_input_tokens=100, cache_read_input_tokens=50)
    server.queue(PATH, Reply(body=body), anthropic_json(Turn(text="done")))
    provider = make_provider("anthropic")
    response = await provider.call(ChatRequest(messages=[Message("user", "go")]))
    assert response.reasoning == "Let me think."
    assert response.message.reasoning_content == ""
    assert response.message.reasoning_items == [
        ReasoningItem("thinking:sig-xyz", "Let me think."),
        ReasoningItem("redacted_thinking:opaque", ""),
    ]
    assert response.message.tool_calls[0].input == '{"path": "a b.txt"}'
    assert (response.usage.input_tokens, response.usage.output_tokens) == (1350, 34)
    assert response.stop_reason == "tool_use"

    history = [
        Message("user", "go"),
        response.message,
        Message("tool", "text", tool_call_id="toolu_1"),
    ]
    await provider.call(ChatRequest(messages=history, reasoning_effort="On", max_tokens=4096))
    sent = server.bodies(PATH)[1]["messages"][1]["content"]
    assert sent[:2] == [
        {"type": "thinking", "thinking": "Let me think.", "signature": "sig-xyz"},
        {"type": "redacted_thinking", "data": "opaque"},
    ]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("stop_sequence", "end_turn"), ("max_tokens", "max_tokens"), ("refusal", "refusal")],
)
async def test_stop_reasons(
    raw: str, expected: str, server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(PATH, anthropic_json(Turn(text="x", stop=raw)))
    response = await make_provider("anthropic").call(ChatRequest(messages=[Message("user", "x")]))
    assert response.stop_reason == expected


async def test_stream_keeps_raw_tool_input_and_matches_the_plain_call(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(PATH, anthropic_json(TURN), anthropic_sse(TURN))
    provider = make_provider("anthropic")
    whole = await provider.call(ChatRequest(messages=[Message("user", "go")]))
    deltas: list[str] = []
    streamed = await provider.call_stream(
        ChatRequest(messages=[Message("user", "go")]), deltas.append
    )
    assert deltas == ["Read", "ing ", "now."]
    assert streamed.to_dict() == whole.to_dict()
    assert server.bodies(PATH)[1]["stream"] is True


async def test_stream_truncated_tool_input_stays_raw(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    turn = Turn(calls=[("toolu_1", "read_file", '{"path": "a')], stop="max_tokens")
    server.queue(PATH, anthropic_sse(turn))
    response = await make_provider("anthropic").call_stream(
        ChatRequest(messages=[Message("user", "go")]), lambda _: None
    )
    assert response.stop_reason == "max_tokens"
    assert response.message.tool_calls[0].input == '{"path": "a'


async def test_error_body_with_status_200_is_an_error(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.queue(PATH, Reply(200, body))
    with pytest.raises(ProviderOverloadedError):
        await make_provider("anthropic").call(ChatRequest(messages=[Message("user", "x")]))


async def test_base_url_with_v1_suffix_is_accepted(server: FakeServer) -> None:
    server.queue(PATH, anthropic_json(Turn(text="ok")))
    async with AnthropicProvider(
        "m", api_key=API_KEY, base_url=server.url + "/v1/", max_retries=0
    ) as provider:
        response = await provider.call(ChatRequest(messages=[Message("user", "x")]))
    assert response.message.content == "ok"
    assert server.received[0].path == PATH


def test_unknown_role_is_refused() -> None:
    provider = AnthropicProvider("m", client=anthropic.AsyncAnthropic(api_key="k"))
    bad = Message("user", "x")
    bad.role = "robot"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="robot"):
        provider.request_params(ChatRequest(messages=[bad]))


@pytest.mark.parametrize(
    ("model", "effort", "sent"),
    [
        ("claude-opus-4-7", "xhigh", {"effort": "xhigh"}),
        ("claude-sonnet-4-6", "max", {"effort": "max"}),
        ("us.anthropic.claude-opus-4-6-v1:0", "medium", {"effort": "medium"}),
        ("claude-haiku-4-5", "low", None),
        ("my-compatible-model", "high", None),
        ("claude-opus-4-6", "Off", None),  # not an effort at all
    ],
)
async def test_effort_goes_only_to_models_known_to_take_it(
    model: str,
    effort: str,
    sent: dict[str, str] | None,
    server: FakeServer,
    make_provider: ProviderFactory,
) -> None:
    server.queue(PATH, anthropic_json(Turn(text="ok")))
    request = ChatRequest(model=model, messages=[Message("user", "x")], reasoning_effort=effort)
    await make_provider("anthropic").call(request)
    assert server.bodies(PATH)[0].get("output_config") == sent


@pytest.mark.parametrize(
    ("model", "supported"),
    [
        ("claude-opus-4-5-20251101", True),
        ("claude-opus-4-5@20251101", True),  # Vertex
        ("claude-opus-5", True),
        ("claude-sonnet-5", True),
        ("claude-haiku-5-5", True),
        ("claude-mythos-preview", True),
        ("claude-opus", False),  # no version: not known
        ("claude-fable-5", True),
        ("claude-sonnet-4-5-20250929", False),
        ("claude-opus-4-1-20250805", False),
        ("claude-opus-4-20250514", False),  # Opus 4.0, the date is not a minor version
        ("claude-haiku-4-5-20251001", False),
        ("gpt-5", False),
    ],
)
def test_models_known_to_take_an_effort(model: str, supported: bool) -> None:
    assert supports_effort(model) is supported


def test_rewritten_tool_ids_stay_distinct() -> None:
    provider = AnthropicProvider("m", client=anthropic.AsyncAnthropic(api_key="k"))
    calls = [ToolCall("a:b", "f", "{}"), ToolCall("a.b", "f", "{}"), ToolCall("a_b", "f", "{}")]
    history = [
        Message("user", "go"),
        Message("assistant", tool_calls=calls),
        *(Message("tool", "ok", tool_call_id=c.id) for c in calls),
    ]
    messages = provider.request_params(ChatRequest(messages=history))["messages"]
    uses = [b["id"] for b in messages[1]["content"]]
    results = [b["tool_use_id"] for b in messages[2]["content"]]
    assert uses == results
    assert len(set(uses)) == 3
    assert uses[2] == "a_b"  # an id the API accepts is kept as it is
    assert all(u.replace("_", "").replace("-", "").isalnum() for u in uses)


@pytest.fixture
def no_anthropic_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No Anthropic credentials or URL in the environment, and no credentials profile."""
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_CONFIG_DIR",
        "ANTHROPIC_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.config/anthropic profile either
    return monkeypatch


@pytest.mark.usefixtures("no_anthropic_env")
def test_no_credentials_is_a_clear_error_at_construction(server: FakeServer) -> None:
    with pytest.raises(LLMError, match="ANTHROPIC_API_KEY"):
        AnthropicProvider("m", base_url=server.url)


async def test_environment_base_url_with_v1_suffix_is_accepted(
    server: FakeServer, no_anthropic_env: pytest.MonkeyPatch
) -> None:
    no_anthropic_env.setenv("ANTHROPIC_BASE_URL", server.url + "/v1")
    no_anthropic_env.setenv("ANTHROPIC_API_KEY", API_KEY)
    server.queue(PATH, anthropic_json(Turn(text="ok")))
    async with AnthropicProvider("m", max_retries=0) as provider:
        response = await provider.call(ChatRequest(messages=[Message("user", "x")]))
    assert response.message.content == "ok"
    assert server.received[0].path == PATH


async def test_stream_events_without_index_refer_to_the_block_opened_last(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    turn = Turn(text="Reading.", calls=[("toolu_1", "read_file", '{"path": "a"}')])
    events = anthropic_sse(turn).events or []
    for _, data in events:
        if isinstance(data, dict):
            data.pop("index", None)
    server.queue(PATH, Reply(events=events), anthropic_json(turn))
    provider = make_provider("anthropic")
    streamed = await provider.call_stream(ChatRequest(messages=[Message("user", "x")]), _ignore)
    whole = await provider.call(ChatRequest(messages=[Message("user", "x")]))
    assert streamed.to_dict() == whole.to_dict()


def _ignore(_: Any) -> None:
    return None
