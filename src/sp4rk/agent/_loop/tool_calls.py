"""Tool execution: each call of a response, in the model's order, through the pipeline.

The pipeline: repeat check, approval, the tool, the breakers, result processing.

A response's steps are committed to the trajectory together once the response is done; if the
run is cancelled mid-response, the calls that completed are kept (the rendered assistant turn
lists only recorded calls, so the history stays valid).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from sp4rk._internal import safejson
from sp4rk._internal.text import valid_text
from sp4rk.agent._loop import checklist, nudges
from sp4rk.agent._loop.budget import take_tool_call, tool_within_deadline
from sp4rk.agent._loop.finish import attempt_finish
from sp4rk.agent._loop.outcomes import (
    BROKE_OFF,
    COMPLETED,
    FINISH_REFUSED,
    INTERCEPTED,
    RAN,
    REJECTED,
    CallOutcome,
    EndRun,
    NextCall,
    StepOutcome,
)
from sp4rk.agent._loop.reply import Reply
from sp4rk.agent._loop.reprieve import ask_reprieve
from sp4rk.agent._loop.results import process_tool_result
from sp4rk.agent._loop.scope import RunScope
from sp4rk.agent._loop.toolbox import RESULT_READ_TOOL
from sp4rk.agent._loop.verification import flush_verification, note_call, verification_note
from sp4rk.agent.audit import AuditEntry, Decision
from sp4rk.agent.breakers import Breaker, CallResult, Verdict, call_key
from sp4rk.agent.events import ToolErrorType
from sp4rk.agent.hitl import HITLToolDecision
from sp4rk.agent.taint import escalation
from sp4rk.agent.types import ExitReason, NudgeKind, Step
from sp4rk.llm.types import ChatResponse, ToolCall
from sp4rk.tools.base import PARSE_ERROR_PREFIX, ToolPolicy, ToolResult, ToolReview
from sp4rk.tools.builtins.finish import FINISH_TOOL_NAME, parse_finish_answer
from sp4rk.tools.result_cache import compute_tool_result_hash


async def run_tool_calls(run: RunScope, response: ChatResponse) -> StepOutcome:
    """Process every tool call of ``response``; return how the step ended."""
    run.state.breakers.truncation.on_complete_response()
    calls = response.message.tool_calls
    reply = Reply.of(response, run.state.next_response_group())
    if run.journal is not None:
        run.journal.on_response(run.step, response)
    intercepted = False
    idx = 0
    while idx < len(calls):
        if calls[idx].name == FINISH_TOOL_NAME:
            size, outcome = 1, await _finish_call(run, calls[idx], idx, reply)
        else:
            size = _concurrent_batch(run, calls, idx)
            outcome = await _run_batch(run, calls, idx, size, reply)
        if isinstance(outcome, EndRun):
            return outcome
        intercepted = intercepted or outcome.intercepted
        if outcome.skip_rest:
            break
        idx += size
    if run.state.verify_pending:
        await flush_verification(run)
    run.trajectory.commit()
    return INTERCEPTED if intercepted else COMPLETED


@dataclass(slots=True)
class _Deferred:
    """A call answered without running (rejected or intercepted): its step and what follows."""

    step: Step
    then: NextCall


@dataclass(slots=True)
class _Approved:
    """A call that passed the repeat check and approval, ready to run."""

    call: ToolCall
    idx: int
    key: str
    source: str
    exec_input: str
    approved: bool


def _concurrent_batch(run: RunScope, calls: list[ToolCall], idx: int) -> int:
    """How many calls from ``idx`` on may run together: consecutive read-only calls."""
    if not run.settings.parallel_tool_calls or not _read_only(run, calls[idx].name):
        return 1
    end = idx + 1
    while end < len(calls) and _read_only(run, calls[end].name):
        end += 1
    return end - idx


def _read_only(run: RunScope, name: str) -> bool:
    return name in run.tools.offered and run.tools.traits(name).read_only


async def _run_batch(
    run: RunScope, calls: list[ToolCall], start: int, size: int, reply: Reply
) -> CallOutcome:
    """Approve each call of the batch in order, run the approved ones, record all in order."""
    last = len(calls) - 1
    entries: list[_Approved | _Deferred] = []
    for idx in range(start, start + size):
        entry = await _approve(run, calls[idx], idx, idx == last, reply)
        if isinstance(entry, _Approved) and (spent := await take_tool_call(run)) is not None:
            entry = await _end(run, spent.output, spent.exit_reason)  # the budget is used up
        if isinstance(entry, EndRun):
            return entry
        entries.append(entry)
        if isinstance(entry, _Deferred) and entry.then.skip_rest:
            break
    approved = [e for e in entries if isinstance(e, _Approved)]
    runs = [_execute(run, a) for a in approved]
    results = iter(await asyncio.gather(*runs) if len(runs) > 1 else [await c for c in runs])
    outcome = RAN
    for entry in entries:
        if isinstance(entry, _Deferred):
            run.trajectory.record(entry.step)
            outcome = entry.then
            if outcome.skip_rest:
                break
            continue
        done = await _complete(run, entry, next(results), entry.idx == last, reply)
        if done is not RAN:
            return done
    return outcome


async def _finish_call(run: RunScope, call: ToolCall, idx: int, reply: Reply) -> CallOutcome:
    try:
        answer = parse_finish_answer(call.input)
    except ValueError as exc:
        return await _finish_parse_error(run, call, idx, reply, str(exc))
    outcome = await attempt_finish(run, answer, reply, call=call, call_idx=idx)
    return outcome if isinstance(outcome, EndRun) else FINISH_REFUSED


async def _finish_parse_error(
    run: RunScope, call: ToolCall, idx: int, reply: Reply, error: str
) -> CallOutcome:
    """A finish call whose input is not a valid answer: a parse error like any other."""
    breaker = run.state.breakers.parse_error
    seen = CallResult(tool=FINISH_TOOL_NAME, key="", content=error, is_error=True, parse_error=True)
    verdict = breaker.observe(seen, run.settings.circuit_breaker)
    step = reply.step(first=idx == 0, action=call, observation=error, is_error=True)
    if verdict is Verdict.ABORT:
        return await _breaker_trip(run, step, breaker, verdict)
    run.diag("parse_error_nudge", tool=FINISH_TOOL_NAME, consecutive_parse_errors=breaker.count)
    step.observation += "\n\n" + nudges.parse_error_note(breaker.count, error, call.input)
    run.trajectory.record(step)
    return RAN


async def _approve(
    run: RunScope, call: ToolCall, idx: int, last: bool, reply: Reply
) -> _Approved | _Deferred | EndRun:
    """Announce the call, check it is not a repeat, and get it approved when it must be.

    After untrusted content, a risky call needs an explicit approval whatever its policy
    (taint-aware approvals); every decision on a call that needed one goes to the audit log.
    """
    name, raw = call.name, call.input
    source = run.tools.source_of(name)
    run.events.tool_call(run.step, idx, _display_name(run, call), raw, source)

    key = call_key(name, raw)
    verdict = run.state.breakers.repeat.before_call(
        key, run.tools.traits(name), run.settings.circuit_breaker
    )
    if verdict is not Verdict.OK:
        return await _repeat_intercept(run, call, idx, reply, verdict)

    taint = run.state.taint
    tainted = run.settings.taint_policy.enabled and taint.active_at(run.step)
    wants_review = run.asks_tool_calls or tainted or run.settings.audit_log is not None
    review = _review(run, name, raw) if wants_review else None
    confirm = review is not None and review.policy is ToolPolicy.USER_CONFIRM
    why = (review.reason or "its policy asks for confirmation") if confirm and review else ""
    if tainted:
        risky = "" if confirm else _taint_risk(run, name, raw)
        why = f"{why}, {taint.note()}" if confirm else f"{risky}, {taint.note()}" if risky else ""
    if not why:  # nothing needs approving: the human may still look (and reject or edit)
        decision = await _ask_human(run, name, raw, review, "") if run.asks_tool_calls else None
        if decision is None or (decision.allow and not decision.modified_input):
            return _Approved(call, idx, key, source, raw, approved=decision is not None)
    else:
        decision = await _ask_human(run, name, raw, review, why)
        if decision is None:  # nobody approved a call that needs it: it does not run
            await _audit(run, call, idx, raw, "refused", None, why)
            observation = nudges.not_approved(name, why, injected=tainted)
            return await _refuse(run, call, idx, last, reply, observation, "not_approved")
    if not decision.allow:
        await _audit(run, call, idx, raw, "rejected", decision, why or "the human's own review")
        reason = decision.reason or "rejected by user"
        observation = f"[Tool call rejected: {reason}]"
        return await _refuse(run, call, idx, last, reply, observation, "rejected")
    ran = decision.modified_input or raw
    kind: Decision = "modified" if ran != raw else "approved"
    await _audit(run, call, idx, ran, kind, decision, why or "the human's own review")
    return _Approved(call, idx, key, source, ran, approved=True)


def _review(run: RunScope, name: str, raw: str) -> ToolReview | None:
    """The tool executor's review of a call; one that fails asks for a human (fail closed)."""
    try:
        return run.tools.review(run.tool_ctx, name, raw)
    except Exception as exc:
        run.log.warning("reviewing a %s call failed; asking for approval", name, exc_info=True)
        return ToolReview(ToolPolicy.USER_CONFIRM, f"its review failed ({type(exc).__name__})")


def _taint_risk(run: RunScope, name: str, raw: str) -> str:
    """What an otherwise allowed call could do that matters after untrusted content."""
    try:
        risk = run.tools.risk(run.tool_ctx, name, raw)
    except Exception as exc:
        run.log.warning("judging the risk of a %s call failed", name, exc_info=True)
        risk = f"its risk could not be judged ({type(exc).__name__})"
    return escalation(
        run.settings.taint_policy, run.tools.traits(name), risk, raw, run.ctx.workspace
    )


async def _refuse(
    run: RunScope,
    call: ToolCall,
    idx: int,
    last: bool,
    reply: Reply,
    observation: str,
    error: ToolErrorType,
) -> _Deferred:
    """A call that does not run: its error observation (closing a pending verification)."""
    if last:
        observation = _join(observation, await verification_note(run))
    run.events.tool_done(run.step, idx, call, observation, error=error)
    step = reply.step(first=idx == 0, action=call, observation=observation, is_error=True)
    return _Deferred(step, REJECTED)


async def _ask_human(
    run: RunScope, name: str, raw: str, review: ToolReview | None, why: str
) -> HITLToolDecision | None:
    """``on_tool_call``, with the call's policy and why it needs approval on the context."""
    ctx = run.ctx
    if why:
        ctx = ctx.replace(tool_policy=ToolPolicy.USER_CONFIRM, tool_review=why)
    elif review is not None:
        ctx = ctx.replace(tool_policy=review.policy, tool_review=review.reason)
    return await run.settings.hitl.on_tool_call(ctx, name, raw)


async def _audit(
    run: RunScope,
    call: ToolCall,
    idx: int,
    arguments: str,
    decision: Decision,
    by: HITLToolDecision | None,
    reason: str,
) -> None:
    """Append one approval decision to the audit log (if the host keeps one) and report it."""
    log = run.settings.audit_log
    run.log.debug("approval %s for %s at step %d: %s", decision, call.name, run.step, reason)
    if log is None and not run.events.listens("approval"):
        return
    entry = AuditEntry.now(
        step=run.step,
        tool=call.name,
        call_id=call.id,
        arguments=arguments,
        decision=decision,
        decided_by="policy" if by is None else f"hitl:{type(run.settings.hitl).__name__}",
        reason=reason,
        plan_step_id=run.settings.plan_step_id,
    )
    if log is not None:
        await asyncio.to_thread(log.record, entry)  # a file log writes and syncs: off the loop
    run.events.approval(run.step, idx, entry)


async def _execute(run: RunScope, a: _Approved) -> ToolResult:
    if run.journal is not None:
        run.journal.on_call_start(run.step, a.call)
    ctx = run.tool_ctx.replace(tool_call_approved=True) if a.approved else run.tool_ctx
    run.events.tool_execute_start(run.step, a.idx)
    try:
        return await tool_within_deadline(run, run.tools.execute(ctx, a.call.name, a.exec_input))
    finally:
        run.events.tool_execute_end(run.step, a.idx)


async def _complete(
    run: RunScope, a: _Approved, result: ToolResult, last: bool, reply: Reply
) -> CallOutcome:
    """Run the breakers on a result, process it into an observation, and record the step."""
    name = a.call.name
    traits = run.tools.traits(name)
    content, is_error = valid_text(result.content), result.is_error
    digest = compute_tool_result_hash(name, content)
    seen = CallResult(
        tool=name,
        key=a.key,
        content=content,
        is_error=is_error,
        retryable=is_error and result.retryable,
        parse_error=is_error and (result.parse_error or content.startswith(PARSE_ERROR_PREFIX)),
        traits=traits,
        digest=digest,
    )
    # Breakers look at the raw result; one call trips at most one of them.
    breaker, verdict = run.state.breakers.observe_result(seen, run.settings.circuit_breaker)
    # The observation is the tool's text, then sp4rk's own notes (kept outside any wrapper).
    body, notes, cache_hash = process_tool_result(
        run, name, a.exec_input, content, content or "(no output)", a.source, digest
    )
    if verdict is Verdict.NUDGE and breaker is run.state.breakers.parse_error:
        run.diag("parse_error_nudge", tool=name, consecutive_parse_errors=breaker.count)
        notes += "\n\n" + nudges.parse_error_note(breaker.count, content, a.exec_input)
        verdict = Verdict.OK
    note_call(run, name, is_error=is_error)
    if last and run.state.verify_pending:
        notes = _join(notes, await verification_note(run))
    observation = body + notes
    run.events.tool_done(
        run.step,
        a.idx,
        a.call,
        observation,
        error=("parse_error" if seen.parse_error else "tool_error") if is_error else None,
        arguments=a.exec_input,
        approved=a.approved,
        truncated=body != (content or "(no output)"),
        cached=name == RESULT_READ_TOOL,
    )
    step = reply.step(first=a.idx == 0, action=a.call, observation=observation, is_error=is_error)
    untrusted = run.tools.is_untrusted(name)
    step.is_untrusted = untrusted and not result.self_wrapped  # wrapped by the tool itself
    step.cache_hash = cache_hash
    if run.settings.taint_policy.taints(name, traits, untrusted):
        where = name if a.source in ("", "core") else f"MCP server {a.source!r} ({name})"
        run.state.taint.observe(where, run.step)
    extras = _pre_compaction_warning(run, observation) if last else ""
    extras += checklist.batching_suffix(run, step)
    step.observation += extras
    step.notes_length = len(notes) + len(extras)

    if verdict is Verdict.OK:
        run.trajectory.record(step)
        return RAN
    return await _breaker_trip(run, step, breaker, verdict)


async def _repeat_intercept(
    run: RunScope, call: ToolCall, idx: int, reply: Reply, verdict: Verdict
) -> _Deferred | EndRun:
    """An identical call was repeated: it does not run; nudge, or abort unless reprieved."""
    breaker = run.state.breakers.repeat
    run.state.breakers.no_progress.count_unrun_repeat()
    trip = breaker.trip(call.name)
    if verdict is Verdict.NUDGE:
        run.diag(trip.nudge_event, **trip.details)
        run.events.tool_done(run.step, idx, call, trip.nudge, error="repeated_call")
        step = reply.step(first=idx == 0, action=call, observation=trip.nudge, is_error=True)
        return _Deferred(step, BROKE_OFF)
    run.diag(trip.abort_event, **trip.details)
    run.events.tool_done(run.step, idx, call, trip.abort, error="repeated_call")
    nudge = await ask_reprieve(run, breaker)
    if nudge is None:
        return await _end(run, trip.abort, trip.exit_reason)
    observation = "Not executed: " + trip.abort.removeprefix("Aborted: ")
    step = reply.step(first=idx == 0, action=call, observation=observation, is_error=True)
    step.user_nudge, step.nudge_kind = nudge, NudgeKind.REPRIEVE
    return _Deferred(step, BROKE_OFF)


async def _breaker_trip(
    run: RunScope, step: Step, breaker: Breaker, verdict: Verdict
) -> CallOutcome:
    """A breaker tripped on an executed call: record the call, then nudge or abort."""
    trip = breaker.trip(step.tool_name)
    if verdict is Verdict.NUDGE:
        step.user_nudge, step.nudge_kind = trip.nudge, NudgeKind.BREAKER
        run.diag(trip.nudge_event, **trip.details)
        run.trajectory.record(step)
        return BROKE_OFF
    run.diag(trip.abort_event, **trip.details)
    nudge = await ask_reprieve(run, breaker)
    if nudge is not None:
        step.user_nudge, step.nudge_kind = nudge, NudgeKind.REPRIEVE
    run.trajectory.record(step)
    if nudge is None:
        return await _end(run, trip.abort, trip.exit_reason)
    return BROKE_OFF


async def _end(run: RunScope, output: str, reason: ExitReason) -> EndRun:
    """End the run mid-response: verify pending edits first."""
    await flush_verification(run)
    return EndRun(output, reason)


def _pre_compaction_warning(run: RunScope, observation: str) -> str:
    """Once the context nears compaction, name the outputs about to be pruned or dropped.

    The fill is projected with this response's results, which are not in the context yet:
    a large result can carry the fill past the warning and the compaction threshold at once.
    """
    percent = run.settings.pre_warning_percent
    if percent <= 0 or run.state.nudges.pre_warning_given:
        return ""
    fill = run.cw.check_fill()
    if fill.status != "ok" or fill.max <= 0:
        return ""
    counter = run.settings.token_counter
    adding = run.trajectory.pending_tokens(counter) + counter.count(observation)
    projected = fill.percent + adding / fill.max * 100
    if projected < percent:
        return ""
    outputs = run.cw.vulnerable_outputs()
    if not outputs:
        return ""
    run.state.nudges.give_pre_warning()
    run.diag("pre_compaction_nudge", fill_percent=projected, vulnerable_count=len(outputs))
    return "\n\n" + nudges.pre_compaction_warning(
        projected, [(o.tool_name, o.input_hint) for o in outputs]
    )


def _display_name(run: RunScope, call: ToolCall) -> str:
    """``"<tool> (cached)"`` for a ``tool_result_read`` of a known hash, else the name."""
    if run.cache is None or call.name != RESULT_READ_TOOL:
        return call.name
    try:
        data = safejson.loads(call.input)
    except ValueError:
        return call.name
    key = data.get("hash") if isinstance(data, dict) else None
    entry = run.cache.lookup(key) if isinstance(key, str) else None
    return f"{entry.tool_name} (cached)" if entry is not None else call.name


def _join(text: str, note: str) -> str:
    return f"{text}\n\n{note}" if note else text
