from __future__ import annotations

from dataclasses import replace

import pytest

from sp4rk.agent import (
    ContextManager,
    InterjectionConsumer,
    Step,
    ToolResultCache,
    VulnerableOutput,
)
from sp4rk.llm import Message
from sp4rk.memory import ContextWindow, render_steps, validate_history

from .helpers import CountingCounter, call_step, mixed_history, tokens


def window(**kw: object) -> ContextWindow:
    kw.setdefault("task", "the task")
    return ContextWindow(**kw)  # type: ignore[arg-type]


def set_used(cw: ContextWindow, used: int) -> None:
    """Make the window believe the last prompt counted ``used`` tokens."""
    cw.build_prompt()
    cw.correct_token_count(used)


def test_it_satisfies_the_protocols() -> None:
    cw = window()
    assert isinstance(cw, ContextManager)
    assert isinstance(cw, InterjectionConsumer)


def test_effective_max_subtracts_output_and_margin() -> None:
    cw = ContextWindow(200_000, 8192, safety_margin_percent=5)
    assert cw.effective_max() == 181_808
    assert cw.output_limit() == 8192
    assert ContextWindow().effective_max() == 128_000 - 4096 - 6400


@pytest.mark.parametrize(
    ("used", "status"),
    [
        (10, "ok"),
        (849, "ok"),
        (850, "compact"),
        (919, "compact"),
        (920, "warning"),
        (979, "warning"),
        (980, "emergency"),
        (999, "emergency"),
        (1000, "reject"),
        (1500, "reject"),
    ],
)
def test_fill_thresholds_at_their_boundaries(used: int, status: str) -> None:
    cw = window(max_tokens=2000, output_limit=1000, safety_margin_percent=0, task="t")
    set_used(cw, used)
    fill = cw.check_fill()
    assert (fill.status, fill.used, fill.max) == (status, used, 1000)
    assert fill.percent == pytest.approx(used / 10)
    assert cw.fill_percent() == pytest.approx(used / 10)
    assert cw.available_tokens() == max(0, 1000 - used)


@pytest.mark.parametrize(("used", "status"), [(499, "ok"), (500, "compact"), (600, "warning")])
def test_custom_thresholds(used: int, status: str) -> None:
    cw = window(
        max_tokens=2000, output_limit=1000, safety_margin_percent=0, thresholds=(50, 60, 70)
    )
    set_used(cw, used)
    assert cw.check_fill().status == status


def test_an_output_limit_as_large_as_the_window_always_rejects() -> None:
    cw = window(max_tokens=1000, output_limit=1000)
    fill = cw.check_fill()
    assert (fill.percent, fill.status) == (100.0, "reject")
    assert cw.fill_percent() == 100.0
    assert cw.available_tokens() == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_tokens": 0}, "must be positive"),
        ({"output_limit": -1}, "must be positive"),
        ({"safety_margin_percent": 100}, "safety_margin_percent"),
        ({"thresholds": (90, 85, 98)}, "thresholds"),
        ({"thresholds": (0, 85, 98)}, "thresholds"),
        ({"keep_last_n": -1}, "keep_last_n"),
        ({"prune_threshold_percent": 101}, "prune_threshold_percent"),
    ],
)
def test_bad_configuration_is_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ContextWindow(**kwargs)  # type: ignore[arg-type]


def test_used_tokens_track_the_rendered_prompt_exactly() -> None:
    cw = window(system_prompt="sys", keep_last_n=0)
    for step in mixed_history(40):
        cw.add_step(step)
        prompt = cw.build_prompt()
        validate_history(prompt)
        assert cw.used_tokens() == tokens(prompt)


def test_adding_a_step_counts_only_that_step() -> None:
    counter = CountingCounter()
    cw = window(token_counter=counter, keep_last_n=0)
    for i in range(300):
        cw.add_step(call_step(i))
    before = counter.chars
    step = call_step(300)
    cw.add_step(step)
    assert step.action is not None
    own = len(step.thought) + len(step.observation) + len(step.action.input) + 40
    assert counter.chars - before <= own
    before = counter.chars
    cw.build_prompt()
    assert counter.chars == before  # building never recounts


def test_a_provider_count_calibrates_and_carries_over() -> None:
    cw = window(max_tokens=100_000, output_limit=1000)
    cw.add_step(call_step(0))
    prompt = cw.build_prompt()
    cw.correct_token_count(tokens(prompt) + 700)  # e.g. tool definitions
    assert cw.used_tokens() == tokens(prompt) + 700
    step = call_step(1)
    cw.add_step(step)
    assert cw.used_tokens() == tokens(cw.build_prompt()) + 700
    cw.correct_token_count(0)  # no usage reported: ignored
    assert cw.used_tokens() == tokens(cw.build_prompt()) + 700
    cw.correct_token_count(3)  # implausibly low (cached tokens reported apart): ignored
    assert cw.used_tokens() == tokens(cw.build_prompt()) + 700


def test_a_correction_refers_to_the_prompt_it_was_built_for() -> None:
    cw = window()
    cw.set_pending_user_interjection("please also check the tests")
    prompt = cw.build_prompt()
    assert prompt[-1].content == "please also check the tests"
    cw.consume_pending_user_interjection()  # the executor consumes before correcting
    cw.correct_token_count(tokens(prompt))
    assert cw.used_tokens() == tokens(cw.build_prompt())


def test_an_interjection_stays_until_consumed_and_is_counted() -> None:
    cw = window()
    cw.add_step(call_step(0))
    base = cw.used_tokens()
    cw.set_pending_user_interjection("resume: the user moved the file")
    assert cw.build_prompt()[-1].content == "resume: the user moved the file"
    assert cw.build_prompt()[-1].content == "resume: the user moved the file"
    assert cw.used_tokens() > base
    cw.consume_pending_user_interjection()
    assert cw.build_prompt()[-1].role == "tool"
    assert cw.used_tokens() == base
    cw.set_pending_user_interjection(" \u200b ")
    assert cw.build_prompt()[-1].role == "tool"


async def test_seed_steps_replaces_history_and_compaction() -> None:
    cw = window(keep_last_n=0)
    for i in range(6):
        cw.add_step(call_step(i))
    assert await cw.compact() is not None
    seeded = [call_step(10), call_step(11)]
    cw.seed_steps(seeded)
    prompt = cw.build_prompt()
    assert [m.tool_call_id for m in prompt if m.role == "tool"] == ["c10", "c11"]
    assert cw.used_tokens() == tokens(prompt)
    cw.seed_steps(None)
    assert cw.steps == []
    assert len(cw.build_prompt()) == 1


def test_nothing_is_pruned_below_the_threshold() -> None:
    cw = window(max_tokens=1_000_000, keep_last_n=1, prune_threshold_percent=50)
    for i in range(5):
        cw.add_step(call_step(i))
    assert all("evicted" not in m.content for m in cw.build_prompt())


def test_pruning_replaces_older_outputs_and_keeps_the_last_n() -> None:
    cw = window(keep_last_n=1, prune_threshold_percent=0)
    cw.add_step(call_step(0))
    cw.add_step(call_step(1, cached=False))
    cw.add_step(call_step(2))
    before = cw.used_tokens()
    results = [m.content for m in cw.build_prompt() if m.role == "tool"]
    assert results[0].startswith("[Result (409 chars) evicted to save context.")
    assert 'tool_result_read(hash="' + call_step(0).cache_hash[:12] + '"' in results[0]
    assert results[1].startswith("[Output pruned to save context.")
    assert results[2].startswith("output 2")
    assert cw.used_tokens() < before  # the accounting follows the pruning


def test_a_short_output_is_not_worth_pruning() -> None:
    cw = window(keep_last_n=1, prune_threshold_percent=0)
    cw.add_step(call_step(0, observation="ok"))
    cw.add_step(call_step(1))
    assert next(m.content for m in cw.build_prompt() if m.role == "tool") == "ok"


def test_the_last_outputs_group_is_protected_whole() -> None:
    cw = window(keep_last_n=1, prune_threshold_percent=0)
    cw.add_step(call_step(0))
    for i in (1, 2, 3):
        cw.add_step(call_step(i, group=4))
    results = [m.content for m in cw.build_prompt() if m.role == "tool"]
    assert "evicted" in results[0]
    assert all(r.startswith("output") for r in results[1:])


def test_pruning_is_sticky_when_the_fill_drops_again() -> None:
    cw = window(max_tokens=10_000, output_limit=1000, keep_last_n=1, prune_threshold_percent=10)
    for i in range(8):
        cw.add_step(call_step(i))
    first = cw.build_prompt()
    assert "evicted" in first[2].content
    set_used(cw, cw.used_tokens() // 2 + 1)  # the provider says the prompt is small now
    assert cw.fill_percent() < 10
    assert cw.build_prompt()[2].content == first[2].content


def test_vulnerable_outputs_name_every_output_outside_the_protected_tail() -> None:
    cw = window(max_tokens=1_000_000, keep_last_n=1)
    long_path = "d/" * 35
    cw.add_step(call_step(0, args={"path": "p1"}))
    cw.add_step(call_step(1, args={"path": long_path}))
    cw.add_step(call_step(2, args={"path": "p3"}))
    cw.add_step(Step(user_nudge="keep going"))
    expected = [
        VulnerableOutput("read_file", "p1"),
        VulnerableOutput("read_file", long_path[:59] + "…"),
    ]
    assert cw.vulnerable_outputs() == expected
    cw.prune_threshold_percent = 0
    prompt = cw.build_prompt()
    assert sum("evicted" in m.content for m in prompt) == 2
    # Pruned, but still at risk: the next compaction can summarise or drop their references.
    assert cw.vulnerable_outputs() == expected


def test_no_vulnerable_outputs_without_pruning() -> None:
    cw = window(keep_last_n=0)
    for i in range(4):
        cw.add_step(call_step(i))
    assert cw.vulnerable_outputs() == []


def test_vulnerable_outputs_list_at_most_the_newest_twenty() -> None:
    cw = window(max_tokens=1_000_000, keep_last_n=1)
    for i in range(30):
        cw.add_step(call_step(i))
    out = cw.vulnerable_outputs()
    assert len(out) == 20
    assert out[-1].input_hint == "p28"


async def test_set_strategy_is_used_by_the_next_compaction() -> None:
    from sp4rk.memory import SlidingWindowStrategy

    cw = window(keep_last_n=0)
    for i in range(5):
        cw.add_step(call_step(i))
    strategy = SlidingWindowStrategy(1, 1)
    cw.set_strategy(strategy)
    assert cw.strategy is strategy
    await cw.compact()
    prompt = cw.build_prompt()
    validate_history(prompt)
    assert Message("system", "[... 3 steps omitted ...]") in prompt
    assert [m.tool_call_id for m in prompt if m.role == "tool"] == ["c0", "c4"]


def test_a_provider_that_counts_a_multiple_is_modelled_as_a_scale() -> None:
    cw = window(max_tokens=100_000, output_limit=1000, keep_last_n=0)
    for i in range(4):
        cw.add_step(call_step(i))
        cw.correct_token_count(2 * tokens(cw.build_prompt()) + 300)  # 2x, plus tool definitions
    cw.add_step(call_step(4, observation="x" * 8000))
    assert cw.used_tokens() == pytest.approx(2 * tokens(cw.build_prompt()) + 300, abs=2)


@pytest.mark.parametrize("task", ["", " \u00a0\u3000 "])
def test_a_history_without_task_text_still_opens_with_a_user_turn(task: str) -> None:
    cw = ContextWindow(system_prompt="be brief", task=task)
    assert cw.build_prompt() == [Message("system", "be brief")]
    cw.add_step(call_step(0))
    prompt = cw.build_prompt()
    validate_history(prompt)
    assert prompt[1] == Message("user", "(no task text)")
    assert cw.used_tokens() == tokens(prompt)
    nudged = ContextWindow()
    nudged.add_step(Step(user_nudge="go on"))
    nudged.add_step(call_step(1))
    assert nudged.build_prompt()[0] == Message("user", "go on")  # no stand-in needed
    assert nudged.used_tokens() == tokens(nudged.build_prompt())


def test_a_response_group_grows_at_the_cost_of_its_new_step() -> None:
    counter = CountingCounter()
    cw = window(token_counter=counter, max_tokens=10_000_000, keep_last_n=0)
    steps = [
        call_step(i, observation="y" * 40_000, group=1, nudge="go on" if i % 7 == 0 else "")
        for i in range(60)
    ]
    steps[0].reasoning_content = "plan"
    for step in steps[:-1]:
        cw.add_step(step)
    before = counter.chars
    cw.add_step(steps[-1])
    calls = sum(len(s.action.name) + len(s.action.input) for s in steps if s.action)
    assert counter.chars - before <= 40_000 + calls + 200  # the new result and the calls
    prompt = cw.build_prompt()
    assert prompt[1:] == render_steps(steps)
    assert cw.used_tokens() == tokens(prompt)


def test_with_the_result_cache_references_point_only_at_what_it_holds() -> None:
    cache = ToolResultCache(max_bytes=3000)  # room for two of the four results
    cw = window(keep_last_n=1, prune_threshold_percent=0)
    cw.set_result_cache(cache)
    verify = "\n\n[verify_on_edit] Verification passed (exit 0). Output:\n3 passed"
    hashes = []
    for i in range(4):
        full = f"result {i} " + "r" * 1200
        hashes.append(cache.store("read_file", full))
        observation = full[:800] + "\n[... truncated ...]" + (verify if i == 2 else "")
        cw.add_step(replace(call_step(i, observation), cache_hash=hashes[-1]))
    results = [m.content for m in cw.build_prompt() if m.role == "tool"]
    assert cache.get(hashes[0]) is None and cache.get(hashes[1]) is None  # evicted
    assert all(r.startswith("[Output pruned to save context. Re-run") for r in results[:2])
    short = cache.short_hash(hashes[2])
    assert results[2] == (
        f'[Result (1209 chars) evicted to save context. Use tool_result_read(hash="{short}", '
        "start_line=1, num_lines=200) to read it again.]" + verify
    )
    assert cache.get(short) == "result 2 " + "r" * 1200
    assert results[3].startswith("result 3")


async def test_a_strategy_s_references_are_checked_against_the_cache() -> None:
    from sp4rk.memory import ObservationMaskingStrategy

    cache = ToolResultCache(max_bytes=2500)  # the last two results
    cw = window(strategy=ObservationMaskingStrategy(keep_last=1), keep_last_n=0)
    cw.set_result_cache(cache)
    for i in range(3):
        full = f"result {i} " + "r" * 1200
        cw.add_step(replace(call_step(i, full), cache_hash=cache.store("read_file", full)))
    await cw.compact()
    results = [m.content for m in cw.build_prompt() if m.role == "tool"]
    assert results[0].startswith("[Output pruned to save context.")  # evicted from the cache
    assert f'hash="{cache.short_hash(cw.steps[1].cache_hash)}"' in results[1]
    assert results[2].startswith("result 2")
