"""Context management: ``ContextWindow`` renders steps into prompts and keeps them in budget."""

from sp4rk.memory.render import render_steps
from sp4rk.memory.window import CACHE_BREAK, ContextWindow

__all__ = ["CACHE_BREAK", "ContextWindow", "render_steps"]
