"""Chat types, errors and token counting shared by providers and the executor.

Providers (``OpenAIChatProvider``, ``OpenAIResponsesProvider``, ``AnthropicProvider``,
``Router``) load lazily, so ``import sp4rk.llm`` works without any provider SDK installed.
Test doubles live in :mod:`sp4rk.llm.testing`.
"""

from sp4rk.llm.errors import ContextWindowExceededError, LLMError, RateLimitError
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

__all__ = [
    "ChatRequest",
    "ChatResponse",
    "ContentBlock",
    "ContextWindowExceededError",
    "LLMError",
    "Message",
    "RateLimitError",
    "ReasoningItem",
    "SimpleTokenCounter",
    "TokenCounter",
    "TokenUsage",
    "ToolCall",
    "ToolDefinition",
]
