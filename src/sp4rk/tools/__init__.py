"""The tool layer: the ``Tool`` protocol, the ``@tool`` decorator, ``Registry`` and ``RunContext``.

Knows nothing of :mod:`sp4rk.agent`; the executor drives tools through ``Registry``.
"""

import logging

from sp4rk.tools.base import (
    CacheMode,
    ContentBackedReader,
    Tool,
    ToolDescriptor,
    ToolError,
    ToolPolicy,
    ToolResult,
)
from sp4rk.tools.context import RunContext
from sp4rk.tools.function import FunctionTool, tool
from sp4rk.tools.registry import Registry

logging.getLogger("sp4rk.tools").addHandler(logging.NullHandler())

__all__ = [
    "CacheMode",
    "ContentBackedReader",
    "FunctionTool",
    "Registry",
    "RunContext",
    "Tool",
    "ToolDescriptor",
    "ToolError",
    "ToolPolicy",
    "ToolResult",
    "tool",
]
