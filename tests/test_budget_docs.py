"""The runnable example of docs/budget.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "budget.md"


def test_the_try_it_example_runs() -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Try it without a key", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "docs/budget.md lost its runnable example"
    namespace: dict[str, object] = {"__name__": "budget_docs_example"}
    exec(compile(match.group(1), str(DOC), "exec"), namespace)
    result = namespace["result"]
    assert result.usage.input_tokens == 3600  # type: ignore[attr-defined]
