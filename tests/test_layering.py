"""Layering: ``llm``, ``tools`` → ``memory`` → ``agent`` → ``cli``; each imports only below it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "sp4rk"


def loaded_after_import(module: str) -> set[str]:
    code = f"import sys, {module}\nprint(','.join(m for m in sys.modules if m.startswith('sp4rk')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.strip().split(","))


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("sp4rk", ("sp4rk.llm", "sp4rk.tools", "sp4rk.memory", "sp4rk.agent", "sp4rk.cli")),
        ("sp4rk.llm", ("sp4rk.tools", "sp4rk.memory", "sp4rk.agent", "sp4rk.cli")),
        ("sp4rk.llm.testing", ("sp4rk.tools", "sp4rk.memory", "sp4rk.agent", "sp4rk.cli")),
        ("sp4rk.tools", ("sp4rk.llm", "sp4rk.memory", "sp4rk.agent", "sp4rk.cli")),
        ("sp4rk.tools.builtins", ("sp4rk.llm", "sp4rk.memory", "sp4rk.agent", "sp4rk.cli")),
        ("sp4rk.memory", ("sp4rk.agent", "sp4rk.cli")),
        ("sp4rk.agent", ("sp4rk.cli", "sp4rk.store", "sp4rk.otel")),
        ("sp4rk.store", ("sp4rk.cli", "sp4rk.batch")),
        ("sp4rk.batch", ("sp4rk.cli",)),
        ("sp4rk.otel", ("sp4rk.cli",)),
    ],
)
def test_each_layer_loads_nothing_above_it(module: str, forbidden: tuple[str, ...]) -> None:
    bad = sorted(m for m in loaded_after_import(module) if m.startswith(forbidden))
    assert bad == []


def test_no_module_outside_the_cli_imports_it() -> None:
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.is_relative_to(SRC / "cli") or path.name == "__main__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            if any(n == "sp4rk.cli" or n.startswith("sp4rk.cli.") for n in names):
                offenders.append(str(path.relative_to(SRC)))
    assert offenders == []


def test_importing_sp4rk_is_cheap() -> None:
    code = (
        "import sys, sp4rk; print(','.join(m for m in ('pydantic', 'openai', 'anthropic') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_batches_and_stores_load_ray_and_psycopg_only_when_used() -> None:
    code = (
        "import sys, sp4rk.batch, sp4rk.store; "
        "print(','.join(m for m in ('ray', 'psycopg') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_agent_never_loads_opentelemetry() -> None:
    code = "import sys, sp4rk.agent; print(any(m.startswith('opentelemetry') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_sp4rk_otel_without_the_extra_says_what_to_install() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'opentelemetry':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import sp4rk.agent\n"
        "try:\n"
        "    import sp4rk.otel\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'sp4rk[otel]'" in out.stdout


def test_the_agent_loads_no_builtin_tool_machinery() -> None:
    # The executor needs its own tools (finish, tool_result_read, the checklist) only.
    heavy = ("edit", "files", "globs", "paths", "search", "shell", "shell_rules", "web")
    loaded = loaded_after_import("sp4rk.agent")
    assert sorted(loaded & {f"sp4rk.tools.builtins.{m}" for m in heavy}) == []


def test_lazy_builtin_names_still_import() -> None:
    from sp4rk.tools import builtins

    assert builtins.judge_command.__module__ == "sp4rk.tools.builtins.shell_rules"
    assert builtins.ShellTool.__name__ == "ShellTool"
    assert builtins.search_tools is builtins.search_tools  # loaded once, then a plain attribute


def test_the_agent_loads_pydantic_only_when_a_tool_is_built() -> None:
    # @tool's pydantic side (tools/input_model.py) loads with the first tool built; the
    # executor's own tools are built when first listed or called.
    code = (
        "import sys, sp4rk.agent\n"
        "from sp4rk.tools.builtins import update_checklist\n"
        "heavy = ('pydantic', 'docstring_parser', 'sp4rk.tools.input_model')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
        "update_checklist.input_schema\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["", "pydantic,docstring_parser,sp4rk.tools.input_model"]
