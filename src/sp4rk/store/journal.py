"""``StoreJournal``: an executor's ``RunJournal`` that writes one run into a runs store.

It also serves the run's live user messages (``Executor(user_message_source=...)``): a
message is stored the moment it is typed, handed to the executor at a boundary, and marked
delivered in the same transaction that commits the step carrying it — so a crash neither
loses a message nor delivers it twice.

It is a :class:`~sp4rk.agent.StepArchive` as well: the executor drops the observations of
committed steps from memory and reads them back from the store when they are read.

A response whose calls were cut short (a crash, or a cancel while a call ran) is never
committed from memory: its steps are left to :meth:`SQLRunStore.recover`, which closes it
from the ledger, so an interrupted call always reads "outcome unknown" and never re-runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sp4rk.agent import RunState, Step
from sp4rk.llm import ChatResponse, ToolCall
from sp4rk.store.records import Usage
from sp4rk.store.sql import SQLRunStore
from sp4rk.tools import RunContext


@dataclass(slots=True)
class _InFlight:
    """The response whose calls are running, and what the ledger knows of them."""

    response: ChatResponse
    group: int
    step: int
    started: set[int] = field(default_factory=set)
    recorded: set[int] = field(default_factory=set)

    def position(self, call: ToolCall, among: set[int] | None = None) -> int:
        """The call's index in the response: by identity, else the first free one of its id."""
        calls = self.response.message.tool_calls
        for i, c in enumerate(calls):
            if c is call:
                return i
        for i, c in enumerate(calls):
            if c.id == call.id and (among is None or i not in among):
                return i
        return len(calls)  # not part of the response (never happens in the executor)

    def cut_short(self) -> bool:
        """A call started and never reported back."""
        return bool(self.started - self.recorded)


class StoreJournal:
    """Records one run's boundaries, responses and tool calls in ``store`` as they happen.

    Args:
        store: the runs store.
        run_id: the run (claimed by this process).
        state: the run state it starts from (for the response-group numbering).
        usage: returns the run's usage so far, saved at every boundary.
    """

    def __init__(
        self,
        store: SQLRunStore,
        run_id: str,
        *,
        state: RunState | None = None,
        usage: Callable[[], Usage] | None = None,
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._groups = state.response_groups if state is not None else 0
        self._usage = usage
        self._in_flight: _InFlight | None = None
        self._stored = -1  # the run's step count in the store after the last boundary
        self._queue: list[tuple[int, str]] = []
        self._handed_out: list[int] = []
        self.on_delivered: Callable[[str], None] | None = None
        """Called with each message as the executor takes it (to show it as delivered)."""

    # --- live messages -------------------------------------------------------------------

    def add_message(self, text: str) -> None:
        """Store a live message (durably) and queue it for the next boundary."""
        seq = self._store.queue_message(self._run_id, text)
        self._queue.append((seq, text))

    def next_message(self, ctx: RunContext) -> str:
        """``user_message_source``: the oldest queued message, or ``""``."""
        if not self._queue:
            return ""
        seq, text = self._queue.pop(0)
        self._handed_out.append(seq)
        if self.on_delivered is not None:
            self.on_delivered(text)
        return text

    @property
    def queued(self) -> int:
        """Messages typed but not handed to the executor yet."""
        return len(self._queue)

    # --- RunJournal ----------------------------------------------------------------------

    def on_boundary(self, new_steps: Sequence[Step], state: RunState) -> None:
        """Commit the new steps and the state together (one transaction)."""
        flight = self._in_flight
        steps = list(new_steps)
        closed: list[int] = []
        if flight is not None:
            if flight.cut_short():  # left to recovery, which answers every call from the ledger
                steps = [s for s in steps if s.action is None or s.response_group != flight.group]
            else:
                closed.append(flight.group)
        usage = self._usage() if self._usage is not None else None
        self._stored = self._store.commit_boundary(
            self._run_id,
            steps,
            state,
            usage=usage,
            delivered=self._handed_out,
            closed_groups=closed,
        )
        self._handed_out = []
        self._groups = max(self._groups, state.response_groups)
        if closed:
            self._in_flight = None

    # --- StepArchive: committed observations are read back from the store ---------------

    def stored_steps(self) -> int:
        """The run's steps in the store after the last boundary (``-1`` before the first)."""
        return self._stored

    def read_steps(self, start: int, stop: int) -> list[Step]:
        """The run's committed steps ``[start, stop)`` (``SQLRunStore.read_steps``)."""
        return self._store.read_steps(self._run_id, start, stop)

    def on_response(self, step: int, response: ChatResponse) -> None:
        """Keep the response until its steps are committed."""
        group = self._groups + 1
        self._store.record_response(self._run_id, group, step, response)
        self._in_flight = _InFlight(response, group, step)

    def on_call_start(self, step: int, call: ToolCall) -> None:
        """Record the call as started, durably, before it runs."""
        flight = self._flight()
        position = flight.position(call, flight.started)
        self._store.record_call_start(self._run_id, flight.group, position, step, call)
        flight.started.add(position)

    def on_call_step(self, step: int, recorded: Step) -> None:
        """Record the call's step: it completed (or was answered without running)."""
        flight = self._flight()
        assert recorded.action is not None
        position = flight.position(recorded.action, flight.recorded)
        self._store.record_call_step(self._run_id, flight.group, position, step, recorded)
        flight.recorded.add(position)

    def _flight(self) -> _InFlight:
        if self._in_flight is None:
            raise RuntimeError("a tool call was reported before its response (journal misuse)")
        return self._in_flight
