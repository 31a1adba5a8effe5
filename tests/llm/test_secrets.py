"""API keys never appear in exception text, tracebacks, log records or dumps."""

from __future__ import annotations

import io
import logging
import traceback

import pytest

from sp4rk.agent import DumpCaller
from sp4rk.llm._errors_map import redact
from sp4rk.llm.errors import LLMError
from sp4rk.llm.types import ChatRequest, Message
from tests.llm.conftest import ProviderFactory
from tests.llm.fakeserver import FakeServer, Reply
from tests.llm.wire import WIRES

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
