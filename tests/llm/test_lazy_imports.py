"""Providers load lazily: sp4rk.llm imports without SDKs, and a missing SDK says what to do."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.local_extra import LOCAL_EXTRA_MISSING


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_importing_sp4rk_llm_loads_no_sdk() -> None:
    code = (
        "import sys, sp4rk.llm\n"
        "r = sp4rk.llm.Router\n"
        "print(','.join(m for m in ('openai', 'anthropic', 'llama_cpp', 'httpx2') "
        "if m in sys.modules))"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


@pytest.mark.parametrize(
    ("sdk", "name", "extra"),
    [
        ("openai", "OpenAIChatProvider", "sp4rk[openai]"),
        ("openai", "OpenAIResponsesProvider", "sp4rk[openai]"),
        ("anthropic", "AnthropicProvider", "sp4rk[anthropic]"),
    ],
)
def test_missing_sdk_names_the_extra(sdk: str, name: str, extra: str) -> None:
    code = f"import sys\nsys.modules[{sdk!r}] = None\nfrom sp4rk.llm import {name}"
    out = _run(code)
    assert out.returncode != 0
    assert "ImportError" in out.stderr
    assert extra in out.stderr


def test_provider_names_resolve() -> None:
    import sp4rk.llm

    for name in ("OpenAIChatProvider", "OpenAIResponsesProvider", "AnthropicProvider", "Router"):
        assert name in sp4rk.llm.__all__
        assert getattr(sp4rk.llm, name).__name__ == name
    with pytest.raises(AttributeError):
        _ = sp4rk.llm.NoSuchProvider  # type: ignore[attr-defined]


def test_star_import_needs_no_local_extra_and_local_provider_stays_reachable() -> None:
    code = (
        "import sys\n"
        "sys.modules['llama_cpp'] = None\n"  # the 'local' extra is missing
        "from sp4rk.llm import *\n"
        "import sp4rk.llm\n"
        "assert 'LocalProvider' not in sp4rk.llm.__all__\n"
        "assert 'LocalProvider' in dir(sp4rk.llm)\n"
        "print(Router.__name__, AnthropicProvider.__name__, OpenAIChatProvider.__name__)\n"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Router", "AnthropicProvider", "OpenAIChatProvider"]


def test_local_provider_resolves_lazily() -> None:
    pytest.importorskip("llama_cpp", reason=LOCAL_EXTRA_MISSING)
    import sp4rk.llm
    from sp4rk.llm.local import LocalProvider

    assert sp4rk.llm.LocalProvider is LocalProvider
