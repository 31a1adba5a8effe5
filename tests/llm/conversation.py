"""One conversation exercising every message feature, shared by the request-mapping tests."""

from __future__ import annotations

from sp4rk.llm.types import (
    ChatRequest,
    ContentBlock,
    Message,
    ReasoningItem,
    ToolCall,
    ToolDefinition,
)

READ_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"path": {"type": "string", "description": "File path."}},
    "required": ["path"],
    "additionalProperties": False,
}
TOOLS = [ToolDefinition("read_file", "Read a file.", READ_SCHEMA)]

MESSAGES = [
    Message("system", "You are terse."),
    Message("system", "Plan: step 1"),
    Message(
        "user",
        "Look at this",
        content_blocks=[ContentBlock("image", image_b64="AAAA", media_type="image/png")],
    ),
    Message(
        "assistant",
        "Reading.",
        reasoning_content="I should read",
        tool_calls=[ToolCall("call:1", "read_file", '{"path": "a.txt"}')],
        reasoning_items=[
            ReasoningItem("rs_1", "summary one"),
            ReasoningItem("thinking:sig-1", "thought one"),
        ],
    ),
    Message("tool", "", tool_call_id="call:1"),
    Message("user", "continue"),
]


def full_request(**changes: object) -> ChatRequest:
    request = ChatRequest(
        messages=list(MESSAGES),
        tools=list(TOOLS),
        max_tokens=4000,
        temperature=0.2,
        top_p=0.9,
        top_k=40,
        presence_penalty=0.1,
        reasoning_effort="high",
    )
    for name, value in changes.items():
        setattr(request, name, value)
    return request
