"""The same shape fed to OpenHands SDK's ``StuckDetector``, through its own event types.

The shape's replies are played against a fresh :class:`~world.World` with the same tools, so
every observation is the one sp4rk's run saw (before any breaker intervened). Each reply
becomes the events OpenHands' agent emits for it: an ``ActionEvent`` per tool call (the reply's
thought on the first, as its agent does), then an ``ObservationEvent`` per result, or an
``AgentErrorEvent`` for a tool that failed (OpenHands' agent turns a tool's exception into one);
a text-only reply is a ``MessageEvent`` from the agent. Tools are modelled as MCP tools
(``MCPToolAction``/``MCPToolObservation``), OpenHands' generic tool types.

Before every model call, the detector is consulted exactly as ``LocalConversation.run`` does it
(``_check_stuck_or_nudge``): first ``get_action_error_nudge()``, whose nudge is appended as an
environment message; otherwise ``is_stuck()``, which stops the run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
import uuid
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from shapes import Shape
from world import World

from sp4rk.tools import RunContext

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map download
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")

from openhands.sdk import LLM, Agent
from openhands.sdk.conversation.state import ConversationState
from openhands.sdk.conversation.stuck_detector import StuckDetector
from openhands.sdk.event import (
    ActionEvent,
    AgentErrorEvent,
    MessageEvent,
    ObservationEvent,
)
from openhands.sdk.llm import Message, MessageToolCall, TextContent
from openhands.sdk.mcp.definition import MCPToolAction, MCPToolObservation
from openhands.sdk.workspace import LocalWorkspace
from pydantic import SecretStr

VERSION = version("openhands-sdk")

for _name in ("openhands", "LiteLLM", "litellm"):
    logging.getLogger(_name).setLevel(logging.ERROR)


@dataclass(frozen=True)
class Outcome:
    """How OpenHands' detector judged the history, in model calls."""

    stuck_at: int
    """Model calls made when ``is_stuck()`` first said so (0: never)."""
    pattern: str
    """Which of its checks fired."""
    first_warning: int
    """Model calls made when its action-error nudge was first given (0: never)."""
    model_calls: int
    """Model calls the run made: up to ``stuck_at``, the shape's end, or the limit."""


def _state(workdir: str) -> ConversationState:
    # The agent is only the state's owner here: its LLM is never called.
    agent = Agent(llm=LLM(model="openai/scripted", api_key=SecretStr("offline"), usage_id="bench"))
    state = ConversationState.create(
        id=uuid.uuid4(), agent=agent, workspace=LocalWorkspace(working_dir=workdir)
    )
    task = Message(role="user", content=[TextContent(text="Fix the failing test.")])
    state.append_event(MessageEvent(source="user", llm_message=task))
    return state


def _pattern(detector: StuckDetector) -> str:
    """Name the check that fired (re-running the detector's own checks, read-only)."""
    events = detector._events_since_last_user_message()
    need = max(detector.action_observation_threshold, detector.action_error_threshold + 1)
    actions, observations = detector._collect_actions_and_observations(events, need)
    if detector._is_stuck_repeating_action_error(actions, observations):
        return "action-error"
    if detector._is_stuck_repeating_action_observation(actions, observations):
        return "action-observation"
    if detector._is_stuck_monologue(events):
        return "monologue"
    return "alternating"


def _emit(state: ConversationState, world_tools: Any, n: int, turn: Any) -> None:
    """Append the events of reply ``n``, running its calls against the world."""
    if turn.answer is None and not turn.calls:
        reply = Message(role="assistant", content=[TextContent(text=turn.text)])
        state.append_event(MessageEvent(source="agent", llm_message=reply))
        return
    actions = []
    for i, (name, args) in enumerate(turn.calls):
        call_id = f"call_{n}_{i}"
        thought = [TextContent(text=turn.text)] if turn.text and i == 0 else []
        tool_call = MessageToolCall(
            id=call_id, name=name, arguments=json.dumps(args), origin="completion"
        )
        event = ActionEvent(
            thought=thought,
            action=MCPToolAction(data=args),
            tool_name=name,
            tool_call_id=call_id,
            tool_call=tool_call,
            llm_response_id=f"response_{n}",
        )
        state.append_event(event)
        actions.append((event, name, args, call_id))
    for event, name, args, call_id in actions:
        result = asyncio.run(world_tools.execute(RunContext(), name, json.dumps(args)))
        if result.is_error:
            error = f"Error executing tool '{name}': {result.content}"
            state.append_event(AgentErrorEvent(error=error, tool_name=name, tool_call_id=call_id))
        else:
            observation = MCPToolObservation.from_text(result.content, tool_name=name)
            state.append_event(
                ObservationEvent(
                    observation=observation,
                    action_id=event.id,
                    tool_name=name,
                    tool_call_id=call_id,
                )
            )


def run(shape: Shape, max_calls: int) -> Outcome:
    """Play ``shape`` into a conversation state, consulting the detector before every call."""
    world = World()
    shape.setup(world)
    tools = world.registry()
    with tempfile.TemporaryDirectory() as workdir:
        state = _state(workdir)
        detector = StuckDetector(state)
        first_warning = 0
        for n in range(max_calls + 1):
            if n > 0:  # LocalConversation._check_stuck_or_nudge, before model call n + 1
                nudge = detector.get_action_error_nudge()
                if nudge is not None:
                    first_warning = first_warning or n
                    text = Message(role="user", content=[TextContent(text=nudge)])
                    state.append_event(MessageEvent(source="environment", llm_message=text))
                elif detector.is_stuck():
                    return Outcome(n, _pattern(detector), first_warning, n)
            if n == max_calls:
                break
            turn = shape.turn(n)
            if turn.answer is not None:
                return Outcome(0, "", first_warning, n + 1)
            _emit(state, tools, n, turn)
        return Outcome(0, "", first_warning, max_calls)
