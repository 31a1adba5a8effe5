"""LocalProvider's worker thread, with a stand-in for ``llama_cpp.Llama``: one generation at a
time per model, whatever the callers cancel or close.

Needs llama-cpp-python (for the grammar classes), not the bundled model.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.local_extra import LOCAL_EXTRA_MISSING

pytest.importorskip("llama_cpp", reason=LOCAL_EXTRA_MISSING)

from sp4rk.llm import local
from sp4rk.llm.errors import LLMError
from sp4rk.llm.local import LocalProvider
from sp4rk.llm.types import ChatRequest, Message, ToolDefinition

REQUEST = ChatRequest(messages=[Message("user", "hi")])
#: How long a test waits for something that must *not* happen (a second generation starting
#: while the first runs). Only a regression makes it happen; the wait never fails a correct run.
NOT_HAPPENING = 0.5
#: The longest a fake generation blocks, so that a failing test cannot leave a thread stuck.
BLOCK_AT_MOST = 10.0


def _completion(content: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": content}
    return {
        "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"model": "fake", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


class FakeLlama:
    """Counts overlapping generations; each blocks until ``release`` is set.

    A streamed generation yields its first delta at once, then waits for ``release``.
    """

    n_tokens = 10

    def __init__(self) -> None:
        self.content = "hello"
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)
        self.closed = threading.Event()
        self.closed_while_generating = False
        self.stream_abandoned = False
        self._guard = threading.Lock()
        self.active = 0
        self.peak = 0

    def _enter(self) -> None:
        with self._guard:
            self.active += 1
            self.peak = max(self.peak, self.active)
        self.entered.release()

    def _leave(self) -> None:
        with self._guard:
            self.active -= 1

    def create_chat_completion(self, stream: bool = False, **_: Any) -> Any:
        if stream:
            return self._stream()
        self._enter()
        try:
            self.release.wait(BLOCK_AT_MOST)
            return _completion(self.content)
        finally:
            self._leave()

    def _stream(self) -> Iterator[dict[str, Any]]:
        self._enter()
        try:
            yield _chunk({"role": "assistant", "content": "a"})
            self.release.wait(BLOCK_AT_MOST)
            yield _chunk({"content": "b"})
            yield _chunk({"content": "c"}, "stop")
        except GeneratorExit:
            self.stream_abandoned = True
            raise
        finally:
            self._leave()

    def close(self) -> None:
        self.closed_while_generating = self.active > 0
        self.closed.set()


async def _wait(event: threading.Event | threading.Semaphore, timeout: float | None) -> bool:
    """Wait for a thread-side event (``timeout=None``: for as long as it takes) off the loop."""
    if isinstance(event, threading.Event):
        return await asyncio.to_thread(event.wait, timeout)
    return await asyncio.to_thread(event.acquire, True, timeout)


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    """A stand-in model; released at teardown, so a failing test leaves no thread blocked."""
    model = FakeLlama()
    yield model
    model.release.set()


async def _cancelled(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancelled_call_keeps_the_model_until_its_generation_ends(
    fake: FakeLlama,
) -> None:
    provider = LocalProvider("x.gguf", client=fake)  # type: ignore[arg-type]
    first = asyncio.create_task(provider.call(REQUEST))
    await _wait(fake.entered, None)
    await _cancelled(first)

    second = asyncio.create_task(provider.call(REQUEST))
    assert not await _wait(fake.entered, NOT_HAPPENING)  # it waits for the first generation
    fake.release.set()
    response = await second

    assert response.message.content == "hello"
    assert fake.peak == 1


async def test_providers_sharing_a_model_take_turns(fake: FakeLlama) -> None:
    one = LocalProvider("x.gguf", client=fake)  # type: ignore[arg-type]
    two = LocalProvider("x.gguf", client=fake)  # type: ignore[arg-type]
    first = asyncio.create_task(one.call(REQUEST))
    await _wait(fake.entered, None)
    second = asyncio.create_task(two.call(REQUEST))
    assert not await _wait(fake.entered, NOT_HAPPENING)
    fake.release.set()
    await asyncio.gather(first, second)
    assert fake.peak == 1


async def test_aclose_waits_for_the_running_generation(
    fake: FakeLlama, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local.llama_cpp, "Llama", lambda **options: fake)
    provider = LocalProvider("x.gguf")  # loads (the fake) on first use, and owns it
    call = asyncio.create_task(provider.call(REQUEST))
    await _wait(fake.entered, None)
    await _cancelled(call)

    closing = asyncio.create_task(provider.aclose())
    assert not await _wait(fake.closed, NOT_HAPPENING)
    fake.release.set()
    await closing
    assert fake.closed.is_set()
    assert fake.closed_while_generating is False


async def test_a_cancelled_stream_stops_generating_and_delivers_nothing_more(
    fake: FakeLlama,
) -> None:
    provider = LocalProvider("x.gguf", client=fake)  # type: ignore[arg-type]
    deltas: list[str] = []
    first_delta = asyncio.Event()

    def on_text(delta: str) -> None:
        deltas.append(delta)
        first_delta.set()

    stream = asyncio.create_task(provider.call_stream(REQUEST, on_text))
    await first_delta.wait()
    await _cancelled(stream)
    fake.release.set()
    await provider.call(REQUEST)  # runs once the abandoned stream let go of the model

    assert deltas == ["a"]
    assert fake.stream_abandoned


async def test_tool_call_ids_are_deterministic(fake: FakeLlama) -> None:
    fake.content = json.dumps({"name": "add", "arguments": {"a": 1}})
    fake.release.set()
    tool = ToolDefinition(
        "add", "Add.", {"type": "object", "properties": {"a": {"type": "integer"}}}
    )
    provider = LocalProvider("x.gguf", client=fake)  # type: ignore[arg-type]
    request = ChatRequest(messages=[Message("user", "add")], tools=[tool])
    first, second = await provider.call(request), await provider.call(request)
    assert [(c.id, c.name, c.input) for c in first.message.tool_calls] == [
        ("call_0", "add", '{"a": 1}')
    ]
    assert first.to_dict() == second.to_dict()


async def test_a_grammar_that_cannot_be_built_is_an_llm_error(
    fake: FakeLlama, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: Any, **__: Any) -> str:
        raise RuntimeError("unsupported schema")

    monkeypatch.setattr(local, "json_schema_to_gbnf", refuse)
    provider = LocalProvider("x.gguf", client=fake)  # type: ignore[arg-type]
    tool = ToolDefinition("add", "Add.", {"type": "object", "properties": {}})
    with pytest.raises(LLMError, match=r"grammar.*unsupported schema"):
        await provider.call(ChatRequest(messages=[Message("user", "x")], tools=[tool]))
    assert fake.peak == 0  # nothing was generated
