"""Resume saved checkpoints in a fresh process: ``python -m tests.agent.resume_worker DIR``.

For every ``*.json`` checkpoint in DIR, the deterministic scenario of test_pause_resume is
resumed on a new executor and context window; ``DIR/results.json`` gets each run's steps and
prompts, so the parent test can compare them with a run that was never paused.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from sp4rk.agent import Executor, load_checkpoint
from sp4rk.llm.testing import FunctionLLM
from sp4rk.memory import ContextWindow

from .helpers import echo_tools
from .test_pause_resume import MAX_STEPS, deterministic_model, guard


def resume(path: Path) -> dict[str, Any]:
    """Resume one checkpoint to the end of the scenario."""
    checkpoint = load_checkpoint(path)
    tools = echo_tools()
    llm = FunctionLLM(deterministic_model)
    window = ContextWindow(task="t")
    window.seed_steps(checkpoint)
    executor = Executor(llm, tools, MAX_STEPS, resume_steps=checkpoint)
    executor.set_finish_guard(guard)
    result = executor.run_sync(tools.list(), window)
    return {
        "finished": result.finished,
        "steps": [s.to_dict() for s in result.steps],
        "prompts": [[m.to_dict() for m in r.messages] for r in llm.requests],
    }


def main(directory: str) -> None:
    """Resume every checkpoint in ``directory``; write ``results.json`` beside them."""
    root = Path(directory)
    results = {p.stem: resume(p) for p in sorted(root.glob("*.json"))}
    (root / "results.json").write_text(json.dumps(results), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
