"""LangGraph: the prebuilt ReAct graph (``create_react_agent``) with a scripted chat model.

The model is a minimal ``BaseChatModel`` whose ``bind_tools`` returns itself: LangGraph's own
fake models replay a fixed iterator and cannot answer "the next step" for many runs at once.
The graph is run through ``ainvoke`` with an async tool, like the other async contenders.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from anchors.common import (
    FINAL_ANSWER,
    SYSTEM_PROMPT,
    TASK,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    TOOL_PARAM,
    TOOL_PARAM_DESCRIPTION,
    Probe,
    RunSpec,
    Script,
    make_result,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, ConfigDict, Field

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # create_react_agent moved to `langchain` in LangGraph 1.0
    from langgraph.prebuilt import create_react_agent

DISTRIBUTIONS = ("langgraph", "langgraph-prebuilt", "langchain-core")
CONCURRENCY = "asyncio"


class LookupInput(BaseModel):
    """The lookup tool's arguments."""

    query: str = Field(description=TOOL_PARAM_DESCRIPTION)


class ScriptedChatModel(BaseChatModel):
    """Replies with the script's next tool call, then with the final answer."""

    script: Script
    probe: Probe
    latency_s: float = 0.0

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self

    def _reply(self) -> ChatResult:
        query = self.script.next_query()
        if query is None:
            message = AIMessage(content=FINAL_ANSWER)
        else:
            call = {"name": TOOL_NAME, "args": {TOOL_PARAM: query}, "id": self.script.call_id()}
            message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("the benchmark drives LangGraph asynchronously")

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        entered = self.probe.model_enter()
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        result = self._reply()
        self.probe.model_leave(entered)
        return result


def prepare(spec: RunSpec, probe: Probe) -> Callable[[], Awaitable[None]]:
    """A compiled graph per run; the recursion limit allows every step (two supersteps each)."""

    async def lookup(query: str) -> str:
        entered = probe.tool_enter()
        result = make_result(query, spec.result_bytes)
        probe.tool_leave(entered)
        return result

    tool = StructuredTool.from_function(
        coroutine=lookup, name=TOOL_NAME, description=TOOL_DESCRIPTION, args_schema=LookupInput
    )
    model = ScriptedChatModel(script=Script(spec.steps), probe=probe, latency_s=spec.latency_s)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = create_react_agent(model, [tool], prompt=SYSTEM_PROMPT)
    config = {"recursion_limit": 2 * spec.steps + 10}

    async def run() -> None:
        state = await graph.ainvoke({"messages": [("user", TASK)]}, config)
        if state["messages"][-1].content != FINAL_ANSWER:
            raise RuntimeError("LangGraph stopped before the final answer")

    return run
