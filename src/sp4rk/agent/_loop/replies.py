"""Responses without usable tool calls: text-only replies and replies cut at the token limit."""

from __future__ import annotations

import re
from typing import Any

from sp4rk.agent._loop import nudges
from sp4rk.agent._loop.breakers import Verdict, check_truncation, reprieve
from sp4rk.agent._loop.finish import attempt_finish
from sp4rk.agent._loop.state import Flow, Run
from sp4rk.agent.types import ExecutorResult, ExitReason, Step
from sp4rk.llm.types import ChatResponse

#: Text replies answered with a nudge before the text is accepted as the answer.
MAX_TEXT_NUDGES = 2

_PRINTED_CALL = re.compile(
    r"^\s*```\w+_\w+|<tool_call>|<function_call>|<function=\w+", re.MULTILINE | re.ASCII
)


def looks_like_printed_tool_call(text: str) -> bool:
    """Whether ``text`` looks like a tool call written out instead of made."""
    return bool(_PRINTED_CALL.search(text))


def response_head(response: ChatResponse) -> dict[str, Any]:
    """The thought and reasoning a response's first step carries."""
    m = response.message
    return {
        "thought": m.content,
        "reasoning_content": m.reasoning_content,
        "reasoning_items": list(m.reasoning_items),
    }


def response_tokens(response: ChatResponse) -> int:
    """Tokens the call cost, shared by every step it produced."""
    return response.usage.input_tokens + response.usage.output_tokens


async def handle_text_reply(run: Run, response: ChatResponse) -> Flow | ExecutorResult:
    """A reply with no tool call: nudge twice, then accept the text through the finish gates."""
    text = response.message.content
    head, tokens = response_head(response), response_tokens(response)
    group = run.next_group()
    if run.text_nudges < MAX_TEXT_NUDGES:
        run.text_nudges += 1
        if looks_like_printed_tool_call(text):
            nudge = nudges.PRINTED_TOOL_CALL
            run.diag(
                "tool_call_syntax_nudge",
                reason="tool_call_syntax_as_text",
                attempt=run.text_nudges,
            )
        else:
            nudge = nudges.FINISH_EXPLICITLY
            run.diag(
                "executor_finish_nudge",
                reason="implicit_finish_without_tool",
                attempt=run.text_nudges,
            )
        run.record_nudge(nudge, **head, tokens_used=tokens, response_group=group)
        return Flow.NUDGED
    outcome = await attempt_finish(
        run, text, call=None, call_idx=0, head=head, tokens=tokens, group=group
    )
    run.commit()
    return outcome


async def handle_truncated_response(run: Run, response: ChatResponse) -> Flow | ExecutorResult:
    """A tool-call response cut at the output limit: run none of its calls, record each."""
    calls = response.message.tool_calls
    group = run.next_group()
    head, tokens = response_head(response), response_tokens(response)
    for idx, call in enumerate(calls):
        run.emit("tool_call", run.step, idx, call.name, call.input, run.source_of(call.name))
    first = calls[0].name
    verdict = check_truncation(run)
    count = run.counters.truncations
    nudge: str | None = nudges.TRUNCATED_RESPONSE_NUDGE
    if verdict is Verdict.ABORT:
        run.diag("truncation_abort", tool=first, consecutive=count)
        nudge = await reprieve(run, "truncation")
    else:
        run.diag("truncation_detected", tool=first, consecutive=count)
    last = len(calls) - 1
    for idx, call in enumerate(calls):
        observation = nudges.TRUNCATED_CALL_OBSERVATION.format(tool=call.name)
        run.emit("tool_result", run.step, idx, len(observation), observation, True)
        run.record(
            Step(
                **(head if idx == 0 else {}),
                action=call,
                observation=observation,
                is_error=True,
                tokens_used=tokens,
                user_nudge=(nudge or "") if idx == last else "",
                response_group=group,
            )
        )
    if nudge is None:
        return run.result(
            nudges.truncation_abort(first, count), ExitReason.TRUNCATION_ABORT, finished=False
        )
    run.commit()
    return Flow.INTERCEPTED
