"""Fixtures for provider tests: a local HTTP server and providers pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from sp4rk.llm.base import Provider
from tests.llm.fakeserver import FakeServer

API_KEY = "sk-test-0123456789abcdef"

ProviderFactory = Callable[..., Provider]


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.close()


@pytest.fixture
async def make_provider(server: FakeServer) -> AsyncIterator[ProviderFactory]:
    """``make_provider(wire, **options)``: a provider of that wire format on the server.

    Retries are off unless the test asks for them; every provider is closed afterwards.
    """
    made: list[Provider] = []

    def factory(wire: str, **options: Any) -> Provider:
        from sp4rk.llm import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider

        options.setdefault("api_key", API_KEY)
        options.setdefault("max_retries", 0)
        options.setdefault("model", "test-model")
        provider: Provider
        if wire == "anthropic":
            provider = AnthropicProvider(base_url=server.url, **options)
        elif wire == "responses":
            provider = OpenAIResponsesProvider(base_url=server.url + "/v1", **options)
        else:
            provider = OpenAIChatProvider(base_url=server.url + "/v1", **options)
        made.append(provider)
        return provider

    yield factory
    for provider in made:
        await provider.aclose()
