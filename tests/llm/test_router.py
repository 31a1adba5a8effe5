"""Router: "provider:model" strings to providers, keys and URLs from the environment."""

from __future__ import annotations

import pytest

from sp4rk.llm import Router
from sp4rk.llm.errors import LLMError
from sp4rk.llm.router import split_model
from sp4rk.llm.types import ChatRequest, Message
from tests.llm.conftest import API_KEY
from tests.llm.fakeserver import FakeServer
from tests.llm.wire import Turn, anthropic_json, chat_json, chat_sse, responses_json

HELLO = [Message("user", "hi")]


def _key(server: FakeServer, index: int) -> str:
    headers = server.received[index].headers
    return (headers.get("x-api-key") or headers.get("authorization", "")).removeprefix("Bearer ")


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("openai:gpt-4o", ("openai", "gpt-4o")),
        ("openai-compatible:llama3:8b", ("openai-compatible", "llama3:8b")),
        ("local:", ("local", "")),
        ("llama3:8b", ("", "llama3:8b")),
        ("gpt-4o", ("", "gpt-4o")),
    ],
)
def test_split_model(model: str, expected: tuple[str, str]) -> None:
    assert split_model(model) == expected


@pytest.fixture
def env(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    """Point every provider's usual environment variables at the fake server."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-env-key-000000")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env-key-0000000000")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.delenv("OPENAI_COMPATIBLE_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)
    return server


async def test_routes_each_prefix_and_strips_it(env: FakeServer) -> None:
    env.queue("/v1/chat/completions", chat_json(Turn(text="chat")))
    env.queue("/v1/responses", responses_json(Turn(text="responses")))
    env.queue("/v1/messages", anthropic_json(Turn(text="anthropic")))
    async with Router("openai:gpt-4o", max_retries=0) as router:
        chat = await router.call(ChatRequest(messages=HELLO))
        responses = await router.call(ChatRequest(model="openai:gpt-5-mini", messages=HELLO))
        claude = await router.call(ChatRequest(model="anthropic:claude-x", messages=HELLO))
    assert [chat.message.content, responses.message.content, claude.message.content] == [
        "chat",
        "responses",
        "anthropic",
    ]
    assert [r.body["model"] for r in env.received] == ["gpt-4o", "gpt-5-mini", "claude-x"]
    assert [_key(env, i) for i in range(3)] == [
        "sk-openai-env-key-000000",
        "sk-openai-env-key-000000",
        "sk-ant-env-key-0000000000",
    ]


async def test_options_configure_only_the_routers_own_provider(env: FakeServer) -> None:
    env.queue("/v1/chat/completions", chat_json(Turn(text="a")), chat_json(Turn(text="b")))
    env.queue("/v1/messages", anthropic_json(Turn(text="c")))
    async with Router("openai-chat:m1", api_key=API_KEY, max_retries=0) as router:
        await router.call(ChatRequest(messages=HELLO))
        await router.call(ChatRequest(model="m2", messages=HELLO))  # bare: same provider
        await router.call(ChatRequest(model="anthropic:c", messages=HELLO))
    assert [r.body["model"] for r in env.received] == ["m1", "m2", "c"]
    assert [_key(env, i) for i in range(3)] == [API_KEY, API_KEY, "sk-ant-env-key-0000000000"]


async def test_openai_compatible_never_sends_the_openai_key(
    env: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(LLMError, match="OPENAI_COMPATIBLE_BASE_URL"):
        await Router("openai-compatible:llama3:8b").call(ChatRequest(messages=HELLO))

    monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", env.url + "/v1")
    env.queue("/v1/chat/completions", chat_sse(Turn(text="streamed")))
    deltas: list[str] = []
    async with Router("openai-compatible:llama3:8b", max_retries=0) as router:
        response = await router.call_stream(ChatRequest(messages=HELLO), deltas.append)
    assert "".join(deltas) == "streamed"
    assert response.model == "test-model"
    assert env.received[0].body["model"] == "llama3:8b"
    assert "sk-openai-env-key" not in env.received[0].headers.get("authorization", "")


def test_a_model_must_name_its_provider() -> None:
    with pytest.raises(ValueError, match="prefix"):
        Router("gpt-4o")
    with pytest.raises(ValueError, match="which provider"):
        Router(api_key="k")
    with pytest.raises(ValueError, match="does not say"):
        Router().route("gpt-4o")


def test_unknown_provider_option_is_a_type_error(env: FakeServer) -> None:
    with pytest.raises(TypeError):
        Router("openai-chat:m", api_kye="typo").route("")


async def test_openrouter_takes_its_own_key(
    env: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    with pytest.raises(LLMError, match="OPENROUTER_API_KEY"):
        Router("openrouter:meta-llama/llama-3-8b").route("")
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-env-key-0000000000")
    env.queue("/v1/chat/completions", chat_json(Turn(text="ok")))
    async with Router(
        "openrouter:meta-llama/llama-3-8b", base_url=env.url + "/v1", max_retries=0
    ) as router:
        await router.call(ChatRequest(messages=HELLO))
    assert env.received[0].body["model"] == "meta-llama/llama-3-8b"
    assert _key(env, 0) == "sk-or-env-key-0000000000"


@pytest.mark.parametrize("own_first", [True, False], ids=["own-prefix-first", "other-first"])
async def test_routers_own_options_do_not_depend_on_call_order(
    env: FakeServer, own_first: bool
) -> None:
    env.queue("/v1/chat/completions", chat_json(Turn(text="a")), chat_json(Turn(text="b")))
    own = ChatRequest(messages=HELLO)  # "openai:gpt-4o": Chat Completions, the router's key
    other = ChatRequest(model="openai-chat:gpt-4o-mini", messages=HELLO)  # the environment's
    async with Router("openai:gpt-4o", api_key=API_KEY, max_retries=0) as router:
        for request in (own, other) if own_first else (other, own):
            await router.call(request)
        assert router.route("")[0] is not router.route("openai-chat:x")[0]
    keys = {r.body["model"]: _key(env, i) for i, r in enumerate(env.received)}
    assert keys == {"gpt-4o": API_KEY, "gpt-4o-mini": "sk-openai-env-key-000000"}


async def test_each_openai_provider_gets_only_the_options_it_takes(env: FakeServer) -> None:
    env.queue("/v1/chat/completions", chat_json(Turn(text="chat")))
    env.queue("/v1/responses", responses_json(Turn(text="responses")))
    async with Router("openai:gpt-5", store=True, api_key=API_KEY, max_retries=0) as router:
        chat = await router.call(ChatRequest(model="openai:gpt-4o", messages=HELLO))
        responses = await router.call(ChatRequest(messages=HELLO))
    assert (chat.message.content, responses.message.content) == ("chat", "responses")
    chat_body, responses_body = (
        env.bodies("/v1/chat/completions")[0],
        env.bodies("/v1/responses")[0],
    )
    assert "store" not in chat_body
    assert responses_body["store"] is True
    assert [_key(env, i) for i in range(2)] == [API_KEY, API_KEY]


def test_an_option_no_provider_of_the_prefix_takes_is_refused_at_once() -> None:
    with pytest.raises(TypeError, match="extra_body"):
        Router("anthropic:claude-x", extra_body={"a": 1})
    with pytest.raises(TypeError, match="api_kye"):
        Router("openai:gpt-4o", api_kye="typo")
