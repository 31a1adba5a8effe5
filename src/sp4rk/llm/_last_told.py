"""What the model was told last: why a scripted or replayed run asked for one response more."""

from __future__ import annotations

from sp4rk.llm.types import ChatRequest


def last_observation(request: ChatRequest, limit: int = 400) -> str:
    """What the model was told last, as a sentence for an error message (``""``: nothing).

    When a script runs out, this is usually why: a gate rejected a finish, a breaker
    nudged, a tool failed.
    """
    for message in reversed(request.messages):
        if message.role in ("tool", "user") and message.content.strip():
            text = " ".join(message.content.split())
            if len(text) > limit:
                text = text[: limit - 1] + "…"
            what = "a tool result" if message.role == "tool" else "a message"
            told = f"The last thing the model was told ({what}): {text!r}. "
            if text.startswith("Finish rejected:"):
                told += (
                    "A gate refused the finish: script what it asks for, or switch the gate "
                    "off (checklist: executor.set_checklist_gate_enabled(False)). "
                )
            return told
        if message.role == "assistant":
            break
    return ""
