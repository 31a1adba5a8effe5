"""Credentials never appear in exception text, chained exceptions, logs, dumps or cassettes."""

from __future__ import annotations

import io
import logging
import traceback
from pathlib import Path
from typing import Any

import pytest

from sp4rk.agent import DumpCaller, LoggingLLMCaller
from sp4rk.llm._errors_map import redact
from sp4rk.llm._secrets import credentials
from sp4rk.llm.base import Provider
from sp4rk.llm.cassette import RecordingLLM
from sp4rk.llm.errors import LLMError
from sp4rk.llm.types import ChatRequest, Message
from tests.llm.conftest import ProviderFactory
from tests.llm.fakeserver import FakeServer, Reply
from tests.llm.wire import WIRES, Turn

KEY_SHAPED = "sk-canary-5f1e0c9a7b3d4e2f8a6b"
#: A gateway token that looks like no known key format: only knowing it masks it.
PLAIN = "gateway-token-4821"


def _echo_key_error(status: int, canary: str) -> Reply:
    """A server that, carelessly, echoes the key it got in its error body."""
    message = f"Incorrect API key provided: {canary}. Check your key."
    body = {"error": {"message": message, "type": "invalid_request_error", "key": canary}}
    return Reply(status, body, headers={"retry-after-ms": "1"})


def _chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


@pytest.mark.parametrize("canary", [KEY_SHAPED, PLAIN], ids=["key-shaped", "plain"])
@pytest.mark.parametrize("from_env", [False, True], ids=["argument", "environment"])
@pytest.mark.parametrize("wire", list(WIRES))
async def test_key_never_leaks(
    wire: str,
    from_env: bool,
    canary: str,
    server: FakeServer,
    make_provider: ProviderFactory,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    path = WIRES[wire][0]
    server.queue(path, _echo_key_error(500, canary), _echo_key_error(401, canary))
    if from_env:
        monkeypatch.setenv("ANTHROPIC_API_KEY" if wire == "anthropic" else "OPENAI_API_KEY", canary)
        provider = make_provider(wire, api_key=None, max_retries=1)
    else:
        provider = make_provider(wire, api_key=canary, max_retries=1)
    dump = io.StringIO()

    with pytest.raises(LLMError) as caught:
        await DumpCaller(provider, dump).call(ChatRequest(messages=[Message("user", "hi")]))

    headers = server.received[0].headers
    assert canary in (headers.get("authorization", "") + headers.get("x-api-key", ""))
    assert len(server.received) == 2  # the 500 was retried, so the SDK logged a retry
    assert "[REDACTED]" in str(caught.value)
    shown = "".join(traceback.format_exception(caught.value))
    for text in (str(caught.value), repr(caught.value), shown, caplog.text, dump.getvalue()):
        assert canary not in text
    assert all(canary not in record.getMessage() for record in caplog.records)
    chained = _chain(caught.value)
    assert len(chained) > 1  # the SDK's exception is chained ...
    for exc in chained:  # ... and holds no key in its text or in the body it keeps
        kept = (exc.args, getattr(exc, "message", None), getattr(exc, "body", None))
        assert canary not in repr(kept)


def test_known_secrets_of_four_characters_or_more_are_masked() -> None:
    assert redact("token=abcd5; user=abc", ("abcd5", "abc")) == "token=[REDACTED]; user=abc"
    assert redact("a gateway-token-4821 b", ("gateway-token-4821",)) == "a [REDACTED] b"


def _texts_of(exc: BaseException) -> list[str]:
    """Everything an exception chain shows: text, bodies, and the HTTP request/response kept."""
    texts = ["".join(traceback.format_exception(exc))]
    for link in _chain(exc):
        texts += [str(link), repr(link), repr(link.args)]
        texts += [repr(getattr(link, name, None)) for name in ("message", "body")]
        for name in ("request", "response"):
            try:
                http = getattr(link, name, None)
            except RuntimeError:  # httpx: no request set
                continue
            if http is None:
                continue
            texts.append(repr(list(http.headers.multi_items())))
            texts.append(http.content.decode("utf-8", "replace"))
            if hasattr(http, "url"):
                texts.append(str(http.url))
            inner = getattr(http, "request", None)
            if inner is not None:
                texts += [str(inner.url), repr(list(inner.headers.multi_items()))]
    return texts


def _echo(status: int) -> Reply:
    body = {"error": {"message": "you sent <<REQUEST>>", "type": "invalid_request_error"}}
    return Reply(status, body, echo=True, headers={"retry-after-ms": "1"})


def _echo_answer(wire: str) -> Reply:
    reply = WIRES[wire][1](Turn(text="I saw <<REQUEST>>"))
    reply.echo = True
    return reply


def _client_with_query(wire: str, server: FakeServer, canary: str) -> Any:
    if wire == "anthropic":
        import anthropic

        return anthropic.AsyncAnthropic(
            api_key="k" * 8, base_url=server.url, default_query={"key": canary}, max_retries=1
        )
    import openai

    return openai.AsyncOpenAI(
        api_key="k" * 8, base_url=server.url + "/v1", default_query={"key": canary}, max_retries=1
    )


PLACES = ["api_key", "authorization", "x-api-key", "custom-header", "query"]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("wire", list(WIRES))
async def test_no_artifact_holds_a_credential_from_any_place(
    wire: str,
    place: str,
    server: FakeServer,
    make_provider: ProviderFactory,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    caplog.set_level(logging.DEBUG)
    canary = f"canary-{place}-7f3a9c1e"  # shaped like no known key: only the set masks it
    provider: Provider
    if place == "query":
        provider = _provider_class(wire)(
            "test-model", client=_client_with_query(wire, server, canary)
        )
    else:
        headers = {
            "authorization": {"Authorization": f"Bearer {canary}"},
            "x-api-key": {"x-api-key": canary},
            "custom-header": {"X-Gateway-Token": canary},
        }.get(place)
        options: dict[str, Any] = {"max_retries": 1, "default_headers": headers}
        if place == "api_key":
            options["api_key"] = canary
        provider = make_provider(wire, **options)
    path = WIRES[wire][0]
    server.queue(path, _echo_answer(wire), _echo(500), _echo(401))
    dump = io.StringIO()
    cassette = tmp_path / "run.jsonl"
    logger = logging.getLogger("test.secrets")
    async with RecordingLLM(provider, cassette) as recorder:
        caller = LoggingLLMCaller(DumpCaller(recorder, dump), wire, logger)
        answer = await caller.call(ChatRequest(messages=[Message("user", "hi")]))
        with pytest.raises(LLMError) as caught:
            await caller.call(ChatRequest(messages=[Message("user", "again")]))

    sent = server.received[0]
    assert canary in f"{sent.query} {sent.headers}"  # the credential really was sent
    assert canary in answer.message.content  # and the model echoed it: the caller sees it
    artifacts = [
        *_texts_of(caught.value),
        dump.getvalue(),
        cassette.read_text(),
        caplog.text,
        *(record.getMessage() for record in caplog.records),
    ]
    leaks = [text[:200] for text in artifacts if canary in text]
    assert not leaks
    assert "[REDACTED]" in dump.getvalue()
    if place == "query":
        await provider.client.close()


def _provider_class(wire: str) -> type[Provider]:
    from sp4rk.llm import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider

    classes: dict[str, type[Provider]] = {
        "chat": OpenAIChatProvider,
        "responses": OpenAIResponsesProvider,
        "anthropic": AnthropicProvider,
    }
    return classes[wire]


async def test_a_router_masks_the_credentials_of_the_providers_it_built(
    server: FakeServer, tmp_path: Path
) -> None:
    from sp4rk.llm import Router

    canary = "gateway-canary-0e1d2c3b"
    server.queue("/v1/chat/completions", _echo_answer("chat"))
    router = Router(
        "openai-chat:test-model",
        api_key="k" * 8,
        base_url=server.url + "/v1",
        default_headers={"X-Gateway-Token": canary},
    )
    dump = io.StringIO()
    async with router:
        await DumpCaller(router, dump).call(ChatRequest(messages=[Message("user", "hi")]))
    assert canary in str(server.received[0].headers)
    assert canary not in dump.getvalue()
    assert "[REDACTED]" in dump.getvalue()


def test_the_redaction_set_takes_every_credential_and_skips_harmless_headers() -> None:
    found = credentials(
        keys=("sk-key-1234", None, 5),
        headers={
            "Authorization": "Bearer tok-abcdef",
            "X-Custom": "custom-secret",
            "User-Agent": "AsyncOpenAI/Python 3.0",
            "X-Stainless-OS": "Linux",
            "Content-Type": "application/json",
        },
        query={"key": "query-secret"},
        urls=("https://user:url-password@host/v1?token=url-token",),
    )
    assert found == {
        "sk-key-1234",
        "Bearer tok-abcdef",
        "tok-abcdef",
        "custom-secret",
        "query-secret",
        "url-password",
        "url-token",
    }
