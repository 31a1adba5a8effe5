"""Content capture: off by default, on by option, and never a credential in what is exported."""

from __future__ import annotations

import pytest

from sp4rk.agent import Executor, ExecutorResult
from sp4rk.llm import LLMError, Message, TokenUsage
from sp4rk.llm._secrets import redact
from sp4rk.llm.testing import ScriptedLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow
from sp4rk.otel._messages import PromptEncoder
from sp4rk.tools import RunContext

from ..agent.helpers import echo_tools
from .telemetry import Telemetry

#: A credential the provider knows (not shaped like a key: only its own masking can catch it).
CANARY = "canary-7f3a9c1e5b2d4"
#: Shaped like a key: masked even where no provider knew it.
KEY_SHAPED = "sk-proj-" + "Q" * 24
SECRETS = f"{CANARY} {KEY_SHAPED}"


class ProviderDouble(ScriptedLLM):
    """A scripted model that masks its credential the way a provider does."""

    def redact(self, text: str) -> str:
        return redact(text, {CANARY})


def content_run(telemetry: Telemetry, marker: str, *, capture: bool) -> ExecutorResult:
    """A run whose every piece of content carries ``marker``."""
    tools = echo_tools()
    llm = ProviderDouble(
        [
            tool_calls_response(
                ("search", {"q": f"{marker}-arg"}),
                ("fail", {"q": f"{marker}-fail"}),
                thought=f"{marker}-thought",
                usage=TokenUsage(10, 5),
            ),
            finish_response(f"{marker}-answer", thought=f"{marker}-closing"),
        ]
    )
    executor = Executor(llm, tools, 5, events=telemetry.events(capture_content=capture))
    ctx = RunContext(task_description=f"{marker}-description")
    window = ContextWindow(system_prompt=f"{marker}-system", task=f"{marker}-task")
    return executor.run_sync(tools.list(), window, ctx)


def test_nothing_of_the_content_is_exported_by_default(telemetry: Telemetry) -> None:
    result = content_run(telemetry, "MARK", capture=False)
    assert result.finished
    exported = list(telemetry.exported_strings())
    assert exported and not [s for s in exported if "MARK" in s]
    keys = {k for s in telemetry.spans for k in (s.attributes or {})}
    assert not keys & {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "sp4rk.run.output",
        "sp4rk.run.task",
    }


def test_capture_exports_prompts_completions_arguments_and_results(telemetry: Telemetry) -> None:
    content_run(telemetry, "MARK", capture=True)
    first_chat = min(telemetry.named("chat"), key=lambda s: s.start_time)
    attrs = first_chat.attributes or {}
    assert attrs["gen_ai.system_instructions"] == '[{"type": "text", "content": "MARK-system"}]'
    assert '"content": "MARK-task"' in str(attrs["gen_ai.input.messages"])
    output = str(attrs["gen_ai.output.messages"])
    assert '"type": "reasoning"' not in output and '"content": "MARK-thought"' in output
    assert '"name": "search", "arguments": "{\\"q\\": \\"MARK-arg\\"}"' in output
    assert '"finish_reason": "tool_call"' in output
    search = telemetry.one("execute_tool search").attributes or {}
    assert search["gen_ai.tool.call.arguments"] == '{"q": "MARK-arg"}'
    assert str(search["gen_ai.tool.call.result"]).startswith("results for MARK-arg")
    failed = telemetry.one("execute_tool fail")
    assert failed.attributes["error.type"] == "tool_error"  # type: ignore[index]
    assert "MARK-fail" in str(failed.attributes["gen_ai.tool.call.result"])  # type: ignore[index]
    root = telemetry.one("invoke_agent sp4rk").attributes or {}
    assert root["sp4rk.run.output"] == "MARK-answer"
    assert root["sp4rk.run.task"] == "MARK-description"


def test_no_credential_reaches_an_exporter(telemetry: Telemetry) -> None:
    content_run(telemetry, SECRETS, capture=True)
    tools = echo_tools()
    failing = ProviderDouble([LLMError(f"rejected key {SECRETS}")])
    executor = Executor(failing, tools, 5, events=telemetry.events(capture_content=True))
    with pytest.raises(LLMError):
        executor.run_sync(tools.list(), ContextWindow(task=SECRETS))

    exported = list(telemetry.exported_strings())
    leaks = [s for s in exported if CANARY in s or KEY_SHAPED in s]
    assert leaks == []
    # Masked, not dropped: the content is there with the credentials replaced.
    masked = "[REDACTED] sk-proj-[REDACTED]"
    assert any(f'"q\\": \\"{masked}' in s for s in exported)  # in the captured prompt
    assert any(s == f"rejected key {masked}" for s in exported)  # the failure's message


def test_each_message_of_a_run_is_masked_once_however_often_it_is_sent() -> None:
    masked: list[str] = []

    def counting(text: str) -> str:
        masked.append(text)
        return text.replace("secret", "[REDACTED]")

    encoder = PromptEncoder(counting, max_chars=200)
    system, task = Message("system", content="be brief"), Message("user", content="a secret")
    first = encoder.attributes([system, task])
    assert first == {
        "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", '
        '"content": "a [REDACTED]"}]}]',
        "gen_ai.system_instructions": '[{"type": "text", "content": "be brief"}]',
    }
    assert encoder.attributes([system, task]) == first and len(masked) == 2
    task.content = "another secret"  # replaced in place: encoded afresh
    assert "another [REDACTED]" in encoder.attributes([system, task])["gen_ai.input.messages"]
    assert len(masked) == 3
    big = Message("user", content="x" * 300)  # past the memo's bound: it starts over
    encoder.attributes([system, task, big])
    encoder.attributes([system, task])
    assert len(masked) == 6
