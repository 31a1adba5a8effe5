"""The tool layer: the ``Tool`` protocol, the ``@tool`` decorator, ``Registry`` and ``RunContext``.

Knows nothing of :mod:`sp4rk.agent`; the executor drives tools through ``Registry``.
"""

import logging

from sp4rk.tools.base import (
    CacheMode,
    ContentBackedReader,
    RiskJudge,
    Tool,
    ToolDescriptor,
    ToolError,
    ToolPolicy,
    ToolResult,
    ToolReview,
    ToolReviewer,
    ToolRiskAssessor,
    ToolTraits,
)
from sp4rk.tools.context import RunContext
from sp4rk.tools.executor import ToolExecutor
from sp4rk.tools.function import FunctionTool, tool
from sp4rk.tools.registry import Registry

logging.getLogger("sp4rk.tools").addHandler(logging.NullHandler())

__all__ = [
    "CacheMode",
    "ContentBackedReader",
    "FunctionTool",
    "Registry",
    "RiskJudge",
    "RunContext",
    "Tool",
    "ToolDescriptor",
    "ToolError",
    "ToolExecutor",
    "ToolPolicy",
    "ToolResult",
    "ToolReview",
    "ToolReviewer",
    "ToolRiskAssessor",
    "ToolTraits",
    "tool",
]
