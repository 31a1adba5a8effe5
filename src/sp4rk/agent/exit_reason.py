"""``ExitReason``: why ``Executor.run`` returned.

A module of its own, so that every part of the agent layer can name a reason without
importing the others.
"""

from __future__ import annotations

import enum


class ExitReason(enum.Enum):
    """Why ``Executor.run`` returned."""

    FINISHED = "finished"
    """The model called ``finish`` and every gate accepted it."""
    IMPLICIT_FINISH = "implicit_finish"
    """The model kept replying with text after two nudges; the text was accepted."""
    PAUSED = "paused"
    """The pause checker asked to stop; ``steps`` is a resumable checkpoint."""
    STEP_LIMIT = "step_limit"
    """The step budget ran out and the HITL handler granted no more."""
    REPEAT_ABORT = "repeat_abort"
    """The same call with the same arguments was repeated too many times."""
    TRUNCATION_ABORT = "truncation_abort"
    """Responses kept being cut at the output-token limit."""
    PARSE_ERROR_ABORT = "parse_error_abort"
    """A tool's input kept failing to parse."""
    FRUITLESS_ABORT = "fruitless_abort"
    """Calls kept returning empty or minimal results."""
    SAME_TOOL_ABORT = "same_tool_abort"
    """One tool kept being called with varied arguments but similar results."""
    CYCLE_ABORT = "cycle_abort"
    """A sequence of calls kept repeating with unchanged results (A-B-A-B …)."""
    NO_PROGRESS_ABORT = "no_progress_abort"
    """Call after call returned what the same call had already returned."""
    MUTATION_REQUIRED = "mutation_required"
    """The run had to change files, none were changed, and the model finished anyway."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    """A budget limit (tokens, cost, time or tool calls) was reached and the HITL handler
    granted no more; ``state.budget.exhausted`` names it, ``output`` is the best answer so
    far."""
