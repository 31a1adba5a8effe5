"""What a batch refuses before it starts: each error says what to fix.

::

    BatchError             bad input: an option, a model spec, tasks given in code
    ├── TaskFileError      the task file (each bad line, with its number)
    └── ResultsFileError   the results file (unreadable, locked, or a line that is no result)

A store that cannot be used raises ``sp4rk.store.StoreError``; a failing run never raises:
it becomes its task's result line.
"""

from __future__ import annotations


class BatchError(ValueError):
    """A batch cannot start as asked; the message says what to change."""
