"""Chat types, errors, token counting and the model providers.

Providers (``OpenAIChatProvider``, ``OpenAIResponsesProvider``, ``AnthropicProvider``,
``Router``) load lazily, so ``import sp4rk.llm`` works without any provider SDK installed;
naming one without its SDK raises an ``ImportError`` that says which extra to install.
``from sp4rk.llm import *`` names all four, so it needs both the ``openai`` and the
``anthropic`` extra (import the names you use otherwise). ``LocalProvider`` is not part of
``*`` (it needs the ``local`` extra) but resolves lazily like the others, and lives in
:mod:`sp4rk.llm.local` (offline GGUF models). More lives in submodules:
:mod:`sp4rk.llm.cassette` (record/replay), :mod:`sp4rk.llm.errors` (the full error tree) and
:mod:`sp4rk.llm.testing` (test doubles).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sp4rk.llm.errors import (
    ContextWindowExceededError,
    LLMConnectionError,
    LLMError,
    ProviderAPIError,
    ProviderOverloadedError,
    QuotaExceededError,
    RateLimitError,
)
from sp4rk.llm.tokens import SimpleTokenCounter, TokenCounter
from sp4rk.llm.types import (
    ChatRequest,
    ChatResponse,
    ContentBlock,
    Message,
    ReasoningItem,
    TokenUsage,
    ToolCall,
    ToolDefinition,
)

if TYPE_CHECKING:
    from sp4rk.llm.anthropic import AnthropicProvider
    from sp4rk.llm.local import LocalProvider as LocalProvider
    from sp4rk.llm.openai_chat import OpenAIChatProvider
    from sp4rk.llm.openai_responses import OpenAIResponsesProvider
    from sp4rk.llm.router import Router

_LAZY = {
    "AnthropicProvider": "sp4rk.llm.anthropic",
    "LocalProvider": "sp4rk.llm.local",
    "OpenAIChatProvider": "sp4rk.llm.openai_chat",
    "OpenAIResponsesProvider": "sp4rk.llm.openai_responses",
    "Router": "sp4rk.llm.router",
}

__all__ = [
    "AnthropicProvider",
    "ChatRequest",
    "ChatResponse",
    "ContentBlock",
    "ContextWindowExceededError",
    "LLMConnectionError",
    "LLMError",
    "Message",
    "OpenAIChatProvider",
    "OpenAIResponsesProvider",
    "ProviderAPIError",
    "ProviderOverloadedError",
    "QuotaExceededError",
    "RateLimitError",
    "ReasoningItem",
    "Router",
    "SimpleTokenCounter",
    "TokenCounter",
    "TokenUsage",
    "ToolCall",
    "ToolDefinition",
]


def __getattr__(name: str) -> Any:
    """Import a provider class on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sp4rk.llm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_LAZY))
