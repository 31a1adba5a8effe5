"""Built-in tools, under the tool names the reference uses."""

from sp4rk.tools.builtins.checklist import ChecklistItem, parse_checklist, update_checklist
from sp4rk.tools.builtins.facts import search_facts, store_fact
from sp4rk.tools.builtins.finish import FinishTool, new_finish_tool, parse_finish_answer
from sp4rk.tools.builtins.result_read import tool_result_read

__all__ = [
    "ChecklistItem",
    "FinishTool",
    "new_finish_tool",
    "parse_checklist",
    "parse_finish_answer",
    "search_facts",
    "store_fact",
    "tool_result_read",
    "update_checklist",
]
