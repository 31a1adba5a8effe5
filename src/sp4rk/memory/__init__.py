"""Context management: ``ContextWindow`` renders steps into prompts and keeps them in budget.

- :class:`ContextWindow` implements the executor's ``ContextManager``: prompt building,
  incremental token accounting, fill states, pruning and compaction with graceful fallbacks.
- Compaction strategies (``CompactionStrategy``): :class:`ObservationMaskingStrategy`,
  :class:`SlidingWindowStrategy`, :class:`SummarizationStrategy`, :class:`HierarchicalStrategy`.
  The window shows a strategy only the newest steps that could fit, as a :class:`StepRange`;
  a :class:`RollingSummarizer` also folds the steps that leave it into a running summary.
- :func:`validate_history` checks that a message list is valid for every provider.
"""

from sp4rk.memory.compaction import (
    HierarchicalStrategy,
    ObservationMaskingStrategy,
    RollingSummarizer,
    SlidingWindowStrategy,
    StepRange,
    SummarizationStrategy,
    Summarizer,
)
from sp4rk.memory.render import render_steps
from sp4rk.memory.validate import InvalidHistoryError, history_problems, validate_history
from sp4rk.memory.window import CACHE_BREAK, ContextWindow

__all__ = [
    "CACHE_BREAK",
    "ContextWindow",
    "HierarchicalStrategy",
    "InvalidHistoryError",
    "ObservationMaskingStrategy",
    "RollingSummarizer",
    "SlidingWindowStrategy",
    "StepRange",
    "SummarizationStrategy",
    "Summarizer",
    "history_problems",
    "render_steps",
    "validate_history",
]
