"""``Budget``: what one run may spend — tokens, money, wall-clock time and tool calls.

::

    executor = Executor(llm, registry, 50, budget=Budget(max_cost_usd=0.50, max_seconds=600))
    result = await executor.run(registry.list(), window)
    result.usage, result.cost_usd                   # what the run spent (sub-agents included)
    result.state.budget                             # BudgetState: spent, granted, why it stopped

Each limit is checked *before* it is spent: before a model call, the request's tokens (the
window's count plus its output limit) and their cost are checked against what remains; before
a tool call, the tool-call count; at every model call and tool, the wall-clock deadline. A
limit that would be crossed asks ``HITLHandler.on_step_limit`` with the limit's name as the
reason; a denial ends the run with ``ExitReason.BUDGET_EXHAUSTED``. The spend lives in the
run's state (:class:`BudgetState`), so a paused and resumed run goes on with what was left.
The live account that enforces it is :class:`~sp4rk.agent.account.BudgetAccount`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from sp4rk._internal.serde import Serializable
from sp4rk.llm.pricing import PriceTable
from sp4rk.llm.types import TokenUsage

LimitName = Literal[
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
    "max_cost_usd",
    "max_seconds",
    "max_tool_calls",
]

#: Every limit a budget may set, in the order reports list them.
LIMITS: tuple[LimitName, ...] = (
    "max_total_tokens",
    "max_input_tokens",
    "max_output_tokens",
    "max_cost_usd",
    "max_seconds",
    "max_tool_calls",
)
_WHOLE = frozenset({"max_input_tokens", "max_output_tokens", "max_total_tokens", "max_tool_calls"})
#: Most seconds one ``ALLOW_ONCE`` adds to a wall-clock limit.
ONCE_SECONDS = 60.0


class BudgetError(ValueError):
    """A budget cannot be enforced as configured (for example: a cost limit, unknown prices)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """The limits of one run; every limit is optional (``None``: no limit).

    Token limits count provider-reported usage; ``max_cost_usd`` prices it with ``prices``
    (default: :func:`~sp4rk.llm.pricing.default_price_table`); ``max_seconds`` is wall-clock
    time while the run runs (a paused run's clock stands still).

    Args:
        max_input_tokens: prompt tokens, summed over every model call.
        max_output_tokens: completion tokens (reasoning included), summed.
        max_total_tokens: input plus output tokens.
        max_cost_usd: money in US dollars.
        max_seconds: wall-clock seconds.
        max_tool_calls: tool calls that run (``finish`` is not one).
        prices: the price table for costs (also without ``max_cost_usd``: the result reports
            the cost either way).
        report_every: tell the model what remains every this many steps (and at step 1);
            ``0``: only at ``wrap_up_at``.
        wrap_up_at: the fraction of any limit at which the model is told, once, what remains
            and asked to finish with what it has.
    """

    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None
    max_seconds: float | None = None
    max_tool_calls: int | None = None
    prices: PriceTable | None = field(default=None, compare=False)
    report_every: int = 10
    wrap_up_at: float = 0.8

    def __post_init__(self) -> None:
        for name in LIMITS:
            _check_limit(name, getattr(self, name))
        if self.prices is not None and not isinstance(self.prices, PriceTable):
            raise TypeError(
                "Budget.prices must be a PriceTable (sp4rk.llm.pricing.default_price_table()), "
                f"got {type(self.prices).__name__}"
            )
        every = self.report_every
        if isinstance(every, bool) or not isinstance(every, int) or every < 0:
            raise ValueError(f"Budget.report_every must be an int >= 0 (steps), got {every!r}")
        at = self.wrap_up_at
        if isinstance(at, bool) or not isinstance(at, int | float) or not 0 < at <= 1:
            raise ValueError(f"Budget.wrap_up_at must be a fraction in (0, 1], got {at!r}")

    @classmethod
    def from_limits(
        cls,
        *,
        max_cost_usd: float | None = None,
        max_tokens: int | None = None,
        max_seconds: float | None = None,
        max_tool_calls: int | None = None,
        prices: PriceTable | None = None,
    ) -> Budget:
        """The budget of the command line's ``--max-cost``, ``--max-tokens``, ``--max-time``.

        ``max_tokens`` limits input plus output tokens (``max_total_tokens``).
        """
        return cls(
            max_cost_usd=max_cost_usd,
            max_total_tokens=max_tokens,
            max_seconds=max_seconds,
            max_tool_calls=max_tool_calls,
            prices=prices,
        )

    def limits(self) -> dict[LimitName, float]:
        """The limits that are set, by name."""
        return {name: value for name in LIMITS if (value := getattr(self, name)) is not None}

    @property
    def limited(self) -> bool:
        """Whether any limit is set."""
        return any(getattr(self, name) is not None for name in LIMITS)


def _check_limit(name: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"Budget.{name} must be a number or None, got {type(value).__name__}")
    if name in _WHOLE and not isinstance(value, int):
        raise TypeError(f"Budget.{name} must be a whole number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"Budget.{name} must be a positive number (or None), got {value!r}")


@dataclass(slots=True, kw_only=True)
class BudgetState(Serializable):
    """What a run spent and what it was granted: part of ``RunState``, saved in checkpoints.

    Totals include the spending of sub-agents that drew from this run's budget.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    """Of ``input_tokens``: read from a prompt cache."""
    cache_write_tokens: int = 0
    """Of ``input_tokens``: written to a prompt cache."""
    cost_usd: float = 0.0
    """The cost of the calls whose model has a price (see ``unpriced_calls``)."""
    unpriced_calls: int = 0
    """Model calls whose cost is unknown (no price for their model)."""
    model_calls: int = 0
    tool_calls: int = 0
    seconds: float = 0.0
    """Wall-clock seconds the run has run (up to its last boundary or its end)."""
    granted: dict[str, float] = field(default_factory=dict)
    """What the human added to each limit, in its unit."""
    lifted: list[str] = field(default_factory=list)
    """Limits the human lifted for the rest of the run (``ALLOW_ALWAYS``)."""
    last_model: str = ""
    """The model of the latest response: the next call is priced by it."""
    last_report_step: int = 0
    """The step at which the model was last told what remains."""
    wrap_up_given: bool = False
    """The model was told, once, that a limit is nearly used up."""
    exhausted: str = ""
    """The limit that ended the run (``""`` when none did)."""

    def __post_init__(self) -> None:
        for name in (
            "input_tokens",
            "output_tokens",
            "cached_input_tokens",
            "cache_write_tokens",
            "unpriced_calls",
            "model_calls",
            "tool_calls",
            "last_report_step",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"BudgetState.{name} must be an int >= 0, got {value!r}")
        for name in ("cost_usd", "seconds"):
            _check_amount(f"BudgetState.{name}", getattr(self, name))
        for name, amount in self.granted.items():
            if name not in LIMITS:
                raise ValueError(f"BudgetState.granted names an unknown limit {name!r}")
            _check_amount(f"BudgetState.granted[{name!r}]", amount)
        if any(name not in LIMITS for name in self.lifted):
            raise ValueError(f"BudgetState.lifted names an unknown limit: {self.lifted!r}")
        if self.exhausted and self.exhausted not in LIMITS:
            raise ValueError(f"BudgetState.exhausted names an unknown limit {self.exhausted!r}")

    @property
    def usage(self) -> TokenUsage:
        """The tokens spent, as one ``TokenUsage``."""
        return TokenUsage(
            self.input_tokens,
            self.output_tokens,
            cached_input_tokens=self.cached_input_tokens,
            cache_write_tokens=self.cache_write_tokens,
        )

    @property
    def cost(self) -> float | None:
        """The cost in USD; ``None`` when a call's model had no price (unknown, not zero)."""
        return None if self.unpriced_calls else self.cost_usd

    def add_call(self, usage: TokenUsage, cost: float | None) -> None:
        """Count one model call's usage and cost (``None``: its price is unknown)."""
        self.model_calls += 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cached_input_tokens += usage.cached_input_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        if cost is None:
            self.unpriced_calls += 1
        else:
            self.cost_usd += cost

    def spent(self, name: LimitName) -> float:
        """What was spent against the limit ``name``, in its unit."""
        if name == "max_total_tokens":
            return self.input_tokens + self.output_tokens
        if name == "max_input_tokens":
            return self.input_tokens
        if name == "max_output_tokens":
            return self.output_tokens
        if name == "max_cost_usd":
            return self.cost_usd
        if name == "max_seconds":
            return self.seconds
        return self.tool_calls


def _check_amount(where: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where} must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{where} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class BudgetReport:
    """A snapshot of a run's spend and limits, for people and for the model.

    ``limits`` maps each limit that applies (this run's own, and those of an account it draws
    from) to ``(spent, limit)`` of whichever account is closest to it, grants included.
    """

    usage: TokenUsage
    cost_usd: float | None
    seconds: float
    tool_calls: int
    model_calls: int
    limits: Mapping[LimitName, tuple[float, float]] = field(default_factory=dict)

    def fraction(self, name: LimitName) -> float:
        """The used part of limit ``name`` (``0.0`` when it is not set)."""
        spent, limit = self.limits.get(name, (0.0, math.inf))
        return spent / limit if limit > 0 else 1.0

    def remaining(self, name: LimitName) -> float | None:
        """What is left of limit ``name`` in its unit (``None`` when it is not set)."""
        if name not in self.limits:
            return None
        spent, limit = self.limits[name]
        return max(0.0, limit - spent)

    @property
    def max_fraction(self) -> float:
        """The used part of the limit closest to being used up (``0.0`` without limits)."""
        return max((self.fraction(n) for n in self.limits), default=0.0)

    def describe(self) -> str:
        """Each limit as ``spent of limit (percent)``, e.g. for the model."""
        parts = []
        for name, (spent, limit) in self.limits.items():
            percent = min(999, round(self.fraction(name) * 100))
            parts.append(
                f"{format_amount(name, spent)} of {format_amount(name, limit)} {_NOUN[name]} "
                f"({percent}%)"
            )
        return "; ".join(parts) if parts else "no limits"

    def summary(self) -> str:
        """What was spent, e.g. for a status line: tokens, cost, time, tool calls."""
        cost = (
            "cost unknown"
            if self.cost_usd is None
            else format_amount("max_cost_usd", self.cost_usd)
        )
        return (
            f"{self.usage.input_tokens:,} in + {self.usage.output_tokens:,} out tokens · {cost} · "
            f"{format_amount('max_seconds', self.seconds)} · {self.tool_calls} tool calls"
        )


_NOUN: dict[str, str] = {
    "max_total_tokens": "tokens",
    "max_input_tokens": "input tokens",
    "max_output_tokens": "output tokens",
    "max_cost_usd": "spent",
    "max_seconds": "elapsed",
    "max_tool_calls": "tool calls",
}

LABELS: dict[str, str] = {
    "max_total_tokens": "token",
    "max_input_tokens": "input-token",
    "max_output_tokens": "output-token",
    "max_cost_usd": "cost",
    "max_seconds": "time",
    "max_tool_calls": "tool-call",
}
"""Each limit as a word for messages: ``the {label} budget``."""


def format_amount(name: LimitName, value: float) -> str:
    """``value`` in the unit of limit ``name``: ``12,340``, ``$0.0123``, ``2 min 05 s``."""
    if name == "max_cost_usd":
        return f"${value:,.2f}" if value >= 1 or value == 0 else f"${value:.4f}"
    if name == "max_seconds":
        if value < 60:
            return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"
        minutes, seconds = divmod(round(value), 60)
        return f"{minutes} min {seconds:02d} s"
    return f"{round(value):,}"
