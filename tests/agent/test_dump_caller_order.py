"""DumpCaller writes a call's request before calling, and keeps concurrent lines whole."""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time

from sp4rk.agent import DumpCaller
from sp4rk.llm import ChatRequest, ChatResponse, Message
from sp4rk.llm.cassette import ReplayLLM
from sp4rk.llm.testing import text_response


class _Hanging:
    """A model that never answers; ``started`` is set when a call reaches it."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def call(self, request: ChatRequest) -> ChatResponse:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_hung_call_still_leaves_its_request_in_the_dump() -> None:
    out = io.StringIO()
    inner = _Hanging()
    call = asyncio.create_task(
        DumpCaller(inner, out).call(ChatRequest(messages=[Message("user", "stuck?")]))
    )
    await inner.started.wait()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["direction"] for r in lines] == ["request"]
    assert lines[0]["data"]["messages"][0]["content"] == "stuck?"
    assert lines[0]["id"]
    call.cancel()
    await asyncio.gather(call, return_exceptions=True)
    assert len(out.getvalue().splitlines()) == 1  # a cancelled call writes no response


class _SlowWriter:
    """Writes one character at a time, letting other threads run in between."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        for char in text:
            self.parts.append(char)
            time.sleep(0)
        return len(text)

    def getvalue(self) -> str:
        return "".join(self.parts)


class _Echo:
    async def call(self, request: ChatRequest) -> ChatResponse:
        await asyncio.sleep(0)
        return text_response(f"answer {request.messages[0].content}")


def test_lines_of_calls_from_several_threads_never_mix(tmp_path: object) -> None:
    writer = _SlowWriter()
    caller = DumpCaller(_Echo(), writer)

    def calls(prefix: str) -> None:
        async def run() -> None:
            await asyncio.gather(
                *(
                    caller.call(ChatRequest(messages=[Message("user", f"{prefix}{i}")]))
                    for i in range(10)
                )
            )

        asyncio.run(run())

    threads = [threading.Thread(target=calls, args=(p,)) for p in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    records = [json.loads(line) for line in writer.getvalue().splitlines()]
    assert len(records) == 40
    from pathlib import Path

    dump = Path(str(tmp_path)) / "dump.jsonl"
    dump.write_text(writer.getvalue())
    replay = ReplayLLM(dump)
    for prefix in "ab":
        for i in range(10):
            answer = asyncio.run(
                replay.call(ChatRequest(messages=[Message("user", f"{prefix}{i}")]))
            )
            assert answer.message.content == f"answer {prefix}{i}"
    replay.assert_complete()
