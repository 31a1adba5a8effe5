"""The workspace every stuck-detection shape runs in, and the tools a coding agent uses on it.

Everything is in memory and deterministic: a fresh :class:`World` gives the same results to the
same calls, so sp4rk's run and the history fed to OpenHands' detector see identical results.
The tools are ordinary sp4rk ``@tool`` functions with the traits a real tool of that kind
declares (file readers are read-only, edits are mutating, an MCP database tool has none).
"""

from __future__ import annotations

import json
from typing import Any

from sp4rk.tools import Registry, ToolError, ToolResult, ToolTraits, tool

#: Files of the workspace and their line counts: sizes far apart, as real files' are.
FILES = {"a.py": 6, "b.py": 19, "c.py": 33, "d.py": 48, "e.py": 62, "README.md": 80}


def _text(name: str, lines: int) -> str:
    return f"# {name}\n" + "".join(f"{name}:{i}: value_{i} = compute({i})\n" for i in range(lines))


class World:
    """A small repository, a build, a job queue, a database and a flaky server."""

    def __init__(self) -> None:
        self.files = {name: _text(name, n) for name, n in FILES.items()}
        self.build_progress = 0
        self.job_polls = 0
        self.job_done_after = 8
        self.rows = 0
        self.restarts = 0
        """Calls of ``query_api`` still answered "server restarted" (retryable)."""
        self.log_lines = 0

    def registry(self) -> Registry:
        """The tools, bound to this world."""
        w = self

        @tool(read_only=True)
        def read_file(path: str) -> str:
            """Read a file."""
            if path not in w.files:
                raise ToolError(f"file not found: {path}")
            return w.files[path]

        @tool(read_only=True)
        def list_directory(path: str) -> str:
            """List a directory."""
            return "\n".join(f"{len(t):6d}  {n}" for n, t in sorted(w.files.items()))

        @tool(read_only=True)
        def search(query: str) -> str:
            """Search every file for a string."""
            hits = [
                f"{name}:{no}: {line}"
                for name, text in sorted(w.files.items())
                for no, line in enumerate(text.splitlines(), 1)
                if query in line
            ]
            return "\n".join(hits[:40]) if hits else "No matches found"

        @tool(read_only=True)
        def read_lines(path: str, offset: int, limit: int) -> str:
            """Read ``limit`` lines of a long log from ``offset``."""
            return "".join(
                f"{i:06d} worker-{i % 7} handled request {i * 7919 % 100_000:05d}\n"
                for i in range(offset, offset + limit)
            )

        @tool(traits=ToolTraits(mutating=True, brief_results=True))
        def write_file(path: str, content: str) -> str:
            """Write a file."""
            w.files[path] = content
            return f"wrote {len(content)} bytes to {path}"

        @tool(traits=ToolTraits(mutating=True, brief_results=True))
        def edit_file(path: str, old: str, new: str) -> str:
            """Replace the first ``old`` by ``new`` in a file."""
            if old not in w.files.get(path, ""):
                raise ToolError(f"old string {old!r} not found in {path}")
            w.files[path] = w.files[path].replace(old, new, 1)
            return f"edited {path}"

        @tool
        def run_tests() -> str:
            """Run the test suite."""
            failing = [n for n, t in sorted(w.files.items()) if "BUG" in t]
            if not failing:
                return "12 passed in 0.41s"
            lines = [
                f"FAILED test_{n.split('.')[0]}.py::test_value - AssertionError" for n in failing
            ]
            return "\n".join([*lines, f"{len(failing)} failed, {12 - len(failing)} passed"])

        @tool
        def build_status(build: str) -> str:
            """How far a build has got (an ordinary tool, not declared pollable)."""
            w.build_progress = min(100, w.build_progress + 10)
            return f"build {build}: {w.build_progress}% ({w.build_progress // 10} of 10 stages)"

        @tool(traits=ToolTraits(pollable=True))
        def job_status(job: str) -> str:
            """A job's state: the same answer for a while is normal."""
            w.job_polls += 1
            return f"job {job}: " + ("succeeded" if w.job_polls > w.job_done_after else "running")

        @tool(read_only=True)
        def tail_log(job: str) -> str:
            """The last lines of a job's log (it grows while the job runs)."""
            w.log_lines += 3
            return "".join(f"[{job}] step {i} ok\n" for i in range(w.log_lines - 3, w.log_lines))

        @tool
        def db_insert(table: str, row: dict[str, Any]) -> str:
            """Insert a row (an MCP database tool: default traits, short acknowledgement)."""
            w.rows += 1
            return json.dumps([{"affected_rows": 1}])

        @tool
        def create_record(kind: str, name: str) -> str:
            """Create a record and answer with its id (an MCP tool with default traits)."""
            w.rows += 1
            return json.dumps({"id": w.rows})

        @tool
        def query_api(endpoint: str) -> ToolResult:
            """Query a server that restarts once in a while."""
            if w.restarts > 0:
                w.restarts -= 1
                return ToolResult("503: server restarted, try again", is_error=True, retryable=True)
            return ToolResult(f"GET {endpoint}: " + json.dumps([{"id": i} for i in range(8)]))

        return Registry(
            [
                read_file,
                list_directory,
                search,
                read_lines,
                write_file,
                edit_file,
                run_tests,
                build_status,
                job_status,
                tail_log,
                db_insert,
                create_record,
                query_api,
            ]
        )
