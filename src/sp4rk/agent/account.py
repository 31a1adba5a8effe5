"""``BudgetAccount``: a budget's live spend, shared safely by a run and its sub-agents.

Every run has an account: its :class:`~sp4rk.agent.budget.Budget` and the
:class:`~sp4rk.agent.budget.BudgetState` of its ``RunState``. A run whose context carries an
account (``RunContext(budget=...)``; a tool's context carries its run's) opens a *child* of it:
the child's spending is added to every account above it, and a call must fit the limits of
all of them. So a sub-agent never spends more than its parent has left::

    shared = BudgetAccount(Budget(max_cost_usd=1.00))
    await run_sub_agents_parallel([SubAgentTask(..., ctx=RunContext(budget=shared)), ...])
    shared.report().summary()

Concurrent runs cannot overspend: a model call *reserves* its estimate (the prompt's tokens,
the output limit and their price) before it is sent, under one lock per tree of accounts, and
the reservation is replaced by the provider-reported usage when the answer comes. What a call
is refused for is a :class:`Shortfall`; the loop asks the human, and :meth:`extend` applies
the answer in that limit's unit.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from sp4rk.agent.budget import (
    LIMITS,
    ONCE_SECONDS,
    Budget,
    BudgetError,
    BudgetReport,
    BudgetState,
    LimitName,
)
from sp4rk.agent.hitl import StepLimitResponse
from sp4rk.llm.pricing import ModelPrice, PriceTable, default_price_table
from sp4rk.llm.types import TokenUsage

#: Seconds of slack in the wall-clock check (the loop's clock and ``time.monotonic`` agree,
#: but a deadline that fired must never look a hair short of the limit).
_CLOCK_SLACK = 1e-3
#: Overshoot that is float rounding, not spending (a grant of exactly the shortfall fits).
_ROUNDING = 1e-9


@dataclass(slots=True)
class Hold:
    """Amounts a model call reserved on every account of its chain, until it is settled."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class Shortfall:
    """Why a call does not fit: the limit, whose it is, and by how much it is exceeded."""

    limit: LimitName
    account: BudgetAccount
    over: float
    """How much the call would go past the limit, in its unit (``0`` for time)."""


class BudgetAccount:
    """Live spend against a budget; see the module docs.

    Args:
        budget: the limits (``None``: none of its own; a parent's still apply).
        state: where the spend is kept (a run passes its ``RunState.budget``); ``None``
            starts a fresh one.
        parent: the account this one draws from.

    The wall clock of an account starts when it is made and continues from
    ``state.seconds``.
    """

    __slots__ = (
        "_base",
        "_held",
        "_lock",
        "_started",
        "budget",
        "limited",
        "parent",
        "prices",
        "state",
    )

    def __init__(
        self,
        budget: Budget | None = None,
        *,
        state: BudgetState | None = None,
        parent: BudgetAccount | None = None,
    ) -> None:
        if budget is not None and not isinstance(budget, Budget):
            raise TypeError(f"budget must be a sp4rk.agent.Budget, got {type(budget).__name__}")
        if parent is not None and not isinstance(parent, BudgetAccount):
            raise TypeError(f"parent must be a BudgetAccount, got {type(parent).__name__}")
        self.budget = budget if budget is not None else Budget()
        self.state = state if state is not None else BudgetState()
        self.parent = parent
        self.prices: PriceTable = self.budget.prices or (
            parent.prices if parent is not None else default_price_table()
        )
        self._lock: threading.RLock = parent._lock if parent is not None else threading.RLock()
        self._held = Hold()
        self._base = self.state.seconds
        self._started = time.monotonic()
        self.limited: bool = self.budget.limited or (parent is not None and parent.limited)
        """Whether any limit applies (its own or an ancestor's): if not, nothing is checked."""

    def _chain(self) -> Iterator[BudgetAccount]:
        account: BudgetAccount | None = self
        while account is not None:
            yield account
            account = account.parent

    # --- limits and the clock ---------------------------------------------------------------

    def limit(self, name: LimitName) -> float | None:
        """This account's own limit ``name`` with what was granted (``None``: no limit)."""
        base = getattr(self.budget, name)
        if base is None or name in self.state.lifted:
            return None
        return float(base + self.state.granted.get(name, 0.0))

    def elapsed(self) -> float:
        """Wall-clock seconds spent: before this account was made (resumed) and since."""
        return self._base + time.monotonic() - self._started

    def flush_clock(self) -> None:
        """Write the elapsed time into ``state.seconds`` (before the state is saved)."""
        self.state.seconds = self.elapsed()

    def time_left(self) -> float | None:
        """Seconds until the nearest time limit (its own or an ancestor's) runs out, if any."""
        left = [
            limit - a.elapsed()
            for a in self._chain()
            if (limit := a.limit("max_seconds")) is not None
        ]
        return min(left) if left else None

    def _spent(self, name: LimitName) -> float:
        if name == "max_seconds":
            return self.elapsed()
        return self.state.spent(name)

    def _held_of(self, name: LimitName) -> float:
        held = self._held
        if name == "max_total_tokens":
            return held.input_tokens + held.output_tokens
        if name == "max_input_tokens":
            return held.input_tokens
        if name == "max_output_tokens":
            return held.output_tokens
        if name == "max_cost_usd":
            return held.cost_usd
        return 0.0

    def _short(self, names: tuple[LimitName, ...], need: Hold | None) -> Shortfall | None:
        """The first of ``names`` this account cannot afford ``need`` under (time: used up)."""
        for name in names:
            limit = self.limit(name)
            if limit is None:
                continue
            if name == "max_seconds":
                if self.elapsed() >= limit - _CLOCK_SLACK:
                    return Shortfall(name, self, 0.0)
                continue
            amount = 1.0 if need is None else _amount(need, name)
            over = self._spent(name) + self._held_of(name) + amount - limit
            if over > _ROUNDING:
                return Shortfall(name, self, over)
        return None

    # --- model calls ------------------------------------------------------------------------

    def price_of(self, model: str) -> ModelPrice | None:
        """The price of ``model`` in this account's table (``None``: unknown)."""
        return self.prices.lookup(model) if model else None

    def reserve_call(self, model: str, input_tokens: int, output_tokens: int) -> Hold | Shortfall:
        """Reserve a model call of this size on every account, or say which limit it misses.

        Raises:
            BudgetError: when a cost limit applies and the call's price is unknown.
        """
        with self._lock:
            need = Hold(input_tokens, output_tokens)
            chain = list(self._chain())
            if any(a.limit("max_cost_usd") is not None for a in chain):
                need.cost_usd = self._cost_estimate(model, chain, input_tokens, output_tokens)
            for account in chain:
                short = account._short(_CALL_LIMITS, need)
                if short is not None:
                    return short
            for account in chain:
                account._held = _plus(account._held, need, 1)
            return need

    def _cost_estimate(
        self, model: str, chain: list[BudgetAccount], input_tokens: int, output_tokens: int
    ) -> float:
        price = self.price_of(model)
        if price is None:
            which = f"model {model!r}" if model else "the model (the caller names none)"
            raise BudgetError(
                f"a cost limit is set but {which} has no price, so its cost is unknown. Add "
                "one: Budget(..., prices=default_price_table().with_prices({model: "
                "ModelPrice(input=..., output=...)})) from sp4rk.llm.pricing"
            )
        if any(a.state.unpriced_calls for a in chain):
            raise BudgetError(
                "a cost limit is set but earlier calls had no price, so what was spent is "
                "unknown; add prices for every model the run uses (sp4rk.llm.pricing)"
            )
        return price.estimate(input_tokens, output_tokens)

    def release(self, hold: Hold | None) -> None:
        """Drop a reservation whose call was not answered (failed, cut, cancelled)."""
        if hold is None:
            return
        with self._lock:
            for account in self._chain():
                account._held = _plus(account._held, hold, -1)

    def settle(self, hold: Hold | None, model: str, usage: TokenUsage) -> float | None:
        """Replace a call's reservation by what it used; its cost (``None``: unknown)."""
        cost = self.prices.cost(model, usage) if model else None
        with self._lock:
            for account in self._chain():
                if hold is not None:
                    account._held = _plus(account._held, hold, -1)
                account.state.add_call(usage, cost)
            if model:
                self.state.last_model = model
        return cost

    # --- tool calls -------------------------------------------------------------------------

    def take_tool_call(self) -> Shortfall | None:
        """Count one tool call on every account, or say which limit it misses."""
        with self._lock:
            chain = list(self._chain())
            if self.limited:
                for account in chain:
                    short = account._short(_TOOL_LIMITS, None)
                    if short is not None:
                        return short
            for account in chain:
                account.state.tool_calls += 1
            return None

    # --- the human's answer -----------------------------------------------------------------

    def extend(self, short: Shortfall, answer: StepLimitResponse) -> float | None:
        """Apply the human's answer at ``short``'s limit (one of this account's own).

        - ``ALLOW_ONCE``: just enough for the call that was refused (tokens, cost), one more
          tool call, or ``min(60 s, max_seconds)`` more time.
        - ``ALLOW_MORE``: the limit's original amount once more.
        - ``ALLOW_ALWAYS``: no such limit for the rest of the run.

        Time is granted from the moment of the answer: what ran over the limit before it
        (a cut call, a human who took a while to answer) is added as well.

        Returns:
            What was added in the limit's unit (``math.inf`` when lifted), ``None`` on a
            denial.
        """
        name = short.limit
        base = getattr(self.budget, name)
        if short.account is not self or base is None:
            raise ValueError(f"{name} is not a limit of this account; extend the one it names")
        if answer is StepLimitResponse.ALLOW_ALWAYS:
            with self._lock:
                self.state.lifted.append(name)
            return math.inf
        if answer is StepLimitResponse.ALLOW_MORE:
            amount = float(base)
        elif answer is StepLimitResponse.ALLOW_ONCE:
            if name == "max_seconds":
                amount = min(ONCE_SECONDS, float(base))
            elif name == "max_tool_calls":
                amount = 1.0
            else:
                amount = short.over
        else:
            return None
        if name in ("max_input_tokens", "max_output_tokens", "max_total_tokens"):
            amount = float(math.ceil(amount))
        with self._lock:
            if name == "max_seconds":
                amount += max(0.0, self.elapsed() - (self.limit(name) or 0.0))
            self.state.granted[name] = self.state.granted.get(name, 0.0) + amount
        return amount

    # --- reports ----------------------------------------------------------------------------

    def report(self) -> BudgetReport:
        """What this account spent, and for each applicable limit the closest account's."""
        with self._lock:
            limits: dict[LimitName, tuple[float, float]] = {}
            for name in LIMITS:
                closest: tuple[float, float] | None = None
                for account in self._chain():
                    limit = account.limit(name)
                    if limit is None:
                        continue
                    pair = (account._spent(name), limit)
                    if closest is None or _used(pair) > _used(closest):
                        closest = pair
                if closest is not None:
                    limits[name] = closest
            state = self.state
            return BudgetReport(
                usage=state.usage,
                cost_usd=state.cost,
                seconds=self.elapsed(),
                tool_calls=state.tool_calls,
                model_calls=state.model_calls,
                limits=limits,
            )

    def remaining(self) -> dict[str, float]:
        """What is left of each applicable limit, in its unit (reservations deducted)."""
        with self._lock:
            left: dict[str, float] = {}
            for account in self._chain():
                for name in LIMITS:
                    limit = account.limit(name)
                    if limit is None:
                        continue
                    free = max(0.0, limit - account._spent(name) - account._held_of(name))
                    left[name] = min(free, left.get(name, math.inf))
            return left

    def __repr__(self) -> str:
        return f"BudgetAccount({self.budget.limits()}, spent={self.report().summary()!r})"


_CALL_LIMITS: tuple[LimitName, ...] = (
    "max_seconds",
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
    "max_cost_usd",
)
_TOOL_LIMITS: tuple[LimitName, ...] = ("max_seconds", "max_tool_calls")


def _amount(hold: Hold, name: LimitName) -> float:
    if name == "max_total_tokens":
        return hold.input_tokens + hold.output_tokens
    if name == "max_input_tokens":
        return hold.input_tokens
    if name == "max_output_tokens":
        return hold.output_tokens
    return hold.cost_usd


def _plus(a: Hold, b: Hold, sign: int) -> Hold:
    return Hold(
        a.input_tokens + sign * b.input_tokens,
        a.output_tokens + sign * b.output_tokens,
        a.cost_usd + sign * b.cost_usd,
    )


def _used(pair: tuple[float, float]) -> float:
    spent, limit = pair
    return spent / limit if limit > 0 else math.inf
