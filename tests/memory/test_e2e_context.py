"""The executor driving a real ContextWindow. Every prompt it sends is validated.

``Provider`` plays the model: it checks each request with ``validate_history``, refuses a
prompt larger than its (real) window with ``ContextWindowExceededError`` as a provider would,
reports usage (the exact prompt size plus the tool definitions), and answers compaction
requests with a short summary.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from sp4rk.agent import (
    CompactionStrategy,
    Executor,
    ExecutorResult,
    RecordingEvents,
    ToolResultBudget,
)
from sp4rk.llm import (
    ChatRequest,
    ChatResponse,
    ContextWindowExceededError,
    SimpleTokenCounter,
    TokenUsage,
)
from sp4rk.llm.testing import FunctionLLM, finish_response, text_response, tool_calls_response
from sp4rk.memory import (
    ContextWindow,
    HierarchicalStrategy,
    SummarizationStrategy,
    validate_history,
)
from sp4rk.tools import Registry, tool

COUNTER = SimpleTokenCounter()
Decide = Callable[[int, ChatRequest], ChatResponse]


def page(i: int) -> str:
    """About 10 KB, different in content and size for each i."""
    line = f"page {i}: " + " ".join(f"w{(i * 7 + k) % 997}" for k in range(40))
    return "\n".join([line] * (48 + i % 5)) + "\n" + "t" * (i * 37 % 300)


def registry() -> Registry:
    @tool
    def fetch(page_no: int) -> str:
        """Fetch one page."""
        return page(page_no)

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return f"# {path}\n" + page(len(path))

    return Registry([fetch, read_file])


class Provider:
    """A scripted model with a real window, usage reports and history validation."""

    def __init__(
        self,
        decide: Decide,
        *,
        window: int = 32_000,
        summarize: Callable[[ChatRequest], str] | None = None,
    ) -> None:
        self.decide = decide
        self.window = window
        self.summarize = summarize or (lambda r: "summary: pages were fetched, nothing failed")
        self.sizes: list[int] = []  # accepted agent prompts, in tokens (messages + tools)
        self.overflows = 0
        self.compaction_calls = 0
        self.llm = FunctionLLM(self._call)

    def _call(self, request: ChatRequest) -> ChatResponse:
        if request.call_purpose == "compaction":
            self.compaction_calls += 1
            return text_response(self.summarize(request))
        validate_history(request.messages)
        tools = sum(COUNTER.count(json.dumps(t.to_dict())) for t in request.tools)
        size = COUNTER.count_messages(request.messages) + tools
        if size + request.max_tokens > self.window:
            self.overflows += 1
            raise ContextWindowExceededError(
                f"prompt is too long: {size} + {request.max_tokens} > {self.window}",
                status_code=400,
            )
        self.sizes.append(size)
        response = self.decide(len(self.sizes), request)
        response.usage = TokenUsage(input_tokens=size, output_tokens=20)
        return response


def fetch_then_finish(last: int) -> Decide:
    def decide(n: int, request: ChatRequest) -> ChatResponse:
        if n > last:
            return finish_response(f"fetched {last} pages")
        return tool_calls_response(("fetch", {"page_no": n}), thought=f"step {n}: fetch page {n}")

    return decide


def run(
    provider: Provider,
    cw: ContextWindow,
    *,
    max_steps: int = 100,
    setup: Callable[[Executor], None] | None = None,
    **kwargs: Any,
) -> tuple[ExecutorResult, RecordingEvents]:
    events = RecordingEvents()
    executor = Executor(provider.llm, registry(), max_steps, events=events, **kwargs)
    if setup is not None:
        setup(executor)
    result = executor.run_sync(registry().list(), cw)
    return result, events


def window(max_tokens: int = 32_000, **kw: Any) -> ContextWindow:
    return ContextWindow(
        max_tokens, 4096, system_prompt="You are a careful agent.", task="Read the pages.", **kw
    )


@pytest.mark.parametrize(
    "strategy",
    [None, "summary", "hierarchical"],
    ids=["masking", "summarization", "hierarchical"],
)
def test_a_thousand_steps_of_10kb_observations_in_a_32k_window(strategy: str | None) -> None:
    provider = Provider(fetch_then_finish(1000))
    chosen: CompactionStrategy | None = None
    if strategy == "summary":
        chosen = SummarizationStrategy(provider.llm)
    elif strategy == "hierarchical":
        chosen = HierarchicalStrategy(provider.llm)
    cw = window(strategy=chosen)
    started = time.perf_counter()
    result, events = run(provider, cw, max_steps=1100)
    elapsed = time.perf_counter() - started

    assert result.finished
    assert result.output == "fetched 1000 pages"
    assert len([s for s in result.steps if s.action is not None]) == 1001
    assert provider.overflows == 0
    assert len(provider.sizes) == 1001
    assert max(provider.sizes) + cw.output_limit() <= 32_000
    assert max(provider.sizes) <= cw.effective_max()
    compactions = events.of("context_compaction")
    assert compactions
    assert all(after < before for before, after, _ in compactions)
    if strategy is not None:
        assert provider.compaction_calls > 0
    print(
        f"\n{strategy or 'masking'}: {elapsed:.2f}s, max prompt {max(provider.sizes)} tokens, "
        f"{len(compactions)} compactions, {provider.compaction_calls} summary calls"
    )


def test_post_step_compaction_fires_fill_and_compaction_events() -> None:
    provider = Provider(fetch_then_finish(12), window=16_000)
    result, events = run(provider, window(16_000, keep_last_n=0), max_steps=20)
    assert result.finished
    assert provider.overflows == 0
    fills = events.of("context_fill")
    assert len(fills) == 12  # one per tool step (the finish step does not check)
    assert all(max_ == window(16_000).effective_max() for _, _, max_, _, _ in fills)
    statuses = [status for *_, status, _ in fills]
    assert "ok" in statuses
    assert statuses[-1] == "ok"
    compactions = events.of("context_compaction")
    assert compactions
    names = events.names()
    first = names.index("context_compaction")
    assert names[first - 1] == "context_fill"  # compaction follows the fill check
    crossing = [f for f in fills if f[3] != "ok"]
    assert crossing
    assert all(f[0] >= 85 for f in crossing)


def test_reactive_compaction_retries_the_same_step() -> None:
    """The model's real window is smaller than configured: its overflow triggers compaction."""
    provider = Provider(fetch_then_finish(10), window=20_000)
    cw = window(32_000, keep_last_n=0)  # no pruning: the prompt grows by a page per step
    result, events = run(provider, cw, max_steps=20)
    assert result.finished
    assert provider.overflows >= 1
    starts = [args[0] for args in events.of("step_start")]
    assert starts == sorted(set(starts))  # no step started twice
    assert events.diagnostics("reactive_compaction_api_error")
    assert len(events.of("context_compaction")) >= provider.overflows


def test_a_persistent_overflow_escalates_within_one_step() -> None:
    """Compacting once is not enough for the provider: the second compaction halves."""
    provider = Provider(fetch_then_finish(8), window=13_000)
    cw = window(32_000, keep_last_n=0, thresholds=(95, 97, 99))
    result, events = run(provider, cw, max_steps=20)
    assert result.finished
    attempts = [d["attempt"] for d in events.diagnostics("reactive_compaction_api_error")]
    assert 2 in attempts


def test_pre_compaction_warning_names_the_outputs_about_to_be_pruned() -> None:
    def decide(n: int, request: ChatRequest) -> ChatResponse:
        if n > 6:
            return finish_response("done")
        return tool_calls_response(("read_file", {"path": f"src/mod{n}.py"}))

    provider = Provider(decide)
    cw = window(32_000, keep_last_n=1, prune_threshold_percent=60)
    result, events = run(provider, cw, setup=lambda e: e.set_pre_warning_percent(20))
    assert result.finished
    warned = [s for s in result.steps if "These tool outputs will be pruned" in s.observation]
    assert len(warned) == 1
    text = warned[0].observation
    assert '- read_file("src/mod1.py")' in text
    assert "store_fact" in text
    (diag,) = events.diagnostics("pre_compaction_nudge")
    assert diag["fill_percent"] >= 20
    assert diag["vulnerable_count"] >= 1


class RecordingWindow(ContextWindow):
    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.corrections: list[int] = []

    def correct_token_count(self, api_input_tokens: int) -> None:
        self.corrections.append(api_input_tokens)
        super().correct_token_count(api_input_tokens)


def test_every_reported_usage_calibrates_the_window() -> None:
    provider = Provider(fetch_then_finish(4))
    cw = RecordingWindow(
        32_000, 4096, system_prompt="You are a careful agent.", task="Read the pages."
    )
    result, events = run(provider, cw)
    assert result.finished
    assert cw.corrections == provider.sizes
    # The fill the executor sees includes the tool definitions the provider counted.
    first_fill_used = events.of("context_fill")[0][1]
    assert first_fill_used > COUNTER.count_messages(cw.build_prompt()[:2])
    assert first_fill_used >= provider.sizes[0]


def test_an_observation_larger_than_the_window_degrades_instead_of_crashing() -> None:
    def decide(n: int, request: ChatRequest) -> ChatResponse:
        if n == 1:
            return tool_calls_response(("fetch", {"page_no": 10**6}))
        if n <= 4:
            return tool_calls_response(("fetch", {"page_no": n}))
        return finish_response("survived")

    @tool
    def fetch(page_no: int) -> str:
        """Fetch one page (page 1000000 is 1 MB)."""
        return "huge " * 200_000 if page_no == 10**6 else page(page_no)

    provider = Provider(decide, window=32_000)
    cw = window()
    events = RecordingEvents()
    executor = Executor(
        provider.llm,
        Registry([fetch]),
        10,
        events=events,
        tool_result_budget=ToolResultBudget(hard_cap_tokens=0),  # Stage 2 off: the raw 1 MB
    )
    result = executor.run_sync(Registry([fetch]).list(), cw)
    assert result.finished
    assert result.output == "survived"
    assert provider.overflows == 0
    assert max(provider.sizes) <= cw.effective_max()
    cut = [m for m in cw.build_prompt() if "cut to fit the context window" in m.content]
    masked = [m for m in cw.build_prompt() if "evicted to save context" in m.content]
    assert cut or masked


def test_a_failing_summarizer_degrades_to_masking() -> None:
    def broken(request: ChatRequest) -> str:
        raise RuntimeError("summary model unavailable")

    provider = Provider(fetch_then_finish(30), summarize=broken)
    cw = window(strategy=SummarizationStrategy(provider.llm, keep_last=2), keep_last_n=0)
    result, events = run(provider, cw, max_steps=40)
    assert result.finished
    assert provider.overflows == 0
    assert provider.compaction_calls >= 1
    assert events.of("context_compaction")
    assert any("evicted to save context" in m.content for m in cw.build_prompt())


def test_a_prompt_that_cannot_fit_at_all_raises_a_clear_error() -> None:
    provider = Provider(fetch_then_finish(3), window=8000)
    cw = ContextWindow(8000, 1000, system_prompt="rules " * 10_000, task="t")
    with pytest.raises(ContextWindowExceededError, match="cannot hold even the minimal prompt"):
        run(provider, cw)


def test_every_loop_path_sends_valid_histories() -> None:
    """Text replies, parallel calls, cut responses, repeats, unknown tools, bad finishes."""
    script: list[ChatResponse] = [
        text_response("I think I am done."),  # nudged: call finish explicitly
        tool_calls_response(("fetch", {"page_no": 1}), ("read_file", {"path": "a.py"})),
        tool_calls_response(("fetch", {"page_no": 2}), stop_reason="max_tokens"),  # not run
        tool_calls_response(("fetch", {"page_no": 3})),
        tool_calls_response(("fetch", {"page_no": 3})),
        tool_calls_response(("fetch", {"page_no": 3})),  # repeat nudge
        tool_calls_response(("nope", {})),  # unknown tool
        tool_calls_response(("finish", "{not json")),  # bad finish input
        tool_calls_response(
            ("read_file", {"path": "b.py"}), ("finish", {"answer": "all paths covered"})
        ),
    ]
    provider = Provider(lambda n, request: script[n - 1], window=12_000)
    cw = window(12_000, keep_last_n=1, prune_threshold_percent=20)
    result, _ = run(provider, cw, max_steps=30)
    assert result.finished
    assert result.output == "all paths covered"
    assert len(provider.sizes) == len(script)
