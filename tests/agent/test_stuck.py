"""Stuck detection end to end: loops stop at the documented call, legitimate work never does.

Every run here is a scripted model against real ``@tool`` tools over a small in-memory
workspace (:class:`Desk`), with the executor's default breakers unless a test says otherwise.
The model is stubborn: it follows its script whatever it is told, so a loop ends only when a
breaker stops it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from sp4rk.agent import (
    CircuitBreakerConfig,
    Executor,
    ExecutorResult,
    ExitReason,
    NudgeKind,
    RecordingEvents,
    StepLimitResponse,
    load_checkpoint,
    save_checkpoint,
)
from sp4rk.llm import ChatRequest, ChatResponse
from sp4rk.llm.testing import FunctionLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow
from sp4rk.tools import Registry, RunContext, ToolError, ToolResult, ToolTraits, tool

from .helpers import Reprieve, only

#: Diagnostics any breaker fires when it nudges or aborts.
BREAKER_EVENTS = {
    f"{name}_{kind}"
    for name in (
        "repeated_tool_call",
        "fruitless",
        "same_tool_repeat",
        "cycle",
        "no_progress",
        "parse_error",
        "truncation",
    )
    for kind in ("nudge", "abort")
} | {"truncation_detected"}

Call = tuple[str, dict[str, Any]]


class Desk:
    """A small workspace and the tools a coding agent uses on it, each logging its calls."""

    def __init__(self) -> None:
        # Sizes far apart, as real files' are: the same-tool breaker watches result sizes.
        self.files = {
            name: f"# {name}\n" + f"line of {name}\n" * (5 + 12 * i)
            for i, name in enumerate(("a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "notes.txt"))
        }
        self.calls: list[str] = []
        self.progress = 0
        self.rows = 0
        self.restarts = 0
        self.after_listing: Callable[[], None] = lambda: None

    def registry(self) -> Registry:
        desk = self

        @tool(read_only=True)
        def read_file(path: str) -> str:
            """Read a file."""
            desk.calls.append(f"read_file {path}")
            if path not in desk.files:
                raise ToolError(f"no such file: {path}")
            return desk.files[path]

        @tool(traits=ToolTraits(read_only=True))
        def read_lines(path: str, offset: int, limit: int) -> str:
            """Read `limit` lines of a long log from `offset`."""
            desk.calls.append(f"read_lines {offset}")
            return "".join(
                f"{i:05d} event {i * 7919 % 1000}\n" for i in range(offset, offset + limit)
            )

        @tool(read_only=True)
        def list_directory(path: str) -> str:
            """List a directory."""
            desk.calls.append(f"list_directory {path}")
            listing = "\n".join(f"{n}  {len(t)} bytes" for n, t in sorted(desk.files.items()))
            desk.after_listing()
            return listing

        @tool(read_only=True)
        def search(query: str) -> str:
            """Search every file for a word."""
            desk.calls.append(f"search {query}")
            hits = [
                f"{name}:{no}: {line}"
                for name, text in sorted(desk.files.items())
                for no, line in enumerate(text.splitlines(), 1)
                if query in line
            ]
            return "\n".join(hits) if hits else "No matches"

        @tool(traits=ToolTraits(mutating=True, brief_results=True))
        def edit_file(path: str, old: str, new: str) -> str:
            """Replace `old` by `new` in a file."""
            desk.calls.append(f"edit_file {path}")
            if old not in desk.files.get(path, ""):
                raise ToolError(f"{old!r} not found in {path}")
            desk.files[path] = desk.files[path].replace(old, new, 1)
            return f"edited {path}"

        @tool
        def build_status(build: str) -> str:
            """How far a build has got (an ordinary tool: not declared pollable)."""
            desk.calls.append("build_status")
            desk.progress = min(100, desk.progress + 10)
            return f"build {build}: {desk.progress}% done"

        @tool(traits=ToolTraits(pollable=True))
        def job_status(job: str) -> str:
            """A job's state; the same answer for a while is normal."""
            desk.calls.append("job_status")
            desk.progress += 1
            return "done" if desk.progress > 8 else "running"

        @tool
        def db_insert(table: str, row: dict[str, Any]) -> str:
            """Insert a row (an MCP database tool: default traits, short acknowledgement)."""
            desk.calls.append(f"db_insert {row}")
            desk.rows += 1
            return json.dumps([{"affected_rows": 1}])

        @tool
        def create_record(name: str) -> str:
            """Create a record; answers with its id (an MCP tool with default traits)."""
            desk.calls.append(f"create_record {name}")
            desk.rows += 1
            return json.dumps({"id": desk.rows})

        @tool
        def query_api(endpoint: str) -> ToolResult:
            """Query a server that restarts once in a while."""
            desk.calls.append(f"query_api {endpoint}")
            if desk.restarts > 0:
                desk.restarts -= 1
                return ToolResult("server restarted, try again", is_error=True, retryable=True)
            return ToolResult(f"{endpoint}: " + "record " * 12)

        return Registry(
            [
                read_file,
                read_lines,
                list_directory,
                search,
                edit_file,
                build_status,
                job_status,
                db_insert,
                create_record,
                query_api,
            ]
        )


def model(script: Sequence[Call | str]) -> Callable[[ChatRequest], ChatResponse]:
    """A model that answers its n-th call with ``script[n]`` (a call, or a final answer).

    It counts its own earlier replies in the prompt, so a resumed run picks up where the
    paused one stopped.
    """

    def answer(request: ChatRequest) -> ChatResponse:
        n = sum(1 for m in request.messages if m.role == "assistant")
        item = script[n] if n < len(script) else "out of script"
        response = finish_response(item) if isinstance(item, str) else tool_calls_response(item)
        for call in response.message.tool_calls:
            call.id = f"call_{n}"
        return response

    return answer


def run(
    script: Sequence[Call | str],
    desk: Desk | None = None,
    *,
    max_steps: int = 40,
    **executor_kwargs: Any,
) -> tuple[ExecutorResult, int, RecordingEvents]:
    """Run ``script`` on a desk; return the result, the model calls made, and the events."""
    desk = desk or Desk()
    tools = desk.registry()
    llm = FunctionLLM(model(script))
    events = RecordingEvents()
    executor = Executor(llm, tools, max_steps, events=events, **executor_kwargs)
    result = executor.run_sync(tools.list(), ContextWindow(task="work on the desk"))
    return result, len(llm.requests), events


def fired(events: RecordingEvents) -> list[tuple[int, str]]:
    """(model call, diagnostic) of every breaker nudge and abort, in order."""
    return [
        (step, name) for step, name, _ in events.of("executor_diagnostic") if name in BREAKER_EVENTS
    ]


READ_A: Call = ("read_file", {"path": "a.txt"})
READ_B: Call = ("read_file", {"path": "b.txt"})
LIST: Call = ("list_directory", {"path": "."})
SEARCH: Call = ("search", {"query": "line"})
CYCLES = {2: [READ_A, LIST], 3: [READ_A, LIST, SEARCH], 4: [READ_A, LIST, SEARCH, READ_B]}


# --- cycles ---------------------------------------------------------------------------------


@pytest.mark.parametrize("period", [2, 3, 4])
def test_a_cycle_across_tools_is_nudged_after_one_repetition_and_aborted_on_the_next_call(
    period: int,
) -> None:
    desk = Desk()
    result, calls, events = run(CYCLES[period] * 10, desk)
    # Nudged when the cycle has been repeated once in full (call 2p), stopped at call 2p + 1.
    cycle = [(call, name) for call, name in fired(events) if name.startswith("cycle")]
    assert cycle == [(2 * period, "cycle_nudge"), (2 * period + 1, "cycle_abort")]
    if period == 4:  # three re-runs in a row brought nothing new before the cycle was whole
        assert fired(events)[0] == (7, "no_progress_nudge")
    assert events.diagnostics("cycle_abort") == [{"period": period, "repeated_calls": period + 1}]
    assert result.exit_reason is ExitReason.CYCLE_ABORT and not result.finished
    assert calls == 2 * period + 1 and len(desk.calls) == 2 * period + 1
    assert f"same sequence of {period} tool calls" in result.output
    circle = [s for s in result.steps if "going in a circle" in s.user_nudge]
    assert len(circle) == 1 and circle[0].nudge_kind is NudgeKind.BREAKER


def test_a_file_edited_between_two_reads_is_not_a_cycle() -> None:
    desk = Desk()
    edits = iter(range(100))

    def colleague_edits_notes() -> None:
        desk.files["notes.txt"] += f"note {next(edits)}\n"

    desk.after_listing = colleague_edits_notes
    script = [("read_file", {"path": "notes.txt"}), LIST] * 6
    result, calls, events = run([*script, "read them all"], desk)
    assert result.exit_reason is ExitReason.FINISHED and calls == len(script) + 1
    assert fired(events) == []


def test_a_cycle_that_edits_the_file_it_rereads_is_progress() -> None:
    # edit, read, edit, read: the edits differ, and so does every read.
    script: list[Call | str] = []
    for i in range(6):
        script += [("edit_file", {"path": "a.txt", "old": "line", "new": f"row{i}"}), READ_A]
    result, calls, events = run([*script, "edited"])
    assert result.exit_reason is ExitReason.FINISHED and calls == len(script) + 1
    assert fired(events) == []


def test_edits_that_revert_each_other_are_a_cycle() -> None:
    forth: Call = ("edit_file", {"path": "a.txt", "old": "line", "new": "LINE"})
    back: Call = ("edit_file", {"path": "a.txt", "old": "LINE", "new": "line"})
    result, calls, _ = run([forth, back] * 10)
    assert result.exit_reason is ExitReason.CYCLE_ABORT and calls == 5


def test_a_cycle_whose_calls_run_in_one_response_is_caught_by_the_call() -> None:
    def two_reads(request: ChatRequest) -> ChatResponse:
        return tool_calls_response(READ_A, READ_B)

    tools = Desk().registry()
    llm = FunctionLLM(two_reads)
    result = Executor(llm, tools, 20).run_sync(tools.list(), ContextWindow(task="t"))
    # a, b | a, b (nudged) | a: aborted on the fifth call, in the third response.
    assert result.exit_reason is ExitReason.CYCLE_ABORT and len(llm.requests) == 3


def test_a_cycle_after_real_progress_is_still_caught_at_its_own_count() -> None:
    start: list[Call | str] = [("read_file", {"path": p}) for p in ("c.txt", "d.txt", "e.txt")]
    result, calls, events = run([*start, *[READ_A, LIST] * 10])
    assert result.exit_reason is ExitReason.CYCLE_ABORT and calls == len(start) + 5
    assert fired(events)[0] == (len(start) + 4, "cycle_nudge")


# --- no progress ----------------------------------------------------------------------------

FILES = ("a.txt", "b.txt", "c.txt", "d.txt", "e.txt")
#: Re-reads with no period of 2 to 4 and no call twice in a row: only no-progress sees them.
REREADS = ("c.txt", "a.txt", "e.txt", "b.txt", "d.txt", "a.txt", "c.txt", "b.txt", "e.txt")


def reads(paths: Sequence[str]) -> list[Call | str]:
    return [("read_file", {"path": p}) for p in paths]


def test_rereading_unchanged_files_in_any_order_is_nudged_at_3_and_aborted_at_6() -> None:
    result, calls, events = run([*reads(FILES), LIST, *reads(REREADS)])
    first = len(FILES) + 1  # calls that brought something new
    assert fired(events) == [(first + 3, "no_progress_nudge"), (first + 6, "no_progress_abort")]
    assert events.diagnostics("no_progress_abort") == [{"calls_without_progress": 6}]
    assert result.exit_reason is ExitReason.NO_PROGRESS_ABORT and calls == first + 6
    assert "brought no new information" in result.output


@pytest.mark.parametrize("seed", range(8))
def test_random_rereads_never_get_past_six_calls(seed: int) -> None:
    rng = random.Random(seed)
    order: list[str] = []
    while len(order) < 30:
        pick = rng.choice([*FILES, "."])
        if not order or order[-1] != pick:  # an immediate repeat is the repeat breaker's
            order.append(pick)
    script = [LIST if p == "." else ("read_file", {"path": p}) for p in order]
    last_new = max(order.index(p) for p in set(order))  # the last first-time call
    result, calls, _ = run(script)
    assert result.exit_reason in (ExitReason.NO_PROGRESS_ABORT, ExitReason.CYCLE_ABORT)
    # Six calls after the last new one, or seven when another breaker's nudge falls on the
    # sixth (see test_an_abort_is_not_postponed_by_another_breakers_nudge).
    assert calls <= last_new + 1 + 7


def test_an_abort_is_not_postponed_by_another_breakers_nudge() -> None:
    # b e a c a d . d b a d a d: the 13th call is the sixth in a row with nothing new (abort)
    # and also completes a-d-a-d (the cycle breaker's nudge).
    order = ["b", "e", "a", "c", "a", "d", ".", "d", "b", "a", "d", "a", "d", "e", "a"]
    script = [LIST if p == "." else ("read_file", {"path": f"{p}.txt"}) for p in order]
    result, calls, events = run(script)
    assert ("no_progress_abort", 13) in [(name, call) for call, name in fired(events)]
    assert result.exit_reason is ExitReason.NO_PROGRESS_ABORT and calls == 13


def test_a_new_result_restarts_the_no_progress_count() -> None:
    script = [*reads(FILES), *reads(REREADS[:5]), ("read_file", {"path": "notes.txt"})]
    script += reads(REREADS[:5])
    result, _, events = run([*script, "read"])
    assert result.exit_reason is ExitReason.FINISHED
    assert [name for _, name in fired(events)] == ["no_progress_nudge", "no_progress_nudge"]


# --- reprieve -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (StepLimitResponse.ALLOW_ONCE, "one more chance"),
        (StepLimitResponse.ALLOW_MORE, "let you continue"),
        (StepLimitResponse.ALLOW_ALWAYS, "switched off"),
    ],
)
@pytest.mark.parametrize(
    ("reason", "script"),
    [
        ("cycle", [READ_A, LIST] * 3),  # aborted at call 5
        ("no_progress", [*reads(FILES), *reads(REREADS[:6])]),  # aborted at call 11
    ],
)
def test_a_reprieve_lets_the_run_go_on(
    answer: StepLimitResponse, says: str, reason: str, script: list[Call | str]
) -> None:
    hitl = Reprieve(answer)
    result, _, events = run([*script, "done after all"], hitl=hitl)
    assert hitl.reasons == [reason]
    assert result.exit_reason is ExitReason.FINISHED and result.output == "done after all"
    assert events.diagnostics("breaker_reprieve") == [{"breaker": reason, "response": answer.value}]
    reprieved = [s for s in result.steps if s.nudge_kind is NudgeKind.REPRIEVE]
    assert len(reprieved) == 1 and says in reprieved[0].user_nudge


@pytest.mark.parametrize("answer", [StepLimitResponse.ALLOW_ONCE, StepLimitResponse.ALLOW_MORE])
def test_a_cycle_reprieve_starts_the_count_afresh(answer: StepLimitResponse) -> None:
    hitl = Reprieve(answer)
    cfg = only(cycle_max_period=4, cycle_nudge_threshold=1, cycle_abort_threshold=1)
    result, calls, events = run([READ_A, LIST] * 10, hitl=hitl, circuit_breaker=cfg)
    # Aborted at call 5 and reprieved; calls 6-9 are a fresh A-B-A-B (nudge), 10 aborts.
    assert fired(events) == [
        (4, "cycle_nudge"),
        (5, "cycle_abort"),
        (9, "cycle_nudge"),
        (10, "cycle_abort"),
    ]
    assert hitl.reasons == ["cycle", "cycle"]
    assert result.exit_reason is ExitReason.CYCLE_ABORT and calls == 10


def test_a_no_progress_reprieve_starts_the_count_afresh() -> None:
    hitl = Reprieve(StepLimitResponse.ALLOW_ONCE)
    cfg = only(no_progress_nudge_threshold=3, no_progress_abort_threshold=6)
    _, calls, events = run([*reads(FILES), *reads(REREADS * 2)], hitl=hitl, circuit_breaker=cfg)
    assert fired(events) == [
        (8, "no_progress_nudge"),
        (11, "no_progress_abort"),
        (14, "no_progress_nudge"),
        (17, "no_progress_abort"),
    ]
    assert hitl.reasons == ["no_progress", "no_progress"] and calls == 17


def test_allow_always_switches_the_cycle_abort_off_but_not_no_progress() -> None:
    hitl = Reprieve(StepLimitResponse.ALLOW_ALWAYS)
    result, calls, events = run([READ_A, LIST] * 10, hitl=hitl)
    # The cycle breaker never aborts again; the same loop still brings nothing new, so the
    # no-progress breaker stops it (asking the human first, with its own name).
    assert hitl.reasons == ["cycle", "no_progress"]
    assert [name for _, name in fired(events)].count("cycle_abort") == 1
    assert result.exit_reason is ExitReason.NO_PROGRESS_ABORT and calls == 8


def test_allow_always_for_both_lets_a_loop_run_to_its_end() -> None:
    hitl = Reprieve(StepLimitResponse.ALLOW_ALWAYS, StepLimitResponse.ALLOW_ALWAYS)
    script = [READ_A, LIST] * 8
    result, calls, _ = run([*script, "done"], hitl=hitl)
    assert result.exit_reason is ExitReason.FINISHED and calls == len(script) + 1


# --- switched off -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "off",
    [{"cycle_nudge_threshold": 0}, {"cycle_max_period": 1}],
    ids=["nudge=0", "max_period=1"],
)
def test_zero_switches_the_cycle_breaker_off(off: dict[str, int]) -> None:
    cfg = CircuitBreakerConfig(**off)
    result, calls, events = run([READ_A, LIST] * 10, circuit_breaker=cfg)
    assert not [name for _, name in fired(events) if name.startswith("cycle")]
    assert result.exit_reason is ExitReason.NO_PROGRESS_ABORT and calls == 8  # the other one


def test_cycle_abort_zero_keeps_the_nudge_only() -> None:
    cfg = only(cycle_max_period=4, cycle_nudge_threshold=1, cycle_abort_threshold=0)
    script = [READ_A, LIST] * 6
    result, calls, events = run([*script, "done"], circuit_breaker=cfg)
    assert fired(events) == [(4, "cycle_nudge")]
    assert result.exit_reason is ExitReason.FINISHED and calls == len(script) + 1


def test_zero_switches_no_progress_nudge_and_abort_off_separately() -> None:
    script = [*reads(FILES), *reads(REREADS)]
    _, _, events = run(script, circuit_breaker=only(no_progress_abort_threshold=6))
    assert fired(events) == [(11, "no_progress_abort")]  # no nudge before it
    result, _, events = run([*script, "x"], circuit_breaker=only(no_progress_nudge_threshold=3))
    assert fired(events) == [(8, "no_progress_nudge")] and result.finished


def test_with_every_breaker_off_a_loop_runs_to_the_step_limit() -> None:
    result, calls, events = run([READ_A, LIST] * 20, max_steps=12, circuit_breaker=only())
    assert fired(events) == [] and calls == 12
    assert result.exit_reason is ExitReason.STEP_LIMIT


# --- pause and resume -------------------------------------------------------------------------


def paused_and_resumed(
    script: Sequence[Call | str], pause_at: int, tmp_path: Path
) -> tuple[ExecutorResult, int]:
    """Run ``script``, pause at boundary ``pause_at``, save, load, resume on a new executor."""
    tools = Desk().registry()
    checks = 0

    def pause(ctx: RunContext) -> bool:
        nonlocal checks
        checks += 1
        return checks == pause_at

    first = FunctionLLM(model(script))
    paused = Executor(first, tools, 40, pause_checker=pause).run_sync(
        tools.list(), ContextWindow(task="t")
    )
    assert paused.exit_reason is ExitReason.PAUSED
    save_checkpoint(tmp_path / "run.json", paused)
    checkpoint = load_checkpoint(tmp_path / "run.json")
    assert checkpoint.state is not None
    window = ContextWindow(task="t")
    window.seed_steps(checkpoint)
    second = FunctionLLM(model(script))
    resumed = Executor(second, tools, 40, resume_steps=checkpoint).run_sync(tools.list(), window)
    return resumed, len(first.requests) + len(second.requests)


CYCLE_LOOP: list[Call | str] = [READ_A, LIST] * 10  # stops at call 5
STALE_LOOP: list[Call | str] = [*reads(FILES), *reads(REREADS)]  # stops at call 11


@pytest.mark.parametrize(
    ("script", "reason", "stop", "pause_at"),
    [
        (CYCLE_LOOP, ExitReason.CYCLE_ABORT, 5, 3),  # paused before the cycle is whole
        (CYCLE_LOOP, ExitReason.CYCLE_ABORT, 5, 5),  # paused between the nudge and the abort
        (STALE_LOOP, ExitReason.NO_PROGRESS_ABORT, 11, 7),  # two calls into the count
        (STALE_LOOP, ExitReason.NO_PROGRESS_ABORT, 11, 9),  # after the nudge
    ],
)
def test_a_paused_and_resumed_loop_stops_where_an_unpaused_one_does(
    script: list[Call | str], reason: ExitReason, stop: int, pause_at: int, tmp_path: Path
) -> None:
    result, calls = paused_and_resumed(script, pause_at, tmp_path)
    assert result.exit_reason is reason and calls == stop


# --- legitimate repetition never trips anything -----------------------------------------------


def polls(call: Call, n: int) -> list[Call | str]:
    return [call] * n


def legit(
    name: str, script: list[Call | str], setup: Callable[[Desk], None] = lambda d: None, **kw: Any
) -> Any:
    return pytest.param(setup, script, id=name, **kw)


LEGITIMATE = [
    legit("polling whose result changes", polls(("build_status", {"build": "main"}), 10)),
    legit("a pollable tool with an unchanged result", polls(("job_status", {"job": "deploy"}), 9)),
    legit(
        "paging with moving offsets",
        [("read_lines", {"path": "app.log", "offset": o, "limit": 50}) for o in range(0, 500, 50)],
    ),
    legit(
        "bulk inserts acknowledged with affected_rows",
        [("db_insert", {"table": "users", "row": {"name": f"user{i}"}}) for i in range(10)],
    ),
    legit(
        "bulk creates answered with ids", [("create_record", {"name": f"it{i}"}) for i in range(10)]
    ),
    legit(
        "a retry after the server restarted",
        [*polls(("query_api", {"endpoint": "/users"}), 4), ("query_api", {"endpoint": "/teams"})],
        setup=lambda desk: setattr(desk, "restarts", 3),
    ),
    legit(
        "search refinements",
        [
            ("search", {"query": "TODO"}),
            ("search", {"query": "todo"}),
            ("search", {"query": "line of a"}),
            ("search", {"query": "line of b"}),
            ("search", {"query": "# c"}),
            ("search", {"query": "FIXME"}),
            ("read_file", {"path": "c.txt"}),
        ],
    ),
    legit(
        "edit, then re-read",
        [
            step
            for i in range(5)
            for step in (("edit_file", {"path": "a.txt", "old": "line", "new": f"l{i}"}), READ_A)
        ],
    ),
    legit(
        "a listing between reads of new files",
        [step for p in FILES for step in (LIST, ("read_file", {"path": p}))],
    ),
]


@pytest.mark.parametrize(("setup", "script"), LEGITIMATE)
def test_legitimate_repetition_runs_to_its_end_without_a_nudge(
    setup: Callable[[Desk], None], script: list[Call | str]
) -> None:
    desk = Desk()
    setup(desk)
    result, calls, events = run([*script, "all done"], desk)
    assert fired(events) == []
    assert result.exit_reason is ExitReason.FINISHED and calls == len(script) + 1
    assert not [s for s in result.steps if s.nudge_kind is NudgeKind.BREAKER]


def test_retries_after_a_restart_are_forgiven_three_times_only() -> None:
    desk = Desk()
    desk.restarts = 10  # the server never comes back
    result, calls, _ = run(polls(("query_api", {"endpoint": "/users"}), 20), desk)
    # Three retries are forgiven; the fourth failure counts, so the fifth call is nudged
    # (one sooner after a failure) and the sixth aborts.
    assert result.exit_reason is ExitReason.REPEAT_ABORT and calls == 6


def test_an_edit_failing_the_same_way_with_new_arguments_is_stopped() -> None:
    # Every call differs (a new replacement each time), so neither the repeat, the cycle nor
    # the no-progress breaker sees it; the same-tool breaker counts failures of any tool.
    script = [
        ("edit_file", {"path": "a.txt", "old": "not there", "new": f"v{i}"}) for i in range(20)
    ]
    result, calls, events = run(script)
    assert fired(events) == [(8, "same_tool_repeat_nudge"), (12, "same_tool_repeat_abort")]
    assert result.exit_reason is ExitReason.SAME_TOOL_ABORT and calls == 12


@pytest.mark.parametrize("job_moves", [True, False])
def test_reading_a_log_between_polls_of_a_moving_job_is_waiting_not_a_loop(
    job_moves: bool,
) -> None:
    polls = 0

    @tool(read_only=True)
    def read_log(q: str) -> str:
        """Read the build log (unchanged while the job runs)."""
        return "log: building " + "." * 60

    @tool(traits=ToolTraits(read_only=True, pollable=True))
    def status(job: str) -> str:
        """Poll the job."""
        nonlocal polls
        polls += 1
        return f"progress {polls if job_moves else 1}% " + "." * 60

    rounds = [
        response
        for _ in range(12)
        for response in (
            tool_calls_response(("read_log", {"q": "a"})),
            tool_calls_response(("status", {"job": "j"})),
        )
    ]
    tools = Registry([read_log, status])
    script = iter([*rounds, finish_response("done")])
    executor = Executor(FunctionLLM(lambda request: next(script)), tools, 100)
    executor.set_checklist_gate_enabled(False)
    result = executor.run_sync(tools.list(), ContextWindow(task="wait for the build"))
    if job_moves:
        assert result.finished and len(result.steps) == 25
    else:  # nothing moves: the unchanged log reads are caught
        assert result.exit_reason is ExitReason.NO_PROGRESS_ABORT
