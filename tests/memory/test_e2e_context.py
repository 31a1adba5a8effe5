"""The executor driving a real ContextWindow. Every prompt it sends is validated.

``Provider`` plays the model: it checks each request with ``validate_history``, refuses a
prompt larger than its (real) window with ``ContextWindowExceededError`` as a provider would,
reports usage (the prompt size plus the tool definitions, times its tokenizer's ``ratio`` to
the local estimate), and answers compaction requests with a short summary.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from sp4rk.agent import (
    CircuitBreakerConfig,
    CompactionResult,
    CompactionStrategy,
    Executor,
    ExecutorResult,
    RecordingEvents,
    ToolResultBudget,
    ToolResultCache,
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
    ObservationMaskingStrategy,
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
        ratio: float = 1.0,
    ) -> None:
        self.decide = decide
        self.window = window
        self.ratio = ratio
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
        size = int((COUNTER.count_messages(request.messages) + tools) * self.ratio)
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
        prompt = cw.build_prompt()
        summaries = [m.content for m in prompt if m.content.startswith("[Summary of steps ")]
        assert summaries[0].startswith("[Summary of steps 1-")  # the early run, rolled up
        assert len(summaries) >= 3  # block summaries reach the prompt too
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


class CalibratedWindow(ContextWindow):
    """Records the estimate after each compaction and the provider's count of that prompt."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.after: list[tuple[int, int]] = []  # (estimate, provider count)
        self._pending: int | None = None

    async def compact(self) -> CompactionResult | None:
        result = await super().compact()
        self._pending = self.used_tokens()
        return result

    def correct_token_count(self, api_input_tokens: int) -> None:
        if self._pending is not None:
            self.after.append((self._pending, api_input_tokens))
            self._pending = None
        super().correct_token_count(api_input_tokens)


@pytest.mark.parametrize("ratio", [2.2, 0.6])
@pytest.mark.parametrize("strategy", [None, "summary"], ids=["masking", "summarization"])
def test_a_provider_that_counts_differently_gets_fitting_prompts_and_kept_history(
    ratio: float, strategy: str | None
) -> None:
    provider = Provider(fetch_then_finish(150), ratio=ratio)
    chosen = SummarizationStrategy(provider.llm) if strategy else None
    cw = CalibratedWindow(
        32_000, 4096, system_prompt="You are a careful agent.", task="Read the pages.",
        strategy=chosen, keep_last_n=0,
    )  # fmt: skip
    result, _ = run(provider, cw, max_steps=200)
    assert result.finished
    assert provider.overflows == 0
    assert max(provider.sizes) + cw.output_limit() <= provider.window
    assert len(cw.after) >= 3
    eff = cw.effective_max()
    for estimate, real in cw.after:
        assert abs(real - estimate) <= 0.05 * eff  # the estimate holds after compaction
        assert real >= 0.15 * eff  # and compaction kept the history


class CheckedReferences(ContextWindow):
    """After each compaction, records how many references the prompt shows and resolves."""

    def __init__(self, cache: ToolResultCache, **kw: Any) -> None:
        super().__init__(32_000, 4096, task="Read the pages.", **kw)
        self.set_result_cache(cache)
        self.cache = cache
        self.references: list[tuple[int, int]] = []  # (shown, resolvable)

    async def compact(self) -> CompactionResult | None:
        result = await super().compact()
        text = "\n".join(m.content for m in self.build_prompt())
        shown = re.findall(r'tool_result_read\(hash="([0-9a-f]+)"', text)
        assert all(len(h) >= 8 for h in shown)
        self.references.append((len(shown), sum(self.cache.get(h) is not None for h in shown)))
        return result


@pytest.mark.parametrize(
    "strategy", [None, ObservationMaskingStrategy(keep_last=3)], ids=["none", "masking"]
)
def test_with_the_cache_known_a_compaction_leaves_no_dangling_reference(
    strategy: CompactionStrategy | None,
) -> None:
    provider = Provider(fetch_then_finish(300))
    cache = ToolResultCache(max_bytes=150_000)  # about 15 pages of 300
    cw = CheckedReferences(cache, strategy=strategy)
    result, _ = run(provider, cw, max_steps=400, setup=lambda e: e.set_tool_cache(cache))
    assert result.finished
    assert cw.references
    assert all(shown == resolvable for shown, resolvable in cw.references)
    assert any(shown for shown, _ in cw.references)
    assert "[Output pruned to save context." in "\n".join(m.content for m in cw.build_prompt())


def test_pre_compaction_warning_names_the_outputs_about_to_be_pruned() -> None:
    def decide(n: int, request: ChatRequest) -> ChatResponse:
        if n > 6:
            return finish_response("done")
        return tool_calls_response(("read_file", {"path": f"src/mod{n}.py"}))

    provider = Provider(decide)
    cw = window(32_000, keep_last_n=1, prune_threshold_percent=60)
    result, events = run(provider, cw, setup=lambda e: e.set_pre_warning_percent(20))
    assert result.finished
    warned = [
        s
        for s in result.steps
        if "These tool outputs will soon be pruned or dropped" in s.observation
    ]
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


def test_a_warning_above_the_prune_threshold_comes_before_the_compaction() -> None:
    """With the reference's 80 % and pruning from 50 %, the model is warned before compacting."""

    @tool
    def note(path: str) -> str:
        """Read a short note."""
        return f"# {path}\n" + "n" * 2000

    def decide(n: int, request: ChatRequest) -> ChatResponse:
        if n > 400:
            return finish_response("done")
        return tool_calls_response(("note", {"path": f"notes/{n}.md"}), thought="t" * 400)

    provider = Provider(decide)
    cw = window()
    events = RecordingEvents()
    # Same tool, same-size results: only the same-tool breaker would object.
    breakers = CircuitBreakerConfig(
        same_tool_repeat_nudge_threshold=0, same_tool_repeat_abort_threshold=0
    )
    executor = Executor(
        provider.llm, Registry([note]), 500, events=events, circuit_breaker=breakers
    )
    executor.set_pre_warning_percent(80)
    result = executor.run_sync(Registry([note]).list(), cw)
    assert result.finished
    names = events.names()
    assert "context_compaction" in names
    warnings = events.diagnostics("pre_compaction_nudge")
    assert warnings
    assert 80 <= warnings[0]["fill_percent"] < 85
    assert warnings[0]["vulnerable_count"] == 20
    warned = next(
        s
        for s in result.steps
        if "These tool outputs will soon be pruned or dropped" in s.observation
    )
    assert '- note("notes/' in warned.observation
    first_warning = next(
        i
        for i, (name, args) in enumerate(events.records)
        if name == "executor_diagnostic" and args[1] == "pre_compaction_nudge"
    )
    assert first_warning < names.index("context_compaction")


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
