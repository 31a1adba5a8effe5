"""``RunState``: everything a run needs later, as typed data that survives pause and resume.

A run is its trajectory (the steps, what the model saw) plus this state (what the executor
counted and decided). Both go into a checkpoint; nothing is ever read back from the wording
of a message, so a user's message or a tool's output can never change the executor's state::

    RunState
    ├── iteration, response_groups      how far the run got
    ├── step_budget                     steps granted beyond max_steps, or unlimited
    ├── breakers                        repeat · truncation · parse_error · fruitless · same_tool
    ├── gates                           finish_guard · mutation · checklist
    ├── nudges                          one-shot nudges already given
    ├── taint                           untrusted content seen: from where, since when
    ├── budget                          tokens, cost, time and tool calls spent; grants
    └── pending_messages, pending_interjection, verify_pending
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from sp4rk._internal.serde import Serializable
from sp4rk.agent.breakers import BreakerSet
from sp4rk.agent.budget import BudgetState
from sp4rk.agent.gates import Gates
from sp4rk.agent.hitl import StepLimitResponse
from sp4rk.agent.taint import TaintState

#: Steps before the end of the budget at which the wrap-up nudge fires.
WRAP_UP_MARGIN = 3
#: Most live messages a state may hold undelivered (a bound for hostile checkpoints).
MAX_PENDING_MESSAGES = 1000


@dataclass(slots=True, kw_only=True)
class StepBudget(Serializable):
    """The step budget beyond ``max_steps``: what the human granted at the limit."""

    granted: int = 0
    """Steps granted on top of the executor's ``max_steps``."""
    unlimited: bool = False
    """The human lifted the limit for this run."""

    def limit(self, max_steps: int) -> int:
        """The last step number the run may take."""
        return max_steps + self.granted

    def exhausted(self, step: int, max_steps: int) -> bool:
        """Whether ``step`` lies beyond the budget (the human must be asked)."""
        return not self.unlimited and step > self.limit(max_steps)

    def extend(self, answer: StepLimitResponse, max_steps: int) -> int | None:
        """Apply the human's answer at the limit.

        Returns:
            The steps granted (``0`` when the limit was lifted), or ``None`` on a denial.
        """
        if answer is StepLimitResponse.ALLOW_ONCE:
            self.granted += 1
            return 1
        if answer is StepLimitResponse.ALLOW_MORE:
            granted = max(max_steps, 1)
            self.granted += granted
            return granted
        if answer is StepLimitResponse.ALLOW_ALWAYS:
            self.unlimited = True
            return 0
        return None


@dataclass(slots=True, kw_only=True)
class NudgeFlags(Serializable):
    """Nudges with a per-run budget, and whether each was used."""

    text_replies: int = 0
    """Text-only replies answered with a nudge (two per run, then the text is accepted)."""
    wrap_up_given: bool = False
    """The few-steps-left nudge was given."""
    pre_warning_given: bool = False
    """The pre-compaction warning was given (re-armed after each compaction)."""

    def take_text_reply_nudge(self, allowed: int) -> int:
        """Use one of the ``allowed`` text-reply nudges: its number, or 0 when none is left."""
        if self.text_replies >= allowed:
            return 0
        self.text_replies += 1
        return self.text_replies

    def give_wrap_up(self) -> None:
        """The few-steps-left nudge was given (once per run)."""
        self.wrap_up_given = True

    def give_pre_warning(self) -> None:
        """The pre-compaction warning was given."""
        self.pre_warning_given = True

    def rearm_pre_warning(self) -> None:
        """The context was compacted: warn again before the next compaction."""
        self.pre_warning_given = False


@dataclass(slots=True, kw_only=True)
class RunState(Serializable):
    """The executor's state of one run: pass it back with the steps to resume exactly.

    ``ExecutorResult.state`` carries it; ``Executor(..., resume_steps=steps,
    resume_state=state)`` continues from it (``load_checkpoint`` returns both together).
    """

    iteration: int = 0
    """Model responses so far; each counts against ``max_steps`` (the next step is +1)."""
    response_groups: int = 0
    """The last response-group number handed out."""
    step_budget: StepBudget = field(default_factory=StepBudget)
    breakers: BreakerSet = field(default_factory=BreakerSet)
    gates: Gates = field(default_factory=Gates)
    nudges: NudgeFlags = field(default_factory=NudgeFlags)
    taint: TaintState = field(default_factory=TaintState)
    budget: BudgetState = field(default_factory=BudgetState)
    pending_messages: list[str] = field(default_factory=list)
    """Live user messages not delivered yet: the next boundaries deliver them, one each."""
    pending_interjection: str = ""
    """A resume interjection the context manager had not retired when the run stopped."""
    verify_pending: bool = False
    """A verify-on-edit run is owed for the current response."""

    def __post_init__(self) -> None:
        negative = _negative_count(self, "state")
        if negative:
            raise ValueError(f"RunState counters must not be negative: {negative}")
        if len(self.pending_messages) > MAX_PENDING_MESSAGES:
            raise ValueError(f"RunState holds more than {MAX_PENDING_MESSAGES} pending messages")

    def queue_message(self, text: str) -> None:
        """Deliver ``text`` to the model at the next step boundary (after the earlier ones)."""
        if not isinstance(text, str):
            raise TypeError(f"a message must be a str, got {type(text).__name__}")
        if len(self.pending_messages) >= MAX_PENDING_MESSAGES:
            raise ValueError(f"at most {MAX_PENDING_MESSAGES} messages may wait for delivery")
        self.pending_messages.append(text)

    def advance(self) -> None:
        """The step is over: the next model response is the next step."""
        self.iteration += 1

    def owe_verification(self) -> None:
        """A successful edit in the current response: verify-on-edit runs at its end."""
        self.verify_pending = True

    def settle_verification(self) -> bool:
        """Whether a verification was owed (it is no longer)."""
        owed, self.verify_pending = self.verify_pending, False
        return owed

    def keep_interjection(self, text: str) -> None:
        """The context manager still held ``text`` when the run stopped."""
        self.pending_interjection = text

    def take_message(self) -> str | None:
        """The oldest undelivered message, removed from the queue (``None`` when empty)."""
        return self.pending_messages.pop(0) if self.pending_messages else None

    def next_response_group(self) -> int:
        """A new response-group number: every model response gets one."""
        self.response_groups += 1
        return self.response_groups


def _negative_count(value: object, path: str) -> str:
    """The first integer field below ``value`` that is negative (``""`` when none).

    A hostile checkpoint could otherwise switch a breaker off, or skip the text-reply nudges,
    with a count below zero. Every run builds a state, so the walk reads each class's field
    names once (``_field_names``) and builds a path only for the field it reports.
    """
    for name in _field_names(type(value)):
        item = getattr(value, name)
        kind = type(item)
        if kind is bool or kind is str:
            continue
        if isinstance(item, int) and not isinstance(item, bool):
            if item < 0:
                return f"{path}.{name}"
        elif isinstance(item, float):
            if not item >= 0:  # negative or NaN
                return f"{path}.{name}"
        elif _field_names(kind):
            found = _negative_count(item, f"{path}.{name}")
            if found:
                return found
    return ""


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """The dataclass fields of ``cls`` (none for any other class), read once per class."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = (
            tuple(f.name for f in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) else ()
        )
        _FIELD_NAMES[cls] = names
    return names
