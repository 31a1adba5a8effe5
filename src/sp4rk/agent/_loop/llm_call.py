"""The LLM call: build the request, stream the reply, compact and retry on overflow."""

from __future__ import annotations

from sp4rk.agent._loop.state import Run
from sp4rk.llm.errors import ContextWindowExceededError
from sp4rk.llm.types import ChatRequest, ChatResponse

#: Compactions allowed within one step after the provider reported an overflow.
MAX_REACTIVE_COMPACTIONS = 2


async def call_llm(run: Run) -> ChatResponse:
    """Send the current prompt; on ``ContextWindowExceededError`` compact and retry in place.

    Raises:
        ContextWindowExceededError: when compaction freed nothing or a third overflow came.
        LLMError: any other provider failure, unchanged.
    """
    compactions = 0
    if run.cw.check_fill().status == "reject":
        # A resumed checkpoint or a shrunk window: never send a prompt known not to fit.
        await _compact(run)
    while True:
        request = ChatRequest(
            messages=run.cw.build_prompt(),
            tools=run.definitions,
            max_tokens=run.cw.output_limit(),
            call_purpose="executor",
            reasoning_effort=run.s.reasoning_effort,
        )
        try:
            response = await _send(run, request)
        except ContextWindowExceededError as exc:
            if compactions >= MAX_REACTIVE_COMPACTIONS:
                raise
            compactions += 1
            run.diag("reactive_compaction_api_error", error=str(exc), attempt=compactions)
            if not await _compact(run):
                raise ContextWindowExceededError(
                    f"{exc} (the context manager had nothing to compact; give it a larger "
                    "window or lower the tool output limits)",
                    status_code=exc.status_code,
                ) from exc
            continue
        if run.consumes_interjections:
            run.cw.consume_pending_user_interjection()  # type: ignore[attr-defined]
        if response.usage.input_tokens > 0:
            run.cw.correct_token_count(response.usage.input_tokens)
        return response


async def _compact(run: Run) -> bool:
    """Compact the context now; report whether anything was done."""
    result = await run.cw.compact()
    if result is None:
        return False
    run.emit("context_compaction", result.before_percent, result.after_percent, run.s.plan_step_id)
    run.pre_warning_done = False
    return True


async def _send(run: Run, request: ChatRequest) -> ChatResponse:
    suppress = run.s.suppress_assistant_events
    streamed = False

    def on_text(delta: str) -> None:
        nonlocal streamed
        streamed = True
        if not suppress and delta:
            run.emit("assistant_chunk", delta)

    if run.streams:
        response = await run.llm.call_stream(request, on_text)  # type: ignore[attr-defined]
    else:
        response = await run.llm.call(request)
    if not isinstance(response, ChatResponse):
        raise TypeError(
            f"the LLM caller returned {type(response).__name__}, expected a ChatResponse"
        )
    if not suppress:
        text = response.message.content
        if text and not streamed:
            run.emit("assistant_chunk", text)
        run.emit("assistant_done", text, response.usage.input_tokens, response.usage.output_tokens)
    return response
