"""Layering: the llm and tools layers import nothing from the agent layer."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "module", ["sp4rk", "sp4rk.llm", "sp4rk.llm.testing", "sp4rk.tools", "sp4rk.tools.builtins"]
)
def test_lower_layers_do_not_load_the_agent(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('sp4rk.agent', 'sp4rk.memory', "
        "'sp4rk.cli')))\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_importing_sp4rk_is_cheap() -> None:
    code = (
        "import sys, sp4rk; print(','.join(m for m in ('pydantic', 'openai', 'anthropic') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
