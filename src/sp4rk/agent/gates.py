"""Finish gates: what must be true before a run may end, each gate owning its own state.

The finish guard (the host's callback), the mutation gate (a file must have changed) and the
checklist gate (keep a checklist, finish it) each reject a finish attempt at most once per run
(soft gates), except the mutation gate, whose second rejection ends the run unfinished. The
gates watch every recorded step, so their state is plain data saved with the run's state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sp4rk._core.trajectory import Step
from sp4rk._internal import safejson
from sp4rk._internal.serde import Serializable
from sp4rk.agent._loop import nudges
from sp4rk.tools.base import ToolTraits
from sp4rk.tools.builtins.checklist import ChecklistItem, parse_checklist
from sp4rk.tools.builtins.finish import FINISH_TOOL_NAME

CHECKLIST_TOOL = "update_checklist"
#: A task with more productive calls than this is not trivial: it needs a checklist.
TRIVIAL_THRESHOLD = 2
#: Productive calls since the last update that make the checklist stale.
STALENESS_THRESHOLD = 3
#: Most staleness nudges per run.
STALE_NUDGE_CAP = 2
#: Recent tool calls in which a successful change counts as progress (for the wrap-up nudge).
PROGRESS_WINDOW = 5


@dataclass(frozen=True, slots=True)
class Rejection:
    """A gate's reason to refuse a finish, and the diagnostic that reports it."""

    reason: str
    event: str
    details: dict[str, object]


def is_productive(step: Step) -> bool:
    """Real work: any tool call except ``finish`` and checklist bookkeeping."""
    return step.tool_name not in ("", FINISH_TOOL_NAME, CHECKLIST_TOOL)


def is_successful_update(step: Step) -> bool:
    """A checklist update that the tool accepted."""
    return step.tool_name == CHECKLIST_TOOL and not step.is_error


def checklist_items(step: Step) -> list[ChecklistItem]:
    """The checklist items in an ``update_checklist`` call's ``todo_list`` argument."""
    if step.action is None:
        return []
    try:
        data = safejson.loads(step.action.input)
    except ValueError:
        return []
    todo = data.get("todo_list") if isinstance(data, dict) else None
    return parse_checklist(todo)[0] if isinstance(todo, str) else []


@dataclass(slots=True, kw_only=True)
class FinishGuardGate(Serializable):
    """The host's finish guard: its first rejection stands, the next finish is accepted."""

    rejected: bool = False

    def should_ask(self) -> bool:
        """Whether the guard still gets a say (it has not rejected yet)."""
        return not self.rejected

    def reject(self) -> None:
        """The guard rejected a finish; it will not be asked again this run."""
        self.rejected = True


@dataclass(slots=True, kw_only=True)
class MutationGate(Serializable):
    """A run that must change files: the first finish without a change is rejected."""

    seen: bool = False
    """A mutating tool succeeded in this run."""
    nudged: bool = False
    """A finish was already rejected for lack of a change."""
    calls_since_change: int | None = None
    """Tool calls since the last successful change (``None``: none yet)."""

    def observe(self, step: Step, traits: ToolTraits) -> None:
        """Note a recorded tool step (nudge-only steps are ignored)."""
        if step.action is None:
            return
        if traits.mutating and not step.is_error:
            self.seen = True
            self.calls_since_change = 0
        elif self.calls_since_change is not None:
            self.calls_since_change += 1

    def recent_progress(self) -> bool:
        """Whether one of the last few tool calls changed the workspace."""
        return self.calls_since_change is not None and self.calls_since_change < PROGRESS_WINDOW

    def check(self) -> Rejection | None:
        """Reject the first finish without a change (the second ends the run unfinished)."""
        if self.seen or self.nudged:
            return None
        self.nudged = True
        return Rejection(
            nudges.MUTATION_REQUIRED, "mutation_gate_nudge", {"reason": "finish_without_mutation"}
        )

    def unmet(self) -> bool:
        """Whether a finish now must end the run unfinished (nudged before, still no change)."""
        return not self.seen


@dataclass(slots=True, kw_only=True)
class ChecklistGate(Serializable):
    """Keep a progress checklist on non-trivial tasks, update it as you go, finish it."""

    items: list[ChecklistItem] | None = None
    """The last successful update's checklist (``None`` before the first one)."""
    productive_calls: int = 0
    since_update: int = 0
    stale_nudges: int = 0
    missing_nudged: bool = False
    unchecked_nudged: bool = False

    def observe(self, step: Step) -> None:
        """Count productive calls and take in successful checklist updates."""
        if is_successful_update(step):
            self.items = checklist_items(step)
            self.since_update = 0
        elif is_productive(step):
            self.productive_calls += 1
            self.since_update += 1

    def check(self) -> Rejection | None:
        """A finish-time nudge: a missing checklist, or one with unchecked items."""
        if self.items is None:
            if self.missing_nudged or self.productive_calls <= TRIVIAL_THRESHOLD:
                return None
            self.missing_nudged = True
            return Rejection(
                nudges.CHECKLIST_MISSING,
                "checklist_gate_nudge",
                {"reason": "finish_without_checklist"},
            )
        unchecked = sum(not item.done for item in self.items)
        if self.unchecked_nudged or unchecked == 0:
            return None
        self.unchecked_nudged = True
        return Rejection(
            nudges.checklist_unchecked(unchecked),
            "checklist_unchecked_nudge",
            {"reason": "finish_with_unchecked_checklist", "unchecked": unchecked},
        )

    def newly_checked(self, update: Step) -> int:
        """Items ``update`` checks that the previous checklist had open (0 for the first one)."""
        if self.items is None or not is_successful_update(update):
            return 0
        before = {item.text: item.done for item in self.items}
        return sum(1 for i in checklist_items(update) if i.done and before.get(i.text) is False)

    def stale_calls(self) -> int:
        """Productive calls since the last update when that is a nudge's worth, else 0.

        Counts the nudge: at most ``STALE_NUDGE_CAP`` per run.
        """
        if self.items is None or self.stale_nudges >= STALE_NUDGE_CAP:
            return 0
        if self.since_update < STALENESS_THRESHOLD:
            return 0
        self.stale_nudges += 1
        return self.since_update


@dataclass(slots=True, kw_only=True)
class Gates(Serializable):
    """Every finish gate of one run."""

    finish_guard: FinishGuardGate = field(default_factory=FinishGuardGate)
    mutation: MutationGate = field(default_factory=MutationGate)
    checklist: ChecklistGate = field(default_factory=ChecklistGate)

    def observe(self, step: Step, traits: ToolTraits) -> None:
        """Show a recorded step to the gates that count steps."""
        self.mutation.observe(step, traits)
        self.checklist.observe(step)
