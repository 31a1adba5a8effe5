"""The LLM call: the budget pre-flight, the request, the reply, compaction on overflow."""

from __future__ import annotations

import time

from sp4rk.agent._loop.budget import reserve_call, send_within_budget
from sp4rk.agent._loop.outcomes import EndRun
from sp4rk.agent._loop.scope import RunScope
from sp4rk.agent.account import Hold
from sp4rk.llm.errors import ContextWindowExceededError
from sp4rk.llm.ingest import checked_response
from sp4rk.llm.types import ChatRequest, ChatResponse

#: Compactions allowed within one step after the provider reported an overflow.
MAX_REACTIVE_COMPACTIONS = 2


async def call_llm(run: RunScope) -> ChatResponse | EndRun:
    """Send the current prompt; on ``ContextWindowExceededError`` compact and retry in place.

    With a budget, each call is reserved first (``EndRun`` when a limit is reached and the
    human grants no more) and cut at the wall-clock deadline (then the next pre-flight asks).
    The whole of it, retries included, is one model call for ``model_call_start``/``_end``.

    Raises:
        ContextWindowExceededError: when compaction freed nothing or a third overflow came.
        LLMError: any other provider failure, unchanged.
    """
    run.events.model_call_start(run.step)
    started = time.perf_counter()
    sent: list[ChatRequest] = []
    try:
        response = await _call_with_retries(run, sent)
    except BaseException as exc:
        _report(run, sent, None, exc, started)
        raise
    if isinstance(response, ChatResponse):
        _report(run, sent, response, None, started)
    return response


def _report(
    run: RunScope,
    sent: list[ChatRequest],
    response: ChatResponse | None,
    error: BaseException | None,
    started: float,
) -> None:
    run.events.model_call_end(
        run.step,
        sent[-1] if sent else None,
        response,
        error,
        attempts=len(sent),
        duration=time.perf_counter() - started,
    )


async def _call_with_retries(run: RunScope, sent: list[ChatRequest]) -> ChatResponse | EndRun:
    """The call itself; every request is appended to ``sent`` before it goes out."""
    compactions = 0
    if run.cw.check_fill().status == "reject":
        # A resumed checkpoint or a shrunk window: never send a prompt known not to fit.
        await compact_now(run)
    while True:
        hold: Hold | None = None
        if run.budget.limited:
            reserved = await reserve_call(run)
            if isinstance(reserved, EndRun):
                return reserved
            hold = reserved
        request = ChatRequest(
            messages=run.cw.build_prompt(),
            tools=run.tools.definitions,
            max_tokens=run.cw.output_limit(),
            call_purpose="executor",
            reasoning_effort=run.settings.reasoning_effort,
        )
        sent.append(request)
        try:
            response = await send_within_budget(run, hold, request, _send(run, request))
        except ContextWindowExceededError as exc:
            if compactions >= MAX_REACTIVE_COMPACTIONS:
                raise
            compactions += 1
            run.diag("reactive_compaction_api_error", error=str(exc), attempt=compactions)
            if not await compact_now(run):
                raise ContextWindowExceededError(
                    f"{exc} (the context manager had nothing to compact; give it a larger "
                    "window or lower the tool output limits)",
                    status_code=exc.status_code,
                ) from exc
            continue
        if response is None:  # cut at the time limit: the pre-flight asks for more
            continue
        if run.consumes_interjections:
            run.cw.consume_pending_user_interjection()  # type: ignore[attr-defined]
        if response.usage.input_tokens > 0:
            run.cw.correct_token_count(response.usage.input_tokens)
        return response


async def compact_now(run: RunScope) -> bool:
    """Compact the context now and report it; whether anything was done."""
    result = await run.cw.compact()
    if result is None:
        return False
    run.events.context_compaction(
        result.before_percent, result.after_percent, run.settings.plan_step_id
    )
    run.state.nudges.rearm_pre_warning()
    run.state.breakers.context_compacted()
    return True


async def _send(run: RunScope, request: ChatRequest) -> ChatResponse:
    suppress = run.settings.suppress_assistant_events
    streamed = False

    def on_text(delta: str) -> None:
        nonlocal streamed
        streamed = True
        if not suppress and delta:
            run.events.assistant_chunk(delta)

    if run.streams:
        reply = await run.llm.call_stream(request, on_text)  # type: ignore[attr-defined]
    else:
        reply = await run.llm.call(request)
    response = checked_response(reply)
    if not suppress:
        text = response.message.content
        if text and not streamed:
            run.events.assistant_chunk(text)
        run.events.assistant_done(text, response.usage.input_tokens, response.usage.output_tokens)
    return response
