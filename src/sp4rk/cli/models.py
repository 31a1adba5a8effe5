"""``--model SPEC``: a provider through ``Router``, the bundled offline model, or a script.

- ``provider:model`` — any ``sp4rk.llm.Router`` prefix (``anthropic:``, ``openai:``,
  ``openai-compatible:`` with ``--base-url``, ``openrouter:`` …); keys come from the usual
  environment variables.
- ``local`` or ``local:PATH.gguf`` — a GGUF model in this process; plain ``local`` is the
  bundled SmolLM2-135M-Instruct, a small demonstration model.
- ``scripted:FILE.json`` — replies replayed from a file (:mod:`sp4rk.cli.scripted`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sp4rk.agent import LLMCaller
from sp4rk.cli.errors import CommandError, UsageProblem
from sp4rk.cli.scripted import ScriptModel
from sp4rk.llm import ChatRequest, ChatResponse, LLMError, Router, SimpleTokenCounter, TokenUsage
from sp4rk.llm.router import PREFIXES
from sp4rk.tools import ToolDescriptor

#: The context window given to local models (``LocalProvider``'s default ``n_ctx``).
LOCAL_CONTEXT = 8192
#: The window assumed for hosted models unless ``context_tokens`` says otherwise.
DEFAULT_CONTEXT = 128_000
BUNDLED_NOTE = (
    "model: the bundled SmolLM2-135M-Instruct, offline. It is a small demonstration model "
    "(135 M parameters): it shows the executor and its guards at work but rarely solves a "
    "real task. For real work pass --model anthropic:claude-sonnet-4-5, openai:gpt-4.1 or "
    "another provider (keys from ANTHROPIC_API_KEY, OPENAI_API_KEY, ...)."
)
#: USD per million input and output tokens, by model-name prefix (list prices; override
#: with ``price`` in sp4rk.toml). Longer prefixes are tried first.
PRICES: dict[str, tuple[float, float]] = {
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-haiku-4": (1.0, 5.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "gpt-4.1-nano": (0.1, 0.4),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4o-mini": (0.15, 0.6),
    "gpt-4o": (2.5, 10.0),
    "gpt-5-nano": (0.05, 0.4),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5": (1.25, 10.0),
}


@dataclass(slots=True)
class Model:
    """A model ready for the executor, and what to tell the user about it."""

    caller: LLMCaller
    spec: str
    """The spec as stored with the run (script paths made absolute)."""
    context_tokens: int
    price: tuple[float, float] | None
    note: str = ""
    """Said once when the run starts (the bundled model's honest description)."""
    calibrates: bool = True
    """Its reported prompt tokens may calibrate the context window. A local model's do not:
    its prompt also holds the tool listing, a large fixed share of a small window that the
    window would mistake for the conversation growing (see :class:`WithoutUsage`)."""


def build_model(spec: str, *, base_url: str = "", context_tokens: int = 0) -> Model:
    """The model ``spec`` names.

    Raises:
        UsageProblem: the spec names no known provider, or a script file is unusable.
        CommandError: the provider cannot be set up (a missing key or extra).
    """
    spec = spec.strip()
    prefix, _, rest = spec.partition(":")
    if prefix == "scripted":
        if not rest:
            raise UsageProblem("--model scripted:FILE.json needs the script's path")
        path = Path(rest).expanduser().resolve()
        return Model(
            ScriptModel(path), f"scripted:{path}", context_tokens or DEFAULT_CONTEXT, (0.0, 0.0)
        )
    if prefix == "local":
        if rest:
            rest = str(Path(rest).expanduser().resolve())
            if not Path(rest).is_file():
                raise UsageProblem(f"--model local:{rest}: no such model file")
        caller = _router(f"local:{rest}", {})
        return Model(
            caller,
            f"local:{rest}" if rest else "local",
            context_tokens or LOCAL_CONTEXT,
            (0.0, 0.0),
            "" if rest else BUNDLED_NOTE,
            calibrates=False,
        )
    if prefix not in PREFIXES or not rest:
        raise UsageProblem(
            f"unknown model {spec!r}: write provider:model with provider one of "
            f"{', '.join(p for p in PREFIXES if p != 'local')} (for example "
            "anthropic:claude-sonnet-4-5), local[:PATH.gguf], or scripted:FILE.json"
        )
    if base_url and prefix not in ("openai", "openai-chat", "openai-compatible", "openrouter"):
        raise UsageProblem(f"--base-url does not apply to {prefix}: models")
    options = {"base_url": base_url} if base_url else {}
    return Model(_router(spec, options), spec, context_tokens or DEFAULT_CONTEXT, price_of(rest))


def _router(spec: str, options: dict[str, str]) -> Router:
    """A router for ``spec`` whose provider is built now, so a missing key fails at once."""
    try:
        router = Router(spec, **options)
        router.route("")
    except ImportError as exc:
        prefix = spec.partition(":")[0]
        extra = prefix if prefix in ("local", "anthropic") else "openai"
        raise CommandError(
            f"{prefix} models need an extra: pip install 'sp4rk[{extra}]' ({exc})"
        ) from exc
    except LLMError as exc:
        raise CommandError(f"{exc}") from exc
    return router


def price_of(model: str) -> tuple[float, float] | None:
    """List price of ``model`` (USD per million input, output tokens), when known."""
    for prefix in sorted(PRICES, key=len, reverse=True):
        if model.startswith(prefix):
            return PRICES[prefix]
    return None


def cost(price: tuple[float, float] | None, input_tokens: int, output_tokens: int) -> float | None:
    """What the tokens cost at ``price`` (``None`` when the price is unknown)."""
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000


class WithoutUsage:
    """Passes calls through but reports no token usage to the executor.

    For local models: the context window then keeps its own estimate of the conversation
    (:func:`tool_listing_tokens` is reserved for the tool listing instead), and a prompt that
    still overflows is compacted when the provider says so. Usage is counted before this
    wrapper, so the run's token totals stay true.
    """

    def __init__(self, inner: LLMCaller) -> None:
        self.inner = inner

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Call the inner model."""
        return _no_usage(await self.inner.call(request))

    async def call_stream(
        self, request: ChatRequest, on_text: Callable[[str], None]
    ) -> ChatResponse:
        """Stream from the inner model (or call it, when it cannot stream)."""
        stream = getattr(self.inner, "call_stream", None)
        if stream is None:
            return await self.call(request)
        response: ChatResponse = await stream(request, on_text)
        return _no_usage(response)


def _no_usage(response: ChatResponse) -> ChatResponse:
    return dataclasses.replace(response, usage=TokenUsage())


def tool_listing_tokens(tools: Sequence[ToolDescriptor]) -> int:
    """About how many prompt tokens a local model's tool listing takes."""
    counter = SimpleTokenCounter()
    return 200 + sum(
        counter.count(f"{t.name}: {t.description} {json.dumps(t.input_schema)}") for t in tools
    )
