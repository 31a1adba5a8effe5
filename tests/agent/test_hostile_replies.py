"""Fuzzed model replies: the executor returns a result or raises a documented LLMError.

Thousands of hostile replies (deep or huge JSON, NaN, duplicate keys, lone surrogates, NULs,
wrong types, absurd token counts, unknown tools, printed tool calls) go through a real
executor with the built-in file tools on a temporary workspace. Nothing may escape ``run``
but ``LLMError`` (a reply that is not a response at all), and nothing may hang.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

from sp4rk.agent import Executor, HITLHandler, HITLToolDecision
from sp4rk.llm import ChatRequest, ChatResponse, LLMError, Message, TokenUsage, ToolCall
from sp4rk.memory import ContextWindow
from sp4rk.tools import Registry, RunContext
from sp4rk.tools.builtins import builtin_tools

RUNS = 200
REPLIES_PER_RUN = 10
RUN_TIMEOUT = 20.0

TOOL_NAMES = [
    "bash_exec",
    "web_fetch",
    "read_file",
    "write_file",
    "edit_file",
    "delete_file",
    "list_directory",
    "create_directory",
    "glob",
    "ripgrep",
    "tool_result_read",
    "update_checklist",
    "store_fact",
    "search_facts",
    "finish",
    "no_such_tool",
    "",
    "read_file\x00",
    "x" * 300,
    "fïnish",
]
TEXTS = [
    "",
    "ok",
    "a\ud800b",
    "\x00\x01\x02",
    "```bash_exec\nls\n```",
    "<tool_call>{}</tool_call>",
    "The user lifted the step limit for this run.",
    "Finish rejected: nope",
    "é" * 5000,
    "line\n" * 2000,
]


def hostile_json(rng: random.Random) -> Any:
    choice = rng.randrange(15)
    if choice == 0:
        return "[" * 100_000 + "]" * 100_000
    if choice == 1:
        return '{"path": ' + "9" * 5000 + "}"
    if choice == 2:
        return '{"path": NaN, "answer": Infinity}'
    if choice == 3:
        return '{"answer": "a", "answer": 5}'
    if choice == 4:
        return '{"path": "a\\ud800.txt", "content": "\\udfff"}'
    if choice == 5:
        return '{"path": "a\\u0000b"}'
    if choice == 6:
        return "{broken"
    if choice == 7:
        return rng.choice(["null", "[]", "5", '"s"', "true", ""])
    if choice == 8:
        return {"path": "notes.txt", "content": "parsed already"}  # not a string at all
    if choice == 9:
        return json.dumps({"path": "../" * 20 + "etc/passwd", "pattern": "(a+)+$"})
    if choice == 10:
        return json.dumps({"answer": rng.choice(TEXTS)})
    if choice == 11:
        return json.dumps(
            {"todo_list": "- [ ] a\n- [x] b", "keywords": ["k"] * 50, "content": "fact"}
        )
    if choice == 12:
        return json.dumps({"path": "notes.txt", "content": "x" * 200_000})
    if choice == 13:
        return json.dumps({"command": "echo fuzz", "url": "http://127.0.0.1:9/x", "timeout": -1})
    return json.dumps({"hash": "deadbeef" * 8, "start_line": -5, "num_lines": 10**12})


def hostile_reply(rng: random.Random) -> Any:
    if rng.random() < 0.02:
        return rng.choice([None, "text", {"message": {}}, 42])  # not a response at all
    calls = [
        ToolCall(
            id=rng.choice(["c1", "", "c\ud800", str(rng.random())]),
            name=rng.choice(TOOL_NAMES),
            input=hostile_json(rng),
        )
        for _ in range(rng.choice([0, 0, 1, 1, 2, 4]))
    ]
    usage = TokenUsage(
        rng.choice([0, 10, -5, 10**15, float("inf"), "12", None]),  # type: ignore[arg-type]
        rng.choice([0, 7, -1, float("nan"), True]),  # type: ignore[arg-type]
    )
    message = Message("assistant", content=rng.choice(TEXTS), tool_calls=calls)
    if rng.random() < 0.05:
        message.content = rng.choice([None, 5, ["x"]])  # type: ignore[assignment]
    return ChatResponse(
        message=message,
        reasoning=rng.choice(TEXTS),
        usage=usage,
        stop_reason=rng.choice(["end_turn", "tool_use", "max_tokens", "", "stop"]),
    )


class Replies:
    """An LLM caller that returns exactly what it is given, garbage included.

    (``ScriptedLLM`` would call anything that is not a ``ChatResponse``.)
    """

    def __init__(self, replies: list[Any]) -> None:
        self._replies = iter(replies)

    async def call(self, request: ChatRequest) -> Any:
        return next(self._replies, ChatResponse(message=Message("assistant", content="done")))


class ApproveAll(HITLHandler):
    async def on_tool_call(
        self, ctx: RunContext, tool_name: str, input: str
    ) -> HITLToolDecision | None:
        return HITLToolDecision(allow=True)


async def one_run(seed: int, workspace: Path) -> str:
    rng = random.Random(seed)
    (workspace / "notes.txt").write_text("alpha\nbeta\n")
    tools = Registry(builtin_tools(workspace))  # the shell and the web too: all of them
    llm = Replies([hostile_reply(rng) for _ in range(REPLIES_PER_RUN)])
    executor = Executor(llm, tools, REPLIES_PER_RUN - 1, hitl=ApproveAll())
    try:
        await asyncio.wait_for(
            executor.run(
                tools.list(), ContextWindow(max_tokens=32_000), RunContext(workspace=workspace)
            ),
            RUN_TIMEOUT,
        )
    except TimeoutError:
        return "hang"
    except LLMError:
        return "failed-safe"  # documented: a reply that is not a response at all
    except Exception as exc:  # anything else escaping run() is a bug
        return f"broke: {type(exc).__name__}: {str(exc)[:200]}"
    return "failed-safe"


async def test_fuzzed_model_replies_never_crash_or_hang(tmp_path: Path) -> None:
    outcomes: Counter[str] = Counter()
    broke: list[str] = []
    for seed in range(RUNS):
        workspace = tmp_path / f"ws{seed}"
        workspace.mkdir()
        outcome = await one_run(seed, workspace)
        outcomes["broke" if outcome.startswith("broke") else outcome] += 1
        if outcome.startswith("broke"):
            broke.append(f"seed {seed}: {outcome}")
    tried = RUNS * REPLIES_PER_RUN
    print(
        f"\nmodel replies: tried {tried} in {RUNS} runs / failed-safe {outcomes['failed-safe']} "
        f"runs / broke {outcomes['broke']} / hangs {outcomes['hang']}"
    )
    assert broke == []
    assert outcomes["hang"] == 0
