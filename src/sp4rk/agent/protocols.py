"""The narrow seams the executor depends on, as structural protocols.

``LLMCaller`` lives in the llm layer and the context-manager seam below the memory layer, so
that the layers which implement them never import the agent; all are re-exported here.
"""

from __future__ import annotations

from sp4rk._core.archive import StepArchive
from sp4rk._core.context import (
    CompactionStrategy,
    ContextManager,
    IncrementalTrajectoryStore,
    InterjectionConsumer,
    ListTrajectoryStore,
    TrajectoryStore,
)
from sp4rk.llm.caller import LLMCaller, StreamingLLMCaller, supports_streaming
from sp4rk.tools.base import ToolReviewer
from sp4rk.tools.executor import ToolExecutor

__all__ = [
    "CompactionStrategy",
    "ContextManager",
    "IncrementalTrajectoryStore",
    "InterjectionConsumer",
    "LLMCaller",
    "ListTrajectoryStore",
    "StepArchive",
    "StreamingLLMCaller",
    "ToolExecutor",
    "ToolReviewer",
    "TrajectoryStore",
    "supports_streaming",
]
