"""Errors raised by LLM callers.

::

    LLMError                          any failure of a model call (status_code, retryable,
    │                                 retry_after)
    ├── ContextWindowExceededError    the request does not fit the model's window
    ├── LLMConnectionError            no (complete) HTTP answer: refused, reset, cut, or past
    │                                 the call's deadline (retryable)
    └── ProviderAPIError              the provider answered with an error status
        ├── RateLimitError            HTTP 429 (a tokens-per-minute "request too large" too)
        │   └── QuotaExceededError    429 for an exhausted quota or billing (never retryable)
        └── ProviderOverloadedError   the provider is overloaded (503, Anthropic 529)

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
        retry_after: seconds the server asked to wait before trying again (its
            ``Retry-After``), when it said so and the provider did not wait itself.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retryable = retryable
        self.retry_after = retry_after


class ContextWindowExceededError(LLMError):
    """The request is larger than the model's context window."""


class LLMConnectionError(LLMError):
    """The provider could not be reached, or did not answer in time."""


class ProviderAPIError(LLMError):
    """The provider answered with an error status.

    Attributes:
        code: the provider's machine-readable error code or type (``""`` when it gave none),
            for callers that branch on a cause rather than on message text.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        code: str = "",
    ) -> None:
        super().__init__(
            message, status_code=status_code, retryable=retryable, retry_after=retry_after
        )
        self.code = code


class RateLimitError(ProviderAPIError):
    """The provider refused the call for rate or quota reasons (HTTP 429).

    ``retryable`` is false for a request that can never fit the per-minute limit
    ("request too large") and for exhausted quotas.
    """


class QuotaExceededError(RateLimitError):
    """The account's quota or billing limit is exhausted; waiting will not help."""


class ProviderOverloadedError(ProviderAPIError):
    """The provider is temporarily overloaded (HTTP 503, Anthropic's 529)."""
