"""Every code block of README.md and docs/*.md runs here, so the docs cannot drift.

What happens to a fenced block depends on its info string (the words after the backticks):

- ``python`` — executed, in a fresh temporary working directory; top-level ``await`` works.
  Blocks of docs/getting-started.md and docs/cookbook.md are complete programs and get nothing
  else. Blocks of the other pages may use these names for "your model, tools and window":

  ============  ==============================================================================
  ``llm``       a model that calls ``finish("done")`` on every request (priced as gpt-4o-mini)
  ``registry``  a ``Registry`` holding the built-in tools, confined to the working directory
  ``window``    a ``ContextWindow`` with a task (also as ``cw``)
  ``executor``  ``Executor(llm, registry, 25)``
  ``ctx``       ``RunContext(workspace=<the working directory>)``
  ============  ==============================================================================

  The working directory holds a small project (``README.md``, ``calc.py``, ``test_calc.py``)
  and ``run.json``, the checkpoint of a paused run. Every block, complete programs included,
  finds a local model server in the providers' usual environment variables
  (``OPENAI_API_KEY``/``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL``,
  ``OPENAI_COMPATIBLE_BASE_URL``): it answers every request with a call of ``finish``, and
  a block's own local server (``http://localhost:PORT/v1``, any port) is that server too.
- ``python no-run ...`` — compiled, not run: it needs what a test cannot have (a real key, a
  remote MCP server, a 100 MB model, a process-wide exporter); the words after ``no-run`` say
  what.
- ``bash run`` — run with ``bash -e`` in a temporary folder, where ``sp4rk`` is this
  checkout's command and its runs store lives in that folder. ``bash no-run ...``: shown only
  (installs, real models). A shell block must say which: a test never runs ``pip install``
  by accident.
- ``toml`` — parsed; ``json`` — parsed; ``text`` — output or prose, shown only.

Every block says which of these it is: an unlabelled block fails the test, as does a block in a
fence this parser does not read, so a page added to docs/ later is checked the same way.
Relative links must point at files of the repository.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import tomllib
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sp4rk.agent import Executor, save_checkpoint
from sp4rk.llm.testing import FunctionLLM, ScriptedLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow
from sp4rk.tools import Registry, RunContext
from sp4rk.tools.builtins import register_builtins
from tests.llm.fakeserver import FakeServer, Reply
from tests.llm.wire import (
    Turn,
    anthropic_json,
    anthropic_sse,
    chat_json,
    chat_sse,
    responses_json,
    responses_sse,
)

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: Pages whose blocks are complete programs: no fixtures.
STANDALONE = {"getting-started.md", "cookbook.md"}
#: What a block may say for "your own OpenAI-compatible server"; the fake server answers.
LOCAL_SERVER_URL = re.compile(r"http://localhost:\d+/v1")
SHELL = ("bash", "sh", "shell", "console")
_FENCE = re.compile(
    r"^(?P<indent> *)```(?P<info>[^`\n]*)\n(?P<body>.*?)^(?P=indent)```\s*$", re.M | re.S
)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    options: tuple[str, ...]
    code: str

    @property
    def id(self) -> str:
        return f"{self.page.name}:{self.line}"

    @property
    def runs(self) -> bool:
        first = self.options[0].rstrip(":") if self.options else ""
        if self.language in SHELL:
            return first == "run"
        return first != "no-run"


def blocks() -> list[Block]:
    """Every fenced block of the documentation, in page order."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            words = match["info"].split()
            language = words[0] if words else ""
            line = text.count("\n", 0, match.start()) + 1
            code = textwrap.dedent(match["body"])
            found.append(Block(page, line, language, tuple(words[1:]), code))
    return found


ALL = blocks()
PYTHON = [b for b in ALL if b.language == "python"]
BASH = [b for b in ALL if b.language in SHELL]
DATA = [b for b in ALL if b.language in ("toml", "json")]
KNOWN = {"python", *SHELL, "toml", "json", "text"}


def test_every_block_has_a_known_language() -> None:
    unknown = [f"{b.id} ```{b.language}" for b in ALL if b.language not in KNOWN]
    assert not unknown, (
        f"give these blocks a language this test knows ({sorted(KNOWN)}; ```text for output): "
        f"{unknown}"
    )


def test_every_fence_is_read() -> None:
    """A ``~~~`` fence or a longer backtick fence would hide its block from these tests."""
    other = re.compile(r"^ *(~{3,}|`{4,})", re.M)
    hidden = [
        f"{page.name}:{page.read_text(encoding='utf-8').count(chr(10), 0, m.start()) + 1}"
        for page in PAGES
        for m in other.finditer(page.read_text(encoding="utf-8"))
    ]
    assert not hidden, f"use ``` fences, which these tests read, at: {hidden}"


_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def test_relative_links_point_at_files_of_the_repository() -> None:
    missing = []
    for page in PAGES:
        for match in _LINK.finditer(page.read_text(encoding="utf-8")):
            target = match["target"].split("#", 1)[0]
            if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # an anchor on the same page, or a URL
            if not (page.parent / target).exists():
                missing.append(f"{page.name} -> {match['target']}")
    assert not missing, f"these links point at nothing in the repository: {missing}"


def test_the_docs_have_runnable_blocks() -> None:
    runnable = [b for b in PYTHON if b.runs]
    assert len(runnable) >= 30, "fewer runnable snippets than the docs had: was the parser broken?"
    pages = {b.page.name for b in runnable}
    assert {"README.md", "getting-started.md", "cookbook.md"} <= pages


def test_every_shell_block_says_whether_it_runs() -> None:
    unmarked = [
        b.id for b in BASH if not b.options or b.options[0].rstrip(":") not in ("run", "no-run")
    ]
    assert not unmarked, f"mark these ```bash blocks 'run' or 'no-run: why': {unmarked}"


def test_blocks_that_do_not_run_say_why() -> None:
    silent = [b.id for b in ALL if not b.runs and len(b.options) < 2]
    assert not silent, f"say after no-run why these blocks cannot run: {silent}"


# --- the model server --------------------------------------------------------------------------


class ModelServer(FakeServer):
    """Answers every chat request, in its API's format, with a call of ``finish``."""

    def next_reply(self, path: str) -> Reply:
        with self._lock:
            body = self.received[-1].body if self.received else None
        stream = isinstance(body, dict) and bool(body.get("stream"))
        turn = Turn(calls=[("call_docs", "finish", json.dumps({"answer": "done"}))])
        if path.endswith("/chat/completions"):
            return chat_sse(turn) if stream else chat_json(turn)
        if path.endswith("/responses"):
            return responses_sse(turn) if stream else responses_json(turn)
        if path.endswith("/messages"):
            return anthropic_sse(turn) if stream else anthropic_json(turn)
        return Reply(404, {"error": {"message": f"no such endpoint: {path}", "type": "docs"}})


@pytest.fixture
def model_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    server = ModelServer()
    env = {
        "OPENAI_API_KEY": "sk-docs-0123456789abcdef",
        "OPENAI_BASE_URL": server.url + "/v1",
        "ANTHROPIC_API_KEY": "sk-ant-docs-0123456789abcdef",
        "ANTHROPIC_BASE_URL": server.url,
        "OPENAI_COMPATIBLE_BASE_URL": server.url + "/v1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    yield server
    server.close()


@pytest.fixture
def repository_untouched() -> Iterator[None]:
    """A block writes into its temporary folder, never into the checkout (``> events.jsonl``)."""
    before = set(os.listdir(ROOT))
    yield
    strays = sorted(set(os.listdir(ROOT)) - before)
    assert not strays, f"a docs block wrote into the repository: {strays}"


# --- python blocks -----------------------------------------------------------------------------

PROJECT = {
    "README.md": "# calc\n\nA tiny calculator.\n",
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}


def _project(folder: Path) -> None:
    for name, text in PROJECT.items():
        (folder / name).write_text(text, encoding="utf-8")
    # run.json: a run paused after one step, as save_checkpoint writes it.
    registry = Registry()
    register_builtins(registry, folder)
    llm = ScriptedLLM([tool_calls_response(("read_file", {"path": "calc.py"}))])
    paused = Executor(llm, registry, 25, pause_checker=lambda ctx: bool(llm.requests))
    result = paused.run_sync(registry.list(), ContextWindow(task="fix calc.add"))
    assert result.paused
    save_checkpoint(folder / "run.json", result)


def _fixtures(folder: Path) -> dict[str, Any]:
    llm = FunctionLLM(lambda request: finish_response("done"), model="gpt-4o-mini")
    registry = Registry()
    register_builtins(registry, folder)
    window = ContextWindow(system_prompt="You are a careful engineer.", task="fix calc.add")
    return {
        "llm": llm,
        "registry": registry,
        "window": window,
        "cw": window,
        "executor": Executor(llm, registry, 25),
        "ctx": RunContext(workspace=folder),
    }


def _compile(block: Block, code: str | None = None) -> types.CodeType:
    source = "\n" * (block.line) + (block.code if code is None else code)  # page line numbers
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if block.page.name not in STANDALONE else 0
    return compile(source, str(block.page), "exec", flags=flags)


@pytest.mark.parametrize("block", [b for b in PYTHON if not b.runs], ids=lambda b: b.id)
def test_python_blocks_that_cannot_run_compile(block: Block) -> None:
    _compile(block)


@pytest.mark.parametrize("block", [b for b in PYTHON if b.runs], ids=lambda b: b.id)
def test_python_block_runs(
    block: Block,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    model_server: ModelServer,
    repository_untouched: None,
) -> None:
    _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SP4RK_STORE", str(tmp_path / "runs.db"))
    code = _compile(block, LOCAL_SERVER_URL.sub(model_server.url + "/v1", block.code))
    # A module of its own, so pydantic, dataclasses and typing resolve the block's names.
    module = types.ModuleType("docs_snippet")
    module.__file__ = str(block.page)
    if block.page.name not in STANDALONE:
        vars(module).update(_fixtures(tmp_path))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    outcome = eval(code, vars(module))  # the documentation's own code
    if asyncio.iscoroutine(outcome):  # a block with top-level await
        asyncio.run(outcome)


# --- shell blocks ------------------------------------------------------------------------------


@pytest.mark.parametrize("block", [b for b in BASH if b.runs], ids=lambda b: b.id)
def test_bash_block_runs(block: Block, tmp_path: Path, repository_untouched: None) -> None:
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    shim = bin_dir / "sp4rk"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m sp4rk "$@"\n')
    shim.chmod(0o755)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SP4RK_", "OPENAI", "ANTHROPIC"))
    }
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p),
        PYTHONDONTWRITEBYTECODE="1",
        SP4RK_STORE=str(tmp_path / "runs.db"),
        XDG_STATE_HOME=str(tmp_path / ".state"),
        TMPDIR=str(tmp_path),  # mktemp -d: a scratch folder inside the test's own
    )
    done = subprocess.run(
        ["bash", "-e", "-c", block.code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, f"{block.id} failed:\n{done.stdout}\n{done.stderr}"


# --- data blocks -------------------------------------------------------------------------------


@pytest.mark.parametrize("block", DATA, ids=lambda b: b.id)
def test_data_block_parses(block: Block, tmp_path: Path) -> None:
    if block.language == "json":
        json.loads(block.code)
        return
    data = tomllib.loads(block.code)
    if block.page.name == "cli.md":  # a sp4rk.toml: the command's reader accepts it
        from sp4rk.cli.config import load_config

        (tmp_path / "prompts").mkdir()
        (tmp_path / "prompts" / "agent.md").write_text("Be careful.\n")
        (tmp_path / "sp4rk.toml").write_text(block.code, encoding="utf-8")
        assert load_config(tmp_path).values.keys() == data.keys()
