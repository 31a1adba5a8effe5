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
from sp4rk.llm.types import ChatRequest, Message, ToolCall, ToolDefinition

REQUEST = ChatRequest(messages=[Message("user", "hi")])
#: How long a test waits for something that must *not* happen (a second generation starting
#: while the first runs). Only a regression makes it happen; the wait never fails a correct run.
NOT_HAPPENING = 0.5
#: The longest a fake generation blocks, so that a failing test cannot leave a thread stuck.
BLOCK_AT_MOST = 10.0


def _words(text: str) -> int:
    """The fake model's tokens: one per word."""
    return len(text.split())


def _completion(content: str, prompt_tokens: int = 3) -> dict[str, Any]:
    message = {"role": "assistant", "content": content}
    return {
        "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1},
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
        self.replies: list[str] = []
        """Contents for the next generations, in order (then ``content``)."""
        self.requests: list[dict[str, Any]] = []
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

    def create_chat_completion(self, stream: bool = False, **kwargs: Any) -> Any:
        self.requests.append(kwargs)
        if stream:
            return self._stream()
        self._enter()
        try:
            self.release.wait(BLOCK_AT_MOST)
            content = self.replies.pop(0) if self.replies else self.content
            prompt = sum(_words(m["content"]) for m in kwargs.get("messages", []))
            return _completion(content, prompt)
        finally:
            self._leave()

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return [0] * _words(text.decode())

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


ADD = ToolDefinition("add", "Add.", {"type": "object", "properties": {"a": {"type": "integer"}}})
LIST = ToolDefinition("ls", "List.", {"type": "object", "properties": {}})


async def test_usage_leaves_out_what_the_provider_adds_to_the_prompt(fake: FakeLlama) -> None:
    fake.content = json.dumps({"name": "add", "arguments": {"a": 1}})
    fake.release.set()
    provider = LocalProvider("x.gguf", client=fake)  # type: ignore[arg-type]
    history = [
        Message("user", "add one and one"),
        Message("assistant", tool_calls=[ToolCall("c1", "add", '{"a": 1}')]),
        Message("tool", "2", tool_call_id="c1"),
    ]
    response = await provider.call(ChatRequest(messages=history, tools=[ADD]))
    sent = fake.requests[-1]["messages"]
    added = await provider.prompt_overhead([ADD])
    assert added == _words(sent[0]["content"]) > 0  # the listing, instructions, examples
    reminder = "Task: add one and one"
    assert reminder in sent[-1]["content"]  # the task again, after the result
    # What the caller sent, as rendered: the task, the call, its result.
    rendered = ["add one and one", '{"name": "add", "arguments": {"a": 1}}', "Result of add:\n2"]
    assert response.usage.input_tokens == sum(_words(t) for t in rendered)
    assert await provider.prompt_overhead([]) == 0


async def test_a_third_identical_call_is_generated_again_without_that_tool(
    fake: FakeLlama,
) -> None:
    same = json.dumps({"name": "add", "arguments": {"a": 1}})
    other = json.dumps({"name": "ls", "arguments": {}})
    fake.replies = [same, other]
    fake.release.set()
    provider = LocalProvider("x.gguf", client=fake)  # type: ignore[arg-type]
    history = [Message("user", "go")]
    for n, arguments in enumerate(['{"a": 1}', '{"a":1}']):  # spacing aside, the same call
        history += [
            Message("assistant", tool_calls=[ToolCall(f"c{n}", "add", arguments)]),
            Message("tool", "2", tool_call_id=f"c{n}"),
        ]
    response = await provider.call(ChatRequest(messages=history, tools=[ADD, LIST]))
    assert [c.name for c in response.message.tool_calls] == ["ls"]
    assert response.usage.output_tokens == 2  # both generations
    first, second = (r["grammar"] for r in fake.requests)
    assert first is provider._grammar([ADD, LIST]) and second is provider._grammar([LIST])

    # Once is not a repeat; and a tool that is the only one offered is never left out.
    fake.replies = [same]
    once = await provider.call(ChatRequest(messages=history[:3], tools=[ADD, LIST]))
    assert once.message.tool_calls[0].name == "add" and len(fake.requests) == 3
    fake.replies = [same]
    alone = await provider.call(ChatRequest(messages=history, tools=[ADD]))
    assert alone.message.tool_calls[0].name == "add" and len(fake.requests) == 4

    # A reply without a call (cut at the output limit) between them does not break the streak.
    cut = [*history[:3], Message("assistant", '{"name": "add", "argu'), *history[3:]]
    fake.replies = [same, other]
    again = await provider.call(ChatRequest(messages=cut, tools=[ADD, LIST]))
    assert again.message.tool_calls[0].name == "ls" and len(fake.requests) == 6


FINISH = ToolDefinition(
    "finish", "Finish.", {"type": "object", "properties": {"answer": {"type": "string"}}}
)


async def test_finish_is_offered_only_once_a_tool_has_answered(fake: FakeLlama) -> None:
    fake.content = json.dumps({"name": "add", "arguments": {"a": 1}})
    fake.release.set()
    provider = LocalProvider("x.gguf", client=fake)  # type: ignore[arg-type]
    task = [Message("user", "add one")]
    await provider.call(ChatRequest(messages=task, tools=[ADD, FINISH]))
    assert fake.requests[-1]["grammar"] is provider._grammar([ADD])
    answered = [
        *task,
        Message("assistant", tool_calls=[ToolCall("c1", "add", '{"a": 1}')]),
        Message("tool", "2", tool_call_id="c1"),
    ]
    await provider.call(ChatRequest(messages=answered, tools=[ADD, FINISH]))
    assert fake.requests[-1]["grammar"] is provider._grammar([ADD, FINISH])
    fake.content = json.dumps({"name": "finish", "arguments": {"answer": "hi"}})
    await provider.call(ChatRequest(messages=task, tools=[FINISH]))  # the only tool: kept
    assert fake.requests[-1]["grammar"] is provider._grammar([FINISH])


async def test_the_result_reader_is_offered_once_a_result_names_it(fake: FakeLlama) -> None:
    reader = ToolDefinition(
        "tool_result_read", "Read.", {"type": "object", "properties": {"hash": {"type": "string"}}}
    )
    fake.content = json.dumps({"name": "add", "arguments": {"a": 1}})
    fake.release.set()
    provider = LocalProvider("x.gguf", client=fake)  # type: ignore[arg-type]

    def after(result: str) -> list[Message]:
        return [
            Message("user", "add one"),
            Message("assistant", tool_calls=[ToolCall("c1", "add", '{"a": 1}')]),
            Message("tool", result, tool_call_id="c1"),
        ]

    await provider.call(ChatRequest(messages=after("2"), tools=[ADD, reader]))
    assert fake.requests[-1]["grammar"] is provider._grammar([ADD])
    cut = '2 [... cut; use tool_result_read(hash="ab12") to read the rest]'
    await provider.call(ChatRequest(messages=after(cut), tools=[ADD, reader]))
    assert fake.requests[-1]["grammar"] is provider._grammar([ADD, reader])
