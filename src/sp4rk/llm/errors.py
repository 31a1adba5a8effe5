"""Errors raised by LLM callers.

::

    LLMError                      any failure of a model call (status_code, retryable)
    ├── ContextWindowExceededError  the request does not fit the model's window
    └── RateLimitError              HTTP 429 (a tokens-per-minute "request too large" too)

Providers map their SDK's exceptions onto these at the adapter, so the executor never imports
an SDK. The executor reacts to exactly :class:`ContextWindowExceededError` by compacting the
context and retrying; everything else propagates. No message ever contains an API key.
"""

from __future__ import annotations


class LLMError(Exception):
    """A model call failed.

    Attributes:
        status_code: the HTTP status, when there was one.
        retryable: whether trying the same call again may succeed.
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, retryable: bool = False
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retryable = retryable


class ContextWindowExceededError(LLMError):
    """The request is larger than the model's context window."""


class RateLimitError(LLMError):
    """The provider refused the call for rate or quota reasons (HTTP 429)."""
