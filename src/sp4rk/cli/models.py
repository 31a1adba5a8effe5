"""``--model SPEC``: a provider through ``Router``, the bundled offline model, or a script.

- ``provider:model`` — any ``sp4rk.llm.Router`` prefix (``anthropic:``, ``openai:``,
  ``openai-compatible:`` with ``--base-url``, ``openrouter:`` …); keys come from the usual
  environment variables.
- ``local`` or ``local:PATH.gguf`` — a GGUF model in this process; plain ``local`` is the
  bundled SmolLM2-135M-Instruct, a small demonstration model.
- ``scripted:FILE.json`` — replies replayed from a file (:mod:`sp4rk.cli.scripted`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sp4rk.agent import LLMCaller
from sp4rk.cli.errors import CommandError, UsageProblem
from sp4rk.cli.scripted import ScriptModel
from sp4rk.llm import LLMError, Router, ToolDefinition
from sp4rk.llm.pricing import ModelPrice, PriceTable, default_price_table
from sp4rk.llm.router import PREFIXES

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
#: What a model running on this machine (or replayed from a file) costs.
FREE = ModelPrice(input=0.0, output=0.0)


@dataclass(slots=True)
class Model:
    """A model ready for the executor, and what to tell the user about it."""

    caller: LLMCaller
    spec: str
    """The spec as stored with the run (script paths made absolute)."""
    context_tokens: int
    price: ModelPrice | None = None
    """Its price when the price table is not the authority: local and scripted models are
    free. ``None``: look the model up in :mod:`sp4rk.llm.pricing`."""
    note: str = ""
    """Said once when the run starts (the bundled model's honest description)."""
    overhead: Callable[[Sequence[ToolDefinition]], Awaitable[int]] | None = None
    """Tokens the provider adds to every prompt offering these tools and leaves out of its
    usage (a local model's tool listing): the context window is made that much smaller."""

    def prices(self, configured: ModelPrice | None = None) -> PriceTable:
        """The run's price table.

        ``configured`` (``price`` in sp4rk.toml) wins, then the model's own price, then the
        built-in list prices.
        """
        price = configured if configured is not None else self.price
        return default_price_table() if price is None else OneModelPrices(self.spec, price)

    def price_known(self, prices: PriceTable) -> bool:
        """Whether ``prices`` knows what this model costs."""
        return prices.lookup(self.spec) is not None


class OneModelPrices(PriceTable):
    """A run's price table when its one model has a set price, whatever name it reports.

    A compatible server may report its model under any name; a price configured for the run
    is the price of every call it makes.
    """

    __slots__ = ("_price",)

    def __init__(self, model: str, price: ModelPrice) -> None:
        super().__init__({model: price})
        self._price = price

    def lookup(self, model: str) -> ModelPrice | None:
        """The run's price, for any model name."""
        return self._price


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
        return Model(ScriptModel(path), f"scripted:{path}", context_tokens or DEFAULT_CONTEXT, FREE)
    if prefix == "local":
        if rest:
            rest = str(Path(rest).expanduser().resolve())
            if not Path(rest).is_file():
                raise UsageProblem(f"--model local:{rest}: no such model file")
        caller = _router(f"local:{rest}", {})
        provider, _ = caller.route("")
        return Model(
            caller,
            f"local:{rest}" if rest else "local",
            context_tokens or LOCAL_CONTEXT,
            FREE,
            "" if rest else BUNDLED_NOTE,
            overhead=getattr(provider, "prompt_overhead", None),
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
    return Model(_router(spec, options), spec, context_tokens or DEFAULT_CONTEXT)


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
        raise CommandError(_for_the_command(str(exc))) from exc
    return router


def _for_the_command(message: str) -> str:
    """A provider's setup error in the command's words (flags and variables, not keywords)."""
    return message.replace("pass api_key=... or set", "set").replace(
        "pass base_url=... or set", "pass --base-url URL or set"
    )
