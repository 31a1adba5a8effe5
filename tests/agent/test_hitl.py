"""Tool-call approval: reject, modify, approve for USER_CONFIRM tools, and raising handlers."""

from __future__ import annotations

import pytest

from sp4rk.agent import ExitReason, HITLHandler, HITLToolDecision
from sp4rk.llm.testing import finish_response, tool_calls_response
from sp4rk.tools import RunContext

from .helpers import echo_tools, run


class Decide(HITLHandler):
    def __init__(self, decisions: dict[str, HITLToolDecision | None]) -> None:
        self.decisions = decisions
        self.asked: list[tuple[str, str]] = []

    async def on_tool_call(
        self, ctx: RunContext, tool_name: str, input: str
    ) -> HITLToolDecision | None:
        self.asked.append((tool_name, input))
        return self.decisions.get(tool_name)


def test_rejection_with_empty_reason_and_the_next_call_still_runs() -> None:
    calls: list[tuple[str, str]] = []
    hitl = Decide({"write_file": HITLToolDecision(allow=False)})
    result, _, events = run(
        [
            tool_calls_response(
                ("write_file", {"path": "a", "content": "x"}), ("search", {"q": "next"})
            ),
            finish_response("done"),
        ],
        tools=echo_tools(calls),
        hitl=hitl,
    )
    rejected = result.steps[0]
    assert rejected.observation == "[Tool call rejected: rejected by user]" and rejected.is_error
    assert calls == [("search", "next")]
    # A step with a rejection skips the post-step checks: no context_fill after step 1.
    assert events.of("context_fill") == []


def test_rejection_reason_reaches_the_model() -> None:
    hitl = Decide({"write_file": HITLToolDecision(allow=False, reason="not in prod")})
    result, llm, _ = run(
        [tool_calls_response(("write_file", {"path": "a", "content": "x"})), finish_response("d")],
        hitl=hitl,
    )
    assert result.steps[0].observation == "[Tool call rejected: not in prod]"
    assert any(m.content == "[Tool call rejected: not in prod]" for m in llm.requests[1].messages)


def test_modified_input_reaches_the_tool_but_the_step_keeps_the_original() -> None:
    calls: list[tuple[str, str]] = []
    hitl = Decide({"search": HITLToolDecision(allow=True, modified_input='{"q": "safer"}')})
    result, _, _ = run(
        [tool_calls_response(("search", {"q": "rm -rf"})), finish_response("d")],
        tools=echo_tools(calls),
        hitl=hitl,
    )
    assert calls == [("search", "safer")]
    assert result.steps[0].action is not None
    assert result.steps[0].action.input == '{"q": "rm -rf"}'


def test_finish_is_never_sent_for_approval() -> None:
    hitl = Decide({})
    run([finish_response("d")], hitl=hitl)
    assert hitl.asked == []


def test_user_confirm_tool_fails_closed_without_explicit_approval() -> None:
    calls: list[tuple[str, str]] = []
    result, _, _ = run(
        [tool_calls_response(("bash_exec", {"command": "make"})), finish_response("d")],
        tools=echo_tools(calls),
    )
    assert calls == []
    assert result.steps[0].is_error and "needs a human's approval" in result.steps[0].observation


def test_user_confirm_tool_runs_once_the_handler_approves_it() -> None:
    calls: list[tuple[str, str]] = []
    hitl = Decide({"bash_exec": HITLToolDecision(allow=True)})
    result, _, _ = run(
        [tool_calls_response(("bash_exec", {"command": "make"})), finish_response("d")],
        tools=echo_tools(calls),
        hitl=hitl,
    )
    assert calls == [("bash_exec", "make")]
    assert result.steps[0].observation == "ran make"


def test_a_raising_approval_handler_propagates() -> None:
    class Raising(HITLHandler):
        async def on_tool_call(self, *args: object) -> HITLToolDecision | None:
            raise ConnectionError("approval service down")

    with pytest.raises(ConnectionError):
        run([tool_calls_response(("search", {"q": "a"})), finish_response("d")], hitl=Raising())


def test_set_hitl_handler_none_restores_the_default() -> None:
    result, _, _ = run(
        [tool_calls_response(("search", {"q": "a"})), finish_response("d")],
        setup=lambda ex: ex.set_hitl_handler(None),
    )
    assert result.exit_reason is ExitReason.FINISHED


def test_the_handler_sees_the_policy_and_the_judges_reason() -> None:
    from sp4rk.tools import ToolPolicy, ToolResult

    class Shell:
        name = "shell"
        description = "runs commands"
        input_schema = {"type": "object"}  # noqa: RUF012
        default_policy = ToolPolicy.ALWAYS_ALLOW
        is_untrusted = False

        async def execute(self, ctx: RunContext, input: str) -> ToolResult:
            return ToolResult("ran " + "." * 60)

        def judge(self, ctx: RunContext, input: str) -> str:
            return "it deletes files" if "rm" in input else ""

    seen: list[tuple[object, str]] = []

    class Asks(HITLHandler):
        async def on_tool_call(
            self, ctx: RunContext, tool_name: str, input: str
        ) -> HITLToolDecision | None:
            seen.append((ctx.tool_policy, ctx.tool_review))
            return HITLToolDecision(allow=True) if ctx.tool_review else None

    from sp4rk.tools import Registry

    result, _, _ = run(
        [
            tool_calls_response(("shell", {"c": "ls"}), ("shell", {"c": "rm x"})),
            finish_response("d"),
        ],
        tools=Registry([Shell()]),
        hitl=Asks(),
    )
    assert seen == [(ToolPolicy.ALWAYS_ALLOW, ""), (ToolPolicy.USER_CONFIRM, "it deletes files")]
    assert [s.observation[:3] for s in result.steps[:2]] == ["ran", "ran"]


def test_the_decision_constructors_say_what_they_do() -> None:
    assert HITLToolDecision.approve() == HITLToolDecision(allow=True)
    assert HITLToolDecision.reject("too risky") == HITLToolDecision(False, reason="too risky")
    modified = HITLToolDecision.modify({"q": "safer"})
    assert modified.allow and modified.modified_input == '{"q": "safer"}'
    assert HITLToolDecision.modify('{"q": 1}').modified_input == '{"q": 1}'
    assert HITLToolDecision.no_opinion().abstain
    with pytest.raises(TypeError, match="JSON text or a dict"):
        HITLToolDecision.modify(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("no_opinion", [None, HITLToolDecision.no_opinion()])
def test_no_opinion_lets_allowed_calls_run_and_refuses_calls_that_need_approval(
    no_opinion: HITLToolDecision | None,
) -> None:
    calls: list[tuple[str, str]] = []
    hitl = Decide({"search": no_opinion, "bash_exec": no_opinion})
    result, _, _ = run(
        [
            tool_calls_response(("search", {"q": "a"}), ("bash_exec", {"command": "make"})),
            finish_response("d"),
        ],
        tools=echo_tools(calls),
        hitl=hitl,
    )
    assert calls == [("search", "a")]
    assert "needs a human's approval" in result.steps[1].observation
    assert hitl.asked == [("search", '{"q": "a"}'), ("bash_exec", '{"command": "make"}')]


def test_approve_reject_and_modify_through_a_run() -> None:
    calls: list[tuple[str, str]] = []
    hitl = Decide(
        {
            "bash_exec": HITLToolDecision.approve(),
            "search": HITLToolDecision.modify({"q": "narrower"}),
            "write_file": HITLToolDecision.reject("not today"),
        }
    )
    result, _, _ = run(
        [
            tool_calls_response(
                ("bash_exec", {"command": "make"}),
                ("search", {"q": "wide"}),
                ("write_file", {"path": "a", "content": "x"}),
            ),
            finish_response("d"),
        ],
        tools=echo_tools(calls),
        hitl=hitl,
    )
    assert calls == [("bash_exec", "make"), ("search", "narrower")]
    assert result.steps[2].observation == "[Tool call rejected: not today]"
