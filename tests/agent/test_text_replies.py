"""Text-only replies (decisions #3): two nudges, then the text is the answer, through the gates."""

from __future__ import annotations

import pytest

from sp4rk.agent import ExitReason, Step
from sp4rk.agent._loop.replies import looks_like_printed_tool_call
from sp4rk.llm.testing import finish_response, text_response, tool_calls_response

from .helpers import nudges, run


def test_text_is_nudged_twice_then_accepted_as_implicit_finish() -> None:
    result, llm, events = run([text_response("yes")] * 3)
    assert len(llm.requests) == 3
    assert result.finished and result.output == "yes"
    assert result.exit_reason is ExitReason.IMPLICIT_FINISH
    assert len(nudges(result)) == 2 and all("`finish`" in n for n in nudges(result))
    assert [d["attempt"] for d in events.diagnostics("executor_finish_nudge")] == [1, 2]
    # The nudge is the last message the model saw on its second call.
    assert llm.requests[1].messages[-1].role == "user"
    assert "`finish`" in llm.requests[1].messages[-1].content


def test_a_finish_call_after_a_nudge_finishes_normally() -> None:
    result, _, _ = run([text_response("maybe"), finish_response("done")])
    assert result.exit_reason is ExitReason.FINISHED and result.output == "done"


def test_printed_tool_call_gets_its_own_nudge_and_shares_the_budget() -> None:
    printed = text_response("```bash_exec\nls -la\n```")
    result, _, events = run([printed, printed, printed])
    assert "Text is not executed" in nudges(result)[0]
    assert len(events.diagnostics("tool_call_syntax_nudge")) == 2
    assert result.exit_reason is ExitReason.IMPLICIT_FINISH  # the shared budget ran out


def test_mixed_text_replies_share_one_budget_of_two() -> None:
    result, llm, _ = run(
        [
            text_response("```read_file\nx\n```"),
            text_response("plain"),
            text_response("final words"),
        ]
    )
    assert len(llm.requests) == 3 and result.output == "final words"


def test_text_replies_do_not_fire_step_complete_until_accepted() -> None:
    _, _, events = run([text_response("a"), text_response("b"), text_response("c")])
    completed = events.of("step_complete")
    assert [c[0] for c in completed] == [3] and completed[0][1] >= 0


def test_the_implicit_answer_goes_through_the_finish_guard() -> None:
    reasons = ["still running"]
    result, _, events = run(
        [text_response("a")] * 4,
        setup=lambda ex: ex.set_finish_guard(lambda ctx: reasons.pop(0) if reasons else None),
    )
    assert events.diagnostics("finish_guard_rejected") == [{"reason": "still running"}]
    assert result.exit_reason is ExitReason.IMPLICIT_FINISH
    assert "Finish rejected: still running" in nudges(result)


def test_nudge_steps_keep_the_reply_text_and_reasoning() -> None:
    result, _, _ = run([text_response("thinking out loud"), finish_response("x")])
    step: Step = result.steps[0]
    assert step.action is None and step.thought == "thinking out loud"
    assert step.user_nudge


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("```read_file\npath\n```", True),
        ("   ```bash_exec\nls\n```", True),
        ("```bash_exec (batched)\n```", True),
        ("<tool_call>{...}</tool_call>", True),
        ("```go\nfmt.Println()\n```", False),
        ("plain text", False),
        ("", False),
        ("use `read_file` to look", False),
    ],
)
def test_printed_tool_call_detector(text: str, expected: bool) -> None:
    assert looks_like_printed_tool_call(text) is expected


def test_max_tokens_text_reply_is_treated_as_text() -> None:
    result, _, _ = run(
        [
            text_response("cut off", stop_reason="max_tokens"),
            tool_calls_response(("search", {"q": "x"})),
            finish_response("ok"),
        ]
    )
    assert result.finished and result.output == "ok"
