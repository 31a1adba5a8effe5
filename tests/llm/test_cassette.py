"""Record a real run to a cassette, replay it offline to the identical trajectory."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from sp4rk.agent import DumpCaller
from sp4rk.llm.cassette import CassetteMissError, RecordingLLM, ReplayLLM, request_key
from sp4rk.llm.errors import (
    ContextWindowExceededError,
    LLMConnectionError,
    LLMError,
    QuotaExceededError,
    RateLimitError,
)
from sp4rk.llm.testing import ScriptedLLM, finish_response, text_response
from sp4rk.llm.types import ChatRequest, ChatResponse, Message
from tests.llm import task
from tests.llm.conftest import ProviderFactory
from tests.llm.fakeserver import FakeServer
from tests.llm.task import SCRIPT, run_task, trajectory
from tests.llm.wire import chat_sse


async def _record(server: FakeServer, make_provider: ProviderFactory, path: Path) -> Any:
    server.queue("/v1/chat/completions", *[chat_sse(turn) for turn in SCRIPT])
    async with RecordingLLM(make_provider("chat"), path) as recorder:
        return await run_task(recorder)


async def test_recorded_run_replays_to_an_identical_trajectory(
    tmp_path: Path, server: FakeServer, make_provider: ProviderFactory
) -> None:
    cassette = tmp_path / "run.jsonl"
    recorded = await _record(server, make_provider, cassette)
    requests_seen = len(server.received)

    replay = ReplayLLM(cassette)
    replayed = await run_task(replay)

    assert trajectory(replayed) == trajectory(recorded)
    assert (replayed.output, replayed.exit_reason) == (recorded.output, recorded.exit_reason)
    replay.assert_complete()
    assert len(server.received) == requests_seen  # nothing reached the server


async def test_recording_creates_the_cassette_folder(tmp_path: Path) -> None:
    cassette = tmp_path / "tests" / "cassettes" / "run.jsonl"
    async with RecordingLLM(ScriptedLLM([text_response("hi")]), cassette) as recorder:
        await recorder.call(ChatRequest(messages=[Message("user", content="q")]))
    assert len(cassette.read_text().splitlines()) == 2


async def test_a_used_up_cassette_names_what_the_model_was_told_last(tmp_path: Path) -> None:
    cassette = tmp_path / "run.jsonl"
    first = ChatRequest(messages=[Message("user", content="q")])
    async with RecordingLLM(ScriptedLLM([finish_response("done")]), cassette) as recorder:
        await recorder.call(first)
    replay = ReplayLLM(cassette)
    await replay.call(first)
    rejected = Message("tool", content="Finish rejected: update the checklist first.")
    with pytest.raises(CassetteMissError) as caught:
        await replay.call(ChatRequest(messages=[*first.messages, rejected]))
    message = str(caught.value)
    assert "every recorded call was already replayed" in message
    assert "Finish rejected: update the checklist first." in message
    assert "set_checklist_gate_enabled(False)" in message


async def test_cassette_uses_the_dump_format(
    tmp_path: Path, server: FakeServer, make_provider: ProviderFactory
) -> None:
    cassette = tmp_path / "run.jsonl"
    await _record(server, make_provider, cassette)
    records = [json.loads(line) for line in cassette.read_text().splitlines()]
    assert [r["direction"] for r in records] == ["request", "response"] * len(SCRIPT)
    assert all(set(r) == {"ts", "direction", "id", "data"} for r in records)
    assert [r["id"] for r in records[::2]] == [r["id"] for r in records[1::2]]
    assert len({r["id"] for r in records}) == len(SCRIPT)
    assert ChatRequest.from_dict(records[0]["data"]).messages[-1].content == task.TASK


async def test_a_dump_caller_file_replays_too(
    tmp_path: Path, server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue("/v1/chat/completions", *[chat_sse(turn) for turn in SCRIPT])
    dump = tmp_path / "dump.jsonl"
    with dump.open("w") as writer:
        recorded = await run_task(DumpCaller(make_provider("chat"), writer))
    replayed = await run_task(ReplayLLM(dump))
    assert trajectory(replayed) == trajectory(recorded)


async def test_unrecorded_request_fails_with_a_readable_diff(
    tmp_path: Path,
    server: FakeServer,
    make_provider: ProviderFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cassette = tmp_path / "run.jsonl"
    await _record(server, make_provider, cassette)
    monkeypatch.setitem(task.VALUES, "answer", 40)  # the tool now answers differently

    replay = ReplayLLM(cassette)
    with pytest.raises(CassetteMissError) as caught:
        await run_task(replay)

    message = str(caught.value)
    assert "request #2" in message
    assert '-      "content": "41",' in message
    assert '+      "content": "40",' in message


async def test_recorded_errors_replay_as_the_same_exception_type(tmp_path: Path) -> None:
    cassette = tmp_path / "errors.jsonl"
    request = ChatRequest(messages=[Message("user", "long")])
    inner = ScriptedLLM([ContextWindowExceededError("too long"), text_response("fine")])
    async with RecordingLLM(inner, cassette) as recorder:
        with pytest.raises(ContextWindowExceededError):
            await recorder.call(request)
        await recorder.call(request)

    replay = ReplayLLM(cassette)
    with pytest.raises(ContextWindowExceededError, match="too long"):
        await replay.call(request)
    assert (await replay.call(request)).message.content == "fine"  # same request, next answer
    replay.assert_complete()


async def test_normalize_ignores_volatile_fields(tmp_path: Path) -> None:
    cassette = tmp_path / "n.jsonl"
    async with RecordingLLM(ScriptedLLM([text_response("ok")]), cassette) as recorder:
        await recorder.call(ChatRequest(messages=[Message("user", "at /tmp/abc123")]))

    def drop_paths(data: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(data).replace("/tmp/abc123", "<tmp>").replace("/tmp/zzz999", "<tmp>")
        result: dict[str, Any] = json.loads(text)
        return result

    with pytest.raises(CassetteMissError):
        await ReplayLLM(cassette).call(ChatRequest(messages=[Message("user", "at /tmp/zzz999")]))
    replay = ReplayLLM(cassette, normalize=drop_paths)
    response = await replay.call(ChatRequest(messages=[Message("user", "at /tmp/zzz999")]))
    assert response.message.content == "ok"


def test_unfinished_replay_and_bad_files_are_reported(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    request = ChatRequest(messages=[Message("user", "x")]).to_dict()
    cassette.write_text(
        json.dumps({"ts": "", "direction": "request", "data": request})
        + "\n"
        + json.dumps({"ts": "", "direction": "response", "data": text_response("y").to_dict()})
        + "\n"
    )
    with pytest.raises(AssertionError, match="1 of 1"):
        ReplayLLM(cassette).assert_complete()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"direction": "response", "data": {}}) + "\n")
    with pytest.raises(ValueError, match="without a request"):
        ReplayLLM(bad)


def test_request_key_ignores_key_order() -> None:
    assert request_key({"a": 1, "b": [1, 2]}) == request_key({"b": [1, 2], "a": 1})
    assert request_key({"a": 1}) != request_key({"a": 2})


class _Gated:
    """Answers each request when the test opens its gate, so calls end in a chosen order."""

    def __init__(self, *contents: str) -> None:
        self.gates = {content: asyncio.Event() for content in contents}
        self.started = {content: asyncio.Event() for content in contents}

    async def call(self, request: ChatRequest) -> ChatResponse:
        content = request.messages[0].content
        self.started[content].set()
        await self.gates[content].wait()
        return text_response(f"answer {content}")


async def _overlapping_calls(caller: Any, inner: _Gated) -> None:
    """Call with A, then B; B ends first, while A is still waiting."""
    first = asyncio.create_task(caller.call(ChatRequest(messages=[Message("user", "A")])))
    await inner.started["A"].wait()
    second = asyncio.create_task(caller.call(ChatRequest(messages=[Message("user", "B")])))
    await inner.started["B"].wait()
    inner.gates["B"].set()
    await second
    inner.gates["A"].set()
    await first


@pytest.mark.parametrize("writer", ["recorder", "dump-caller"])
async def test_concurrent_calls_replay_with_their_own_answers(tmp_path: Path, writer: str) -> None:
    cassette = tmp_path / "c.jsonl"
    inner = _Gated("A", "B")
    if writer == "recorder":
        async with RecordingLLM(inner, cassette) as recorder:
            await _overlapping_calls(recorder, inner)
    else:
        with cassette.open("w") as out:
            await _overlapping_calls(DumpCaller(inner, out), inner)

    records = [json.loads(line) for line in cassette.read_text().splitlines()]
    # Each request is written when its call starts, each response when it ends (B first).
    assert [r["direction"] for r in records] == ["request", "request", "response", "response"]
    assert [r["data"]["messages"][0]["content"] for r in records[:2]] == ["A", "B"]
    assert [r["id"] for r in records[2:]] == [records[1]["id"], records[0]["id"]]
    replay = ReplayLLM(cassette)
    for content in ("A", "B"):
        response = await replay.call(ChatRequest(messages=[Message("user", content)]))
        assert response.message.content == f"answer {content}"
    replay.assert_complete()


@pytest.mark.parametrize(
    "error",
    [
        RateLimitError("slow down", status_code=429, retryable=True, code="rate_limit_exceeded"),
        QuotaExceededError("no money", status_code=429, retryable=False, code="quota"),
        ContextWindowExceededError("too long", status_code=400),
        LLMConnectionError("reset", retryable=True),
    ],
    ids=lambda e: type(e).__name__,
)
async def test_replayed_errors_keep_status_retryable_and_code(
    tmp_path: Path, error: LLMError
) -> None:
    cassette = tmp_path / "e.jsonl"
    request = ChatRequest(messages=[Message("user", "x")])
    async with RecordingLLM(ScriptedLLM([error]), cassette) as recorder:
        with pytest.raises(type(error)):
            await recorder.call(request)

    with pytest.raises(LLMError) as caught:
        await ReplayLLM(cassette).call(request)
    replayed = caught.value
    assert type(replayed) is type(error)
    assert str(replayed) == str(error)
    assert (replayed.status_code, replayed.retryable) == (error.status_code, error.retryable)
    assert getattr(replayed, "code", None) == getattr(error, "code", None)
