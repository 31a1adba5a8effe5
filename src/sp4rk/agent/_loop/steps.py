"""What a step means to the gates: productive work, checklist updates, mutations."""

from __future__ import annotations

from sp4rk.agent.types import Step
from sp4rk.tools.builtins.finish import FINISH_TOOL_NAME

CHECKLIST_TOOL = "update_checklist"
#: Tools whose success counts as changing the workspace (mutation gate, wrap-up mode).
MUTATING_TOOLS = frozenset(
    {"write_file", "edit_file", "create_directory", "delete_file", "delete_directory"}
)
REJECTED_PREFIX = "[Tool call rejected"


def is_productive(step: Step) -> bool:
    """Real work: any tool call except ``finish`` and checklist bookkeeping."""
    return step.tool_name not in ("", FINISH_TOOL_NAME, CHECKLIST_TOOL)


def is_successful_update(step: Step) -> bool:
    """A checklist update that the tool accepted."""
    return step.tool_name == CHECKLIST_TOOL and not step.is_error


def is_successful_mutation(step: Step) -> bool:
    """A file-changing call that ran and succeeded."""
    return (
        step.tool_name in MUTATING_TOOLS
        and not step.is_error
        and not step.observation.startswith(REJECTED_PREFIX)
    )
