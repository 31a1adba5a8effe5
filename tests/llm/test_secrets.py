"""API keys never appear in exception text, tracebacks, log records or dumps."""

from __future__ import annotations

import io
import logging
import traceback

import pytest

from sp4rk.agent import DumpCaller
from sp4rk.llm.errors import LLMError
from sp4rk.llm.types import ChatRequest, Message
from tests.llm.conftest import ProviderFactory
from tests.llm.fakeserver import FakeServer, Reply
from tests.llm.wire import WIRES

CANARY = "sk-canary-5f1e0c9a7b3d4e2f8a6b"


def _echo_key_error(status: int) -> Reply:
    """A server that, carelessly, echoes the key it got in its error body."""
    message = f"Incorrect API key provided: {CANARY}. Check your key."
    body = {"error": {"message": message, "type": "invalid_request_error"}}
    return Reply(status, body, headers={"retry-after-ms": "1"})


@pytest.mark.parametrize("from_env", [False, True], ids=["argument", "environment"])
@pytest.mark.parametrize("wire", list(WIRES))
async def test_key_never_leaks(
    wire: str,
    from_env: bool,
    server: FakeServer,
    make_provider: ProviderFactory,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    path = WIRES[wire][0]
    server.queue(path, _echo_key_error(500), _echo_key_error(401))
    if from_env:
        monkeypatch.setenv("ANTHROPIC_API_KEY" if wire == "anthropic" else "OPENAI_API_KEY", CANARY)
        provider = make_provider(wire, api_key=None, max_retries=1)
    else:
        provider = make_provider(wire, api_key=CANARY, max_retries=1)
    dump = io.StringIO()

    with pytest.raises(LLMError) as caught:
        await DumpCaller(provider, dump).call(ChatRequest(messages=[Message("user", "hi")]))

    headers = server.received[0].headers
    assert CANARY in (headers.get("authorization", "") + headers.get("x-api-key", ""))
    assert len(server.received) == 2  # the 500 was retried, so the SDK logged a retry
    assert "[REDACTED]" in str(caught.value)
    shown = "".join(traceback.format_exception(caught.value))
    for text in (str(caught.value), repr(caught.value), shown, caplog.text, dump.getvalue()):
        assert CANARY not in text
    assert all(CANARY not in record.getMessage() for record in caplog.records)
