"""The ground every contender stands on: offline environment, scenarios, the tool, the probe.

Everything here is identical for sp4rk, the peers and the floor: the scripted model's sequence of
replies (:class:`Script`), the one tool's name, schema and result (:func:`make_result`), and the
way time is measured (:class:`Probe`). Each contender only adapts these to its framework's types.
"""

from __future__ import annotations

import os
import resource
import socket
import statistics
import time
from collections.abc import Collection
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from typing import Any

#: Set before any peer is imported: no tracing, no telemetry, no hub look-ups.
TELEMETRY_OFF_ENV = {
    "LANGCHAIN_TRACING_V2": "false",  # langchain-core / LangGraph: LangSmith tracing
    "LANGSMITH_TRACING": "false",
    "OPENAI_AGENTS_DISABLE_TRACING": "1",  # openai-agents: trace export to OpenAI
    "HF_HUB_OFFLINE": "1",  # smolagents imports huggingface_hub
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "OTEL_SDK_DISABLED": "true",  # pydantic-ai / smolagents OpenTelemetry instrumentation
    "LOGFIRE_SEND_TO_LOGFIRE": "false",
    "DO_NOT_TRACK": "1",
}

# --- scenarios ------------------------------------------------------------------------------

S1_STEPS = (10, 100, 500)
S1_RESULT_BYTES = 200
#: Every contender runs every S1/S2 configuration exactly ``REPS`` times; the median is reported
#: (the same count for everyone: a minimum over more samples would favour the fast contenders).
REPS = 5
S2_STEPS = 500
S2_RESULT_BYTES = 4096
#: Steps compared for growth: 2-50 (step 1 starts at the first model call) vs 451-500.
S2_EARLY = (2, 50)
S2_LATE = (451, 500)
S3_RUNS = 200
#: Model calls per run: 19 tool steps and the final answer, so the ideal wall time is 1.0 s.
S3_CALLS = 20
S3_LATENCY_S = 0.05
S3_RESULT_BYTES = S1_RESULT_BYTES
#: S5: many concurrent runs in one process (the issue's 2,000; ``BENCH_S5_RUNS`` lowers it on a
#: small machine, and the report says how many ran).
S5_RUNS = int(os.environ.get("BENCH_S5_RUNS", "2000"))
S5_CALLS = S3_CALLS
S5_LATENCY_S = S3_LATENCY_S
S5_RESULT_BYTES = S2_RESULT_BYTES
S4_STEPS = 10_000
S4_RESULT_BYTES = 1024 * 1024
#: RSS is sampled every this many tool calls during S4.
S4_RSS_EVERY = 250
#: S4 compares the mean step cost of these windows (the first thousand steps warm up).
S4_EARLY = (1001, 2000)
S4_LATE = (9001, 10_000)

# --- the conversation and the tool -------------------------------------------------------------

SYSTEM_PROMPT = "You are a research agent. Use the lookup tool, then give the final answer."
TASK = "Look up every record the task needs, then answer."
FINAL_ANSWER = "done"
TOOL_NAME = "lookup"
TOOL_DESCRIPTION = "Look up a record by its query and return it."
TOOL_PARAM = "query"
TOOL_PARAM_DESCRIPTION = "The record to look up."

_LINE = "lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do.\n"  # 64 bytes


@cache
def _padding(size: int) -> str:
    return (_LINE * (size // len(_LINE) + 1))[:size]


def make_result(query: str, size: int) -> str:
    """The tool's result for ``query``: exactly ``size`` bytes of ASCII lines, distinct per query.

    Queries have a fixed width (:meth:`Script.next_query`), so every result of one scenario has
    the same size and different content (no cache or breaker sees two identical results).
    """
    head = f"record {query}\n"
    return head + _padding(size - len(head))


class Script:
    """The scripted model's decisions: ``steps`` tool calls with fresh arguments, then finish."""

    __slots__ = ("calls", "steps")

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.calls = 0

    def next_query(self) -> str | None:
        """The query of the next tool call, or ``None`` when the model gives its final answer."""
        self.calls += 1
        return f"q{self.calls:07d}" if self.calls <= self.steps else None

    def call_id(self) -> str:
        """An id for the call just scripted, unique within the run."""
        return f"call_{self.calls}"


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One run: tool steps before the final answer, result size, model latency."""

    steps: int
    result_bytes: int
    latency_s: float = 0.0
    endurance: bool = False
    """S4: the contender's long-run configuration (a realistic window, Stage 1 limits)."""
    store: bool = False
    """sp4rk only: journal the run to an SQLite runs store in a temporary folder (flat memory:
    completed observations are read back from it on demand). Other contenders ignore it."""


class Probe:
    """Clock readings taken inside the scripted model and the tool during one run.

    Wall clock: ``stamps`` holds ``(clock, inside)`` at the first model call and at the entry of
    every tool call, where ``inside`` is the wall time spent so far inside model and tool bodies
    (latency included). A step's own wall cost is the clock difference between two tool calls
    minus the body time in between.

    CPU clock: wall time counts whenever other processes take the CPU, and the development
    machines are shared, so costs are also measured on the process's CPU clock, which is too
    slow to read at every step: around a whole run, and at the tool calls named in ``marks``
    (``cpu_marks``). The bodies' share is then their median duration times their number, so a
    body that happened to be preempted does not distort it.
    """

    __slots__ = (
        "cpu_marks",
        "inside",
        "marks",
        "model_seconds",
        "rss_every",
        "rss_samples",
        "stamps",
        "tool_seconds",
    )

    def __init__(self, marks: Collection[int] = (), rss_every: int = 0) -> None:
        self.inside = 0.0
        self.stamps: list[tuple[float, float]] = []
        self.model_seconds: list[float] = []
        self.tool_seconds: list[float] = []
        self.marks = frozenset(marks)
        self.cpu_marks: dict[int, float] = {}
        self.rss_every = rss_every
        self.rss_samples: list[tuple[int, float]] = []

    def model_enter(self) -> float:
        """Call first thing in the model body; pass the result to :meth:`model_leave`."""
        now = time.perf_counter()
        if not self.stamps:
            self.stamps.append((now, self.inside))
        return now

    def model_leave(self, entered: float) -> None:
        """Call last thing in the model body."""
        seconds = time.perf_counter() - entered
        self.model_seconds.append(seconds)
        self.inside += seconds

    def tool_enter(self) -> float:
        """Call first thing in the tool body; pass the result to :meth:`tool_leave`."""
        now = time.perf_counter()
        self.stamps.append((now, self.inside))
        call = len(self.stamps) - 1
        if call in self.marks:
            self.cpu_marks[call] = time.process_time()
        if self.rss_every and call % self.rss_every == 0:
            self.rss_samples.append((call, rss_mb()))
        return now

    def tool_leave(self, entered: float) -> None:
        """Call last thing in the tool body."""
        seconds = time.perf_counter() - entered
        self.tool_seconds.append(seconds)
        self.inside += seconds

    def step_costs(self) -> list[float]:
        """Own wall seconds of each tool step (step 1 counts from the first model call)."""
        return [(t1 - t0) - (i1 - i0) for (t0, i0), (t1, i1) in pairwise(self.stamps)]

    def body_seconds(self, model_calls: int, tool_calls: int) -> float:
        """Typical time inside ``model_calls`` model bodies and ``tool_calls`` tool bodies."""
        model = statistics.median(self.model_seconds) if self.model_seconds else 0.0
        tool = statistics.median(self.tool_seconds) if self.tool_seconds else 0.0
        return model_calls * model + tool_calls * tool

    def own_cpu(self, cpu: float) -> float:
        """Own CPU seconds of the whole run, given the run's CPU seconds."""
        return cpu - self.body_seconds(len(self.model_seconds), len(self.tool_seconds))

    def window_cost(self, first: int, last: int) -> float:
        """Mean own CPU seconds of steps ``first..last``; needs marks at ``first - 1``, ``last``."""
        steps = last - first + 1
        cpu = self.cpu_marks[last] - self.cpu_marks[first - 1]
        return (cpu - self.body_seconds(steps, steps)) / steps


def rss_mb() -> float:
    """Current resident set size of this process, in MiB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --- offline -----------------------------------------------------------------------------------


class NetworkDisabledError(OSError):
    """A contender tried to reach the network during a benchmark."""


def go_offline() -> None:
    """Silence telemetry and make any IP connection or DNS look-up in this process fail."""
    os.environ.update(TELEMETRY_OFF_ENV)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise NetworkDisabledError("the benchmark runs offline")

    inet_connect, inet_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(sock: socket.socket, address: Any) -> None:
        if sock.family != socket.AF_UNIX:
            refuse()
        inet_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        if sock.family != socket.AF_UNIX:
            refuse()
        return inet_connect_ex(sock, address)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = refuse
    socket.create_connection = refuse
