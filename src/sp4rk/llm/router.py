"""``Router``: one caller for every provider, chosen by a ``"provider:model"`` string.

Prefixes, and where each provider finds its key and URL when not given them:

- ``openai:`` — the Responses API for ``gpt-5*`` and ``*codex*`` models, Chat Completions
  otherwise; ``OPENAI_API_KEY`` (and ``OPENAI_BASE_URL``), read by the SDK.
- ``openai-chat:`` / ``openai-responses:`` — that API, whatever the model.
- ``anthropic:`` — ``ANTHROPIC_API_KEY`` (and ``ANTHROPIC_BASE_URL``), read by the SDK.
- ``openai-compatible:`` — Chat Completions on your server: ``base_url=`` or
  ``OPENAI_COMPATIBLE_BASE_URL``; key ``OPENAI_COMPATIBLE_API_KEY`` (optional). It never
  falls back to ``OPENAI_API_KEY``: your OpenAI key is not sent to a third-party server
  unless you pass it.
- ``openrouter:`` — Chat Completions on OpenRouter, ``OPENROUTER_API_KEY``.
- ``local:`` — :class:`~sp4rk.llm.local.LocalProvider`; the model is a GGUF path, empty for
  the bundled SmolLM2.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import os
from collections.abc import Callable
from typing import Any

from sp4rk.llm.base import Provider
from sp4rk.llm.errors import LLMError
from sp4rk.llm.types import ChatRequest, ChatResponse

PREFIXES = (
    "openai",
    "openai-chat",
    "openai-responses",
    "anthropic",
    "openai-compatible",
    "openrouter",
    "local",
)
OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
#: Sent to compatible servers when no key is configured (most local servers need none).
NO_KEY = "sk-no-key-required"


def split_model(model: str) -> tuple[str, str]:
    """``"provider:model"`` as ``(provider, model)``; ``("", model)`` without a known prefix.

    Only a known provider name counts as a prefix, so model names containing colons
    (``openai-compatible:llama3:8b``) keep them.
    """
    prefix, sep, rest = model.partition(":")
    if sep and prefix in PREFIXES:
        return prefix, rest
    return "", model


class Router(Provider):
    """Routes each request to the provider its model string names, and strips the prefix.

    A request whose ``model`` is empty uses the router's ``model``; a bare model name (no
    prefix) goes to the router's own provider. Providers are built on first use and reused;
    ``aclose()`` closes them all.

    Args:
        model: the default ``"provider:model"``.
        **provider_options: keyword arguments for the providers reached through the prefix
            that ``model`` names (for instance ``api_key``, ``base_url``, ``max_retries``,
            ``timeout``); providers reached through other prefixes are configured from the
            environment. Under ``openai:``, which serves a model with the Responses API or
            Chat Completions, each provider gets the options it takes (``store`` goes to the
            Responses provider only).

    Raises:
        ValueError: ``model`` has no known prefix, or options are given without a model to
            say which provider they configure.
        TypeError: an option that no provider of that prefix takes.
    """

    name = "router"

    def __init__(self, model: str = "", **provider_options: Any) -> None:
        super().__init__(model)
        self._prefix, _ = split_model(model)
        if model and not self._prefix:
            raise ValueError(
                f"model {model!r} needs a provider prefix: one of {', '.join(PREFIXES)}"
            )
        if provider_options and not self._prefix:
            raise ValueError(
                "provider options need model='provider:...' to say which provider they configure"
            )
        if provider_options:
            kinds = _KINDS.get(self._prefix, (self._prefix,))
            taken = set().union(*(_accepted_options(kind) for kind in kinds))
            unknown = sorted(set(provider_options) - taken)
            if unknown:
                raise TypeError(
                    f"Router: {', '.join(unknown)} is not an option of the {self._prefix!r} "
                    f"provider (it takes {', '.join(sorted(taken))})"
                )
        self._options = provider_options
        # Keyed by kind, whether the router's options configure it (else: the environment),
        # and the model file for local providers.
        self._providers: dict[tuple[str, bool, str], Provider] = {}

    def route(self, model: str) -> tuple[Provider, str]:
        """The provider for ``model`` (``""``: the router's) and the model name it gets.

        Raises:
            ValueError: the model names no provider and the router has none.
            LLMError: the provider cannot be configured (a missing key or base URL).
        """
        prefix, bare = split_model(model or self.model)
        if not prefix:
            if not self._prefix:
                raise ValueError(
                    f"model {model!r} does not say which provider serves it: write "
                    f"'provider:model' with provider one of {', '.join(PREFIXES)}"
                )
            prefix = self._prefix
        if prefix == "openai":
            lowered = bare.lower()
            kind = "openai-responses" if "gpt-5" in lowered or "codex" in lowered else "openai-chat"
        else:
            kind = prefix
        configured = prefix == self._prefix and bool(self._options)
        key = (kind, configured, bare if kind == "local" else "")
        if key not in self._providers:
            taken = _accepted_options(kind) if configured else frozenset()
            options = {name: value for name, value in self._options.items() if name in taken}
            self._providers[key] = _build(kind, bare, options)
        return self._providers[key], bare

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Send ``request`` to the provider its model names."""
        provider, bare = self.route(request.model)
        response = await provider.call(dataclasses.replace(request, model=bare))
        response.model = response.model or bare
        return response

    async def call_stream(
        self, request: ChatRequest, on_text: Callable[[str], None]
    ) -> ChatResponse:
        """Stream ``request`` from the provider its model names."""
        provider, bare = self.route(request.model)
        response = await provider.call_stream(dataclasses.replace(request, model=bare), on_text)
        response.model = response.model or bare
        return response

    def redact(self, text: str) -> str:
        """``text`` with the credentials of every provider the router built masked."""
        for provider in list(self._providers.values()):
            text = provider.redact(text)
        return super().redact(text)

    async def aclose(self) -> None:
        """Close every provider the router built."""
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()


#: The provider classes a prefix can reach, when it can reach several.
_KINDS = {"openai": ("openai-chat", "openai-responses")}
#: The class behind each kind: (module, class name), imported on first use.
_CLASSES = {
    "openai-chat": ("sp4rk.llm.openai_chat", "OpenAIChatProvider"),
    "openai-responses": ("sp4rk.llm.openai_responses", "OpenAIResponsesProvider"),
    "anthropic": ("sp4rk.llm.anthropic", "AnthropicProvider"),
    "openai-compatible": ("sp4rk.llm.openai_chat", "OpenAIChatProvider"),
    "openrouter": ("sp4rk.llm.openai_chat", "OpenAIChatProvider"),
    "local": ("sp4rk.llm.local", "LocalProvider"),
}


def _provider_class(kind: str) -> type[Provider]:
    module, name = _CLASSES[kind]
    cls: type[Provider] = getattr(importlib.import_module(module), name)
    return cls


@functools.cache
def _accepted_options(kind: str) -> frozenset[str]:
    """The keyword options the provider class of ``kind`` takes (besides the model)."""
    parameters = inspect.signature(_provider_class(kind)).parameters.values()
    return frozenset(p.name for p in parameters if p.kind is p.KEYWORD_ONLY)


def _build(kind: str, model: str, options: dict[str, Any]) -> Provider:
    """A provider of ``kind``; third-party servers get their URL and key filled in."""
    fill = _DEFAULTS.get(kind)
    return _provider_class(kind)(model, **(fill(options) if fill else options))


def _compatible(options: dict[str, Any]) -> dict[str, Any]:
    options.setdefault("base_url", os.environ.get("OPENAI_COMPATIBLE_BASE_URL"))
    if not options["base_url"]:
        raise LLMError(
            "openai-compatible: no server: pass base_url=... or set OPENAI_COMPATIBLE_BASE_URL"
        )
    options.setdefault("api_key", os.environ.get("OPENAI_COMPATIBLE_API_KEY") or NO_KEY)
    return options


def _openrouter(options: dict[str, Any]) -> dict[str, Any]:
    options.setdefault("base_url", OPENROUTER_BASE_URL)
    options.setdefault("api_key", os.environ.get("OPENROUTER_API_KEY"))
    if not options["api_key"]:
        raise LLMError("openrouter: no API key: pass api_key=... or set OPENROUTER_API_KEY")
    return options


#: Fills in the connection options of the kinds that do not use the SDK's own defaults.
_DEFAULTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "openai-compatible": _compatible,
    "openrouter": _openrouter,
}
