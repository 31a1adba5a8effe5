"""Tunable thresholds, grouped in dataclasses; the defaults are what the executor ships with."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sp4rk._internal.serde import Serializable as _Serializable
from sp4rk.tools.truncation import ToolTruncationConfig, default_tool_truncation_config

__all__ = [
    "CircuitBreakerConfig",
    "ToolResultBudget",
    "ToolTruncationConfig",
    "default_circuit_breaker_config",
    "default_tool_result_budget",
    "default_tool_truncation_config",
]


MAX_CYCLE_PERIOD = 8
"""The longest cycle the cycle breaker can see: it keeps the last two periods of calls."""


@dataclass(slots=True)
class CircuitBreakerConfig(_Serializable):
    """Loop-protection thresholds, whole numbers; ``0`` switches a nudge or an abort off.

    A breaker nudges the model when its count reaches the nudge threshold and aborts the run
    (after asking the HITL handler for a reprieve) when it reaches the abort threshold. Most
    count consecutive events; the cycle breaker counts repetitions of a cycle and the
    no-progress breaker calls that bring nothing new (see each field).
    """

    repeat_nudge_threshold: int = 3
    """Identical calls (same tool, same arguments) before a nudge."""
    repeat_abort_threshold: int = 4
    """Identical calls before the run aborts (one fewer when the identical call failed)."""
    truncation_abort_threshold: int = 3
    """Responses cut at the output-token limit while calling tools, before abort."""
    parse_error_abort_threshold: int = 3
    """Input parse errors on the same tool before abort."""
    fruitless_nudge_threshold: int = 5
    """Calls returning at most ``fruitless_max_result_len`` characters, before a nudge."""
    fruitless_abort_threshold: int = 8
    """Such fruitless calls before abort."""
    fruitless_max_result_len: int = 48
    """Result length (characters) at or below which a call may count as fruitless (``0``
    switches the fruitless breaker off)."""
    same_tool_repeat_nudge_threshold: int = 8
    """Calls of one tool with varied arguments but similar-sized results, before a nudge."""
    same_tool_repeat_abort_threshold: int = 12
    """Such calls before abort."""
    same_tool_result_size_delta: int = 128
    """Largest difference in result length (characters) that counts as "similar" (``0``
    switches the same-tool breaker off)."""
    cycle_max_period: int = 4
    """Longest cycle of calls (A-B-A-B is period 2) the cycle breaker looks for (``< 2``: off;
    at most 8, the calls it remembers being 16)."""
    cycle_nudge_threshold: int = 1
    """Full repetitions of a cycle with unchanged results before a nudge (A-B-A-B is one);
    ``0`` switches the whole cycle breaker off (its abort counts calls after the nudge)."""
    cycle_abort_threshold: int = 1
    """Further calls that continue the cycle after the nudge, before abort."""
    no_progress_nudge_threshold: int = 3
    """Calls in a row that bring nothing new (the same call already returned the same result
    in this run) before a nudge."""
    no_progress_abort_threshold: int = 6
    """Such calls in a row before abort."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(
                    f"CircuitBreakerConfig.{f.name} must be a whole number (0 switches it "
                    f"off), not {type(value).__name__} {value!r}"
                )
            if value < 0:
                raise ValueError(f"CircuitBreakerConfig.{f.name} must be >= 0, not {value}")
        if self.cycle_max_period > MAX_CYCLE_PERIOD:
            raise ValueError(
                f"CircuitBreakerConfig.cycle_max_period must be at most {MAX_CYCLE_PERIOD} "
                f"(the cycle breaker remembers {2 * MAX_CYCLE_PERIOD} calls), not "
                f"{self.cycle_max_period}"
            )


def default_circuit_breaker_config() -> CircuitBreakerConfig:
    """A fresh :class:`CircuitBreakerConfig` with the default thresholds."""
    return CircuitBreakerConfig()


@dataclass(slots=True)
class ToolResultBudget(_Serializable):
    """Stage 2 of truncation: the most of the context one tool result may take.

    A result is cut to ``min(hard_cap_tokens, max_fill_fraction × available tokens)``, but
    never below 256 tokens. ``hard_cap_tokens=0`` switches Stage 2 off.
    """

    hard_cap_tokens: int = 30_000
    max_fill_fraction: float = 0.4

    def __post_init__(self) -> None:
        if self.hard_cap_tokens < 0:
            raise ValueError("ToolResultBudget.hard_cap_tokens must be >= 0")
        if not 0 < self.max_fill_fraction <= 1:
            raise ValueError("ToolResultBudget.max_fill_fraction must be in (0, 1]")


def default_tool_result_budget() -> ToolResultBudget:
    """A fresh :class:`ToolResultBudget`: 30 000 tokens, at most 40 % of the free window."""
    return ToolResultBudget()
