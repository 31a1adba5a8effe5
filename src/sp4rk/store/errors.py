"""What can go wrong with a runs store, each with the fix in its message.

::

    StoreError                 any failure to read or write the store
    ├── StoreCorruptError      not a database, damaged, or holding data sp4rk did not write
    ├── StoreLockedError       another process held the store longer than the busy timeout
    ├── StoreVersionError      written by a newer sp4rk (its schema version is unknown here)
    ├── RunNotFoundError       no run has that id (or the prefix matches several)
    └── RunBusyError           another live process is driving that run
"""

from __future__ import annotations


class StoreError(Exception):
    """The runs store could not be read or written; the message says what to do."""


class StoreCorruptError(StoreError):
    """The store file is damaged or is not an sp4rk runs store. Nothing in it was changed."""


class StoreLockedError(StoreError):
    """Another process kept the store locked past the busy timeout."""


class StoreVersionError(StoreError):
    """The store was written by a newer sp4rk; this one will not touch it."""


class RunNotFoundError(StoreError, LookupError):
    """No run matches the id (or an id prefix matches more than one run)."""


class RunBusyError(StoreError):
    """Another process that is still alive is driving the run."""
