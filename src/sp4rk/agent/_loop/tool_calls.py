"""Tool execution: each call of a response, in the model's order, through the pipeline.

The pipeline: repeat check, approval, the tool, the breakers, result processing.

A response's steps are committed to the trajectory together once the response is done; if the
run is cancelled mid-response, the calls that completed are kept (the rendered assistant turn
lists only recorded calls, so the history stays valid).
"""

from __future__ import annotations

import asyncio
import enum
import json
from dataclasses import dataclass
from typing import Any

from sp4rk._internal.text import valid_text
from sp4rk.agent._loop import checklist, nudges
from sp4rk.agent._loop.breakers import (
    Verdict,
    call_key,
    check_fruitless,
    check_parse_error,
    check_repeat,
    check_same_tool,
    describe_trip,
    note_result,
    reprieve,
)
from sp4rk.agent._loop.finish import attempt_finish
from sp4rk.agent._loop.replies import response_head, response_tokens
from sp4rk.agent._loop.results import process_tool_result
from sp4rk.agent._loop.state import RESULT_READ_TOOL, Flow, Run
from sp4rk.agent._loop.verification import flush_verification, note_call, verification_note
from sp4rk.agent.hitl import HITLToolDecision
from sp4rk.agent.types import ExecutorResult, ExitReason, Step
from sp4rk.llm.types import ChatResponse, ToolCall
from sp4rk.tools.base import PARSE_ERROR_PREFIX, ToolResult, ToolReview, guarded_execute
from sp4rk.tools.builtins.finish import FINISH_TOOL_NAME, parse_finish_answer


class _Next(enum.Enum):
    CONTINUE = "continue"  # go on with the next call
    REJECTED = "rejected"  # the human rejected it; go on, but skip post-step checks
    BREAK = "break"  # a breaker intercepted: skip the rest of the response


async def run_tool_calls(run: Run, response: ChatResponse) -> Flow | ExecutorResult:
    """Process every tool call of ``response``; return how the step ended, or the result."""
    run.counters.truncations = 0
    calls = response.message.tool_calls
    r = _Response(run.next_group(), response_head(response), response_tokens(response), len(calls))
    flow = Flow.COMPLETED
    idx = 0
    while idx < len(calls):
        call = calls[idx]
        head = r.head if idx == 0 else {}
        if call.name == FINISH_TOOL_NAME:
            outcome = await _finish_call(run, call, idx, head, r.tokens, r.group)
            if isinstance(outcome, ExecutorResult):
                return outcome
            if isinstance(outcome, Flow):  # a gate or a breaker stopped it: drop the rest
                if outcome is Flow.INTERCEPTED:
                    flow = outcome
                break
            idx += 1
            continue
        batch = _concurrent_batch(run, calls, idx)
        step_outcome = await _run_batch(run, calls, idx, batch, r)
        if isinstance(step_outcome, ExecutorResult):
            return step_outcome
        if step_outcome is not _Next.CONTINUE:
            flow = Flow.INTERCEPTED
        if step_outcome is _Next.BREAK:
            break
        idx += batch
    if run.verify_pending:
        await flush_verification(run)
    run.commit()
    return flow


@dataclass(slots=True)
class _Response:
    """What every step of one response shares."""

    group: int
    head: dict[str, Any]
    tokens: int
    calls: int


@dataclass(slots=True)
class _Deferred:
    """A call answered without running (rejected or intercepted): its step and what follows."""

    step: Step
    then: _Next


@dataclass(slots=True)
class _Approved:
    """A call that passed the repeat check and approval, ready to run."""

    call: ToolCall
    idx: int
    key: str
    source: str
    exec_input: str
    approved: bool


def _concurrent_batch(run: Run, calls: list[ToolCall], idx: int) -> int:
    """How many calls from ``idx`` on may run together: consecutive read-only calls."""
    if not run.s.parallel_tool_calls or not _read_only(run, calls[idx].name):
        return 1
    end = idx + 1
    while end < len(calls) and _read_only(run, calls[end].name):
        end += 1
    return end - idx


def _read_only(run: Run, name: str) -> bool:
    if name == RESULT_READ_TOOL and run.own_result_reader:
        return True
    get = getattr(run.tools, "get", None)
    tool = get(name) if callable(get) and name in run.offered else None
    return bool(getattr(tool, "read_only", False))


async def _run_batch(
    run: Run, calls: list[ToolCall], start: int, size: int, r: _Response
) -> _Next | ExecutorResult:
    """Approve each call of the batch in order, run the approved ones, record all in order."""
    entries: list[_Approved | _Deferred] = []
    for idx in range(start, start + size):
        head = r.head if idx == 0 else {}
        entry = await _approve(run, calls[idx], idx, idx == r.calls - 1, head, r)
        if isinstance(entry, ExecutorResult):
            return entry
        entries.append(entry)
        if isinstance(entry, _Deferred) and entry.then is _Next.BREAK:
            break
    approved = [e for e in entries if isinstance(e, _Approved)]
    runs = [_execute(run, a.call.name, a.exec_input, a.approved) for a in approved]
    results = iter(await asyncio.gather(*runs) if len(runs) > 1 else [await c for c in runs])
    outcome = _Next.CONTINUE
    for entry in entries:
        if isinstance(entry, _Deferred):
            run.record(entry.step)
            outcome = entry.then
            if outcome is _Next.BREAK:
                break
            continue
        head = r.head if entry.idx == 0 else {}
        done = await _complete(run, entry, next(results), entry.idx == r.calls - 1, head, r)
        if isinstance(done, ExecutorResult) or done is _Next.BREAK:
            return done
    return outcome


async def _finish_call(
    run: Run, call: ToolCall, idx: int, head: dict[str, Any], tokens: int, group: int
) -> Flow | ExecutorResult | None:
    try:
        answer = parse_finish_answer(call.input)
    except ValueError as exc:
        verdict = check_parse_error(run, FINISH_TOOL_NAME, True, True)
        observation = str(exc)
        if verdict is Verdict.ABORT:
            return await _parse_abort(run, call, idx, head, tokens, group, observation)
        run.diag(
            "parse_error_nudge",
            tool=FINISH_TOOL_NAME,
            consecutive_parse_errors=run.counters.parse_count,
        )
        observation += "\n\n" + nudges.parse_error_note(
            run.counters.parse_count, observation, call.input
        )
        run.record(_step(head, call, observation, True, tokens, group))
        return None
    return await attempt_finish(
        run, answer, call=call, call_idx=idx, head=head, tokens=tokens, group=group
    )


async def _approve(
    run: Run, call: ToolCall, idx: int, last: bool, head: dict[str, Any], r: _Response
) -> _Approved | _Deferred | ExecutorResult:
    """Announce the call, check it is not a repeat, and ask the HITL handler."""
    name, raw = call.name, call.input
    source = run.source_of(name)
    run.emit("tool_call", run.step, idx, _display_name(run, call), raw, source)

    key = call_key(name, raw)
    verdict = check_repeat(run, key)
    if verdict is not Verdict.OK:
        return await _repeat_intercept(run, call, idx, head, r.tokens, r.group, verdict)

    decision = await _ask_human(run, name, raw) if run.asks_tool_calls else None
    if decision is None:
        return _Approved(call, idx, key, source, raw, approved=False)
    if not decision.allow:
        observation = f"[Tool call rejected: {decision.reason or 'rejected by user'}]"
        if last:
            observation = _join(observation, await verification_note(run))
        run.emit("tool_result", run.step, idx, len(observation), observation, True)
        return _Deferred(_step(head, call, observation, True, r.tokens, r.group), _Next.REJECTED)
    return _Approved(call, idx, key, source, decision.modified_input or raw, approved=True)


async def _ask_human(run: Run, name: str, raw: str) -> HITLToolDecision | None:
    """``on_tool_call``, with the call's policy and any judge's reason on the context."""
    review_of = getattr(run.tools, "review", None)
    review = review_of(run.tool_ctx, name, raw) if callable(review_of) else None
    ctx = run.ctx
    if isinstance(review, ToolReview):
        ctx = ctx.replace(tool_policy=review.policy, tool_review=review.reason)
    return await run.s.hitl.on_tool_call(ctx, name, raw)


async def _complete(
    run: Run, a: _Approved, result: ToolResult, last: bool, head: dict[str, Any], r: _Response
) -> _Next | ExecutorResult:
    """Run the breakers on a result, process it into an observation, and record the step."""
    name = a.call.name
    note_result(run.counters, a.key, result.is_error)
    content, is_error = valid_text(result.content), result.is_error
    untrusted = (name == RESULT_READ_TOOL and run.own_result_reader) or run.tools.is_tool_untrusted(
        name
    )

    # Breakers look at the raw result; one call trips at most one of them.
    breaker, verdict = "fruitless", check_fruitless(run, name, content, is_error)
    if verdict is Verdict.OK:
        breaker, verdict = "same_tool", check_same_tool(run, name, a.key, content, is_error)
    observation = content or "(no output)"
    if verdict is Verdict.OK:
        is_parse_error = is_error and PARSE_ERROR_PREFIX in content
        verdict = check_parse_error(run, name, is_parse_error, is_error)
        if verdict is Verdict.NUDGE:
            run.diag(
                "parse_error_nudge",
                tool=name,
                consecutive_parse_errors=run.counters.parse_count,
            )
            observation += "\n\n" + nudges.parse_error_note(
                run.counters.parse_count, content, a.exec_input
            )
            verdict = Verdict.OK
        breaker = "parse_error"

    observation, cache_hash = process_tool_result(
        run, name, a.exec_input, content, observation, a.source
    )
    note_call(run, name, is_error)
    if last and run.verify_pending:
        observation = _join(observation, await verification_note(run))
    run.emit("tool_result", run.step, a.idx, len(observation), observation, is_error)
    step = Step(
        **head,
        action=a.call,
        observation=observation,
        is_error=is_error,
        tokens_used=r.tokens,
        response_group=r.group,
        is_untrusted=untrusted,
        cache_hash=cache_hash,
    )
    extras = _pre_compaction_warning(run, observation) if last else ""
    step.observation += extras + checklist.batching_suffix(run, step)

    if verdict is Verdict.OK:
        run.record(step)
        return _Next.CONTINUE
    return await _breaker_trip(run, step, breaker, verdict)


async def _execute(run: Run, name: str, input: str, approved: bool) -> ToolResult:
    """Run one tool; every failure becomes an error result (cancellation propagates)."""
    if name not in run.offered:
        available = ", ".join(sorted(run.offered))
        return ToolResult(f"tool not found: {name}. Available tools: {available}", is_error=True)
    ctx = run.tool_ctx.replace(tool_call_approved=True) if approved else run.tool_ctx
    if name == RESULT_READ_TOOL and run.own_result_reader:
        return await guarded_execute(name, lambda: run.result_reader.execute(ctx, input), run.log)
    if run.tools_never_raise:
        return await run.tools.execute(ctx, name, input)
    return await guarded_execute(name, lambda: run.tools.execute(ctx, name, input), run.log)


async def _repeat_intercept(
    run: Run,
    call: ToolCall,
    idx: int,
    head: dict[str, Any],
    tokens: int,
    group: int,
    verdict: Verdict,
) -> _Deferred | ExecutorResult:
    """An identical call was repeated: it does not run; nudge, or abort unless reprieved."""
    count = run.counters.repeat_count
    if verdict is Verdict.NUDGE:
        message = nudges.repeat_nudge(call.name, count, run.counters.repeat_last_error)
        run.diag("repeated_tool_call_nudge", tool=call.name, repeat_count=count)
        run.emit("tool_result", run.step, idx, len(message), message, True)
        return _Deferred(_step(head, call, message, True, tokens, group), _Next.BREAK)
    run.diag("repeated_tool_call_abort", tool=call.name, repeat_count=count)
    message = nudges.repeat_abort(call.name, count)
    run.emit("tool_result", run.step, idx, len(message), message, True)
    nudge = await reprieve(run, "repeat")
    if nudge is None:
        return await _end(run, message, ExitReason.REPEAT_ABORT)
    step = _step(
        head, call, "Not executed: " + message.removeprefix("Aborted: "), True, tokens, group
    )
    step.user_nudge = nudge
    return _Deferred(step, _Next.BREAK)


async def _breaker_trip(
    run: Run, step: Step, breaker: str, verdict: Verdict
) -> _Next | ExecutorResult:
    """A breaker tripped on an executed call: record the call, then nudge or abort."""
    assert step.action is not None
    t = describe_trip(run, breaker, step.action.name)
    if verdict is Verdict.NUDGE:
        step.user_nudge = t.nudge
        run.diag(t.nudge_event, **t.details)
        run.record(step)
        return _Next.BREAK
    run.diag(t.abort_event, **t.details)
    nudge = await reprieve(run, breaker)
    step.user_nudge = nudge or ""
    run.record(step)
    if nudge is None:
        return await _end(run, t.abort, t.exit_reason)
    return _Next.BREAK


async def _parse_abort(
    run: Run,
    call: ToolCall,
    idx: int,
    head: dict[str, Any],
    tokens: int,
    group: int,
    observation: str,
) -> Flow | ExecutorResult | None:
    step = _step(head, call, observation, True, tokens, group)
    outcome = await _breaker_trip(run, step, "parse_error", Verdict.ABORT)
    if isinstance(outcome, ExecutorResult):
        return outcome
    return Flow.INTERCEPTED


async def _end(run: Run, output: str, reason: ExitReason) -> ExecutorResult:
    """End the run mid-response: verify pending edits, commit, return unfinished."""
    await flush_verification(run)
    return run.result(output, reason, finished=False)


def _pre_compaction_warning(run: Run, observation: str) -> str:
    """Once the context nears compaction, name the outputs about to be pruned or dropped.

    The fill is projected with this response's results, which are not in the context yet:
    a large result can carry the fill past the warning and the compaction threshold at once.
    """
    percent = run.s.pre_warning_percent
    if percent <= 0 or run.pre_warning_done:
        return ""
    fill = run.cw.check_fill()
    if fill.status != "ok" or fill.max <= 0:
        return ""
    adding = run.pending_tokens() + run.s.token_counter.count(observation)
    projected = fill.percent + adding / fill.max * 100
    if projected < percent:
        return ""
    outputs = run.cw.vulnerable_outputs()
    if not outputs:
        return ""
    run.pre_warning_done = True
    run.diag("pre_compaction_nudge", fill_percent=projected, vulnerable_count=len(outputs))
    return "\n\n" + nudges.pre_compaction_warning(
        projected, [(o.tool_name, o.input_hint) for o in outputs]
    )


def _display_name(run: Run, call: ToolCall) -> str:
    """``"<tool> (cached)"`` for a ``tool_result_read`` of a known hash, else the name."""
    if call.name != RESULT_READ_TOOL or run.cache is None:
        return call.name
    try:
        data = json.loads(call.input)
    except json.JSONDecodeError:
        return call.name
    key = data.get("hash") if isinstance(data, dict) else None
    entry = run.cache.lookup(key) if isinstance(key, str) else None
    return f"{entry.tool_name} (cached)" if entry is not None else call.name


def _step(
    head: dict[str, Any], call: ToolCall, observation: str, is_error: bool, tokens: int, group: int
) -> Step:
    return Step(
        **head,
        action=call,
        observation=observation,
        is_error=is_error,
        tokens_used=tokens,
        response_group=group,
    )


def _join(observation: str, note: str) -> str:
    return f"{observation}\n\n{note}" if note else observation
