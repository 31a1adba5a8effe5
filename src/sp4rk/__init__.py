"""sp4rk: a ReAct agent executor that finishes, stops itself when stuck and keeps its context small.

The root package is deliberately light: import the subpackages you need.

- :mod:`sp4rk.llm` — chat types, errors, token counting, providers, test doubles.
- :mod:`sp4rk.tools` — the tool protocol, the ``@tool`` decorator, the registry, built-in tools.
- :mod:`sp4rk.memory` — the context window that renders steps into prompts.
- :mod:`sp4rk.agent` — the executor and everything it plugs into.
"""

import logging

# A library logs, the application decides where that goes: without a handler of its own,
# Python would print sp4rk's warnings to stderr through its last-resort handler.
logging.getLogger("sp4rk").addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = ["__version__"]
