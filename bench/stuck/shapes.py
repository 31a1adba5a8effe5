"""The shapes: what a stuck model does over and over, and what legitimate work looks like.

A shape is a model's script: its reply to the n-th model call (:class:`Turn`). Loop shapes go
on for ever (the model is stubborn: it ignores every nudge); legitimate shapes end with a final
answer after ``length`` model calls. Each shape also sets up its :class:`~world.World` (a
server that restarts, a job that takes a while).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from world import World

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Turn:
    """One model reply: tool calls (with an optional thought), a text-only reply, or an answer."""

    calls: tuple[Call, ...] = ()
    text: str = ""
    """The thought that goes with the calls, or the whole reply when there are none."""
    answer: str | None = None


@dataclass(frozen=True)
class Shape:
    """A named script, a loop or legitimate work."""

    name: str
    kind: Literal["loop", "legit"]
    what: str
    turn: Callable[[int], Turn]
    length: int = 0
    """Legitimate shapes: model calls including the final answer. Loops: 0 (endless)."""
    setup: Callable[[World], None] = field(default=lambda world: None)


def read(path: str) -> Call:
    return ("read_file", {"path": path})


LIST: Call = ("list_directory", {"path": "."})
TESTS: Call = ("run_tests", {})


def search(query: str) -> Call:
    return ("search", {"query": query})


def edit(path: str, old: str, new: str) -> Call:
    return ("edit_file", {"path": path, "old": old, "new": new})


def cycling(*calls: Call, thoughts: Callable[[int], str] | None = None) -> Callable[[int], Turn]:
    """A loop through ``calls``, one per reply, for ever."""

    def turn(n: int) -> Turn:
        return Turn((calls[n % len(calls)],), thoughts(n) if thoughts else "")

    return turn


def after(prefix: Sequence[Call], then: Callable[[int], Turn]) -> Callable[[int], Turn]:
    """``prefix`` (one call a reply), then the loop ``then``."""

    def turn(n: int) -> Turn:
        return Turn((prefix[n],)) if n < len(prefix) else then(n - len(prefix))

    return turn


def script(*calls: Call | Sequence[Call]) -> tuple[Callable[[int], Turn], int]:
    """A legitimate script: one reply per item (a call, or a list of parallel calls), then done."""
    replies = [tuple(c) if isinstance(c, list) else (c,) for c in calls]

    def turn(n: int) -> Turn:
        return Turn(replies[n]) if n < len(replies) else Turn(answer="done")

    return turn, len(replies) + 1


def legit(
    name: str,
    what: str,
    calls: Sequence[Call | list[Call]],
    setup: Callable[[World], None] | None = None,
) -> Shape:
    turn, length = script(*calls)
    return Shape(name, "legit", what, turn, length, setup or (lambda world: None))


def shuffled_rereads(seed: int, paths: Sequence[str], with_listing: bool) -> Callable[[int], Turn]:
    """Read every file once, then re-read them (and list the folder) in random order."""
    rng = random.Random(seed)
    first: list[Call] = [read(p) for p in paths]
    pool: list[Call] = [read(p) for p in paths] + ([LIST] if with_listing else [])
    later: list[Call] = []
    while len(later) < 200:
        pick = rng.choice(pool)
        if not later or later[-1] != pick:  # no call twice in a row: that is plain repetition
            later.append(pick)
    calls = first + later
    return lambda n: Turn((calls[n],))


def never_found(n: int) -> Turn:
    """Ever-new searches for something that is not there."""
    words = ("retry_budget", "RetryBudget", "retry budget", "retryBudget", "RETRY_BUDGET")
    return Turn((search(f"{words[n % len(words)]}{'' if n < 5 else n}"),))


def same_error_new_arguments(n: int) -> Turn:
    """An edit whose ``old`` text is not in the file, retried with ever-new replacements."""
    return Turn((edit("a.py", "value_0 = compute(0)  # old", f"value_0 = {n}"),))


PY = ("a.py", "b.py", "c.py", "d.py", "e.py")

LOOPS = [
    Shape("identical read", "loop", "the same read_file, over and over", cycling(read("a.py"))),
    Shape(
        "identical search", "loop", "the same search, over and over", cycling(search("compute(3)"))
    ),
    Shape(
        "identical test run",
        "loop",
        "run_tests again and again, nothing changed in between (same failure)",
        cycling(TESTS),
        setup=lambda w: w.files.__setitem__("b.py", w.files["b.py"] + "BUG\n"),
    ),
    Shape(
        "identical failing read",
        "loop",
        "reading a file that does not exist",
        cycling(read("missing.py")),
    ),
    Shape(
        "identical failing edit",
        "loop",
        "an edit whose old text is not there, same arguments",
        cycling(edit("a.py", "no such text", "x")),
    ),
    Shape(
        "A-B read/list",
        "loop",
        "read a.py, list the folder (the issue's example)",
        cycling(read("a.py"), LIST),
    ),
    Shape(
        "A-B search/read",
        "loop",
        "search, read the hit, search again",
        cycling(search("compute(4)"), read("c.py")),
    ),
    Shape("A-B-C", "loop", "read, list, search", cycling(read("a.py"), LIST, search("value_2"))),
    Shape(
        "A-B-C-D",
        "loop",
        "read, read, list, search",
        cycling(read("a.py"), read("b.py"), LIST, search("value_2")),
    ),
    Shape(
        "A-B-C-D-E",
        "loop",
        "a cycle of five calls (longer than the cycle breaker's period)",
        cycling(*[read(p) for p in PY]),
    ),
    Shape(
        "A-B alternating failures",
        "loop",
        "two missing files, read in turn",
        cycling(read("missing1.py"), read("missing2.py")),
    ),
    Shape(
        "A-B fail/succeed",
        "loop",
        "a failing edit, then the test run, in turn",
        cycling(edit("b.py", "BUG-FREE", "fixed"), TESTS),
        setup=lambda w: w.files.__setitem__("b.py", w.files["b.py"] + "BUG\n"),
    ),
    Shape(
        "A-B-C with a failure",
        "loop",
        "failing edit, test run, read",
        cycling(edit("b.py", "BUG-FREE", "fixed"), TESTS, read("b.py")),
        setup=lambda w: w.files.__setitem__("b.py", w.files["b.py"] + "BUG\n"),
    ),
    Shape(
        "edits that revert each other",
        "loop",
        "edit x to y, edit y back to x",
        cycling(
            edit("a.py", "compute(1)", "compute(-1)"), edit("a.py", "compute(-1)", "compute(1)")
        ),
    ),
    Shape(
        "edit, read, revert, read",
        "loop",
        "an edit and its undo, each checked by a read",
        cycling(
            edit("a.py", "compute(1)", "compute(-1)"),
            read("a.py"),
            edit("a.py", "compute(-1)", "compute(1)"),
            read("a.py"),
        ),
    ),
    Shape(
        "identical read, changing thoughts",
        "loop",
        "the same call, each time with a new sentence of reasoning",
        cycling(
            read("a.py"), thoughts=lambda n: f"Let me look at a.py once more (attempt {n + 1})."
        ),
    ),
    Shape(
        "A-B, changing thoughts",
        "loop",
        "read/list with a new thought each time",
        cycling(read("a.py"), LIST, thoughts=lambda n: f"Step {n + 1}: checking again."),
    ),
    Shape(
        "A-B-C, changing thoughts",
        "loop",
        "read/list/search with a new thought each time",
        cycling(read("a.py"), LIST, search("value_2"), thoughts=lambda n: f"Thinking ({n})..."),
    ),
    Shape(
        "re-reads, random order",
        "loop",
        "read five unchanged files, then re-read them in random order",
        shuffled_rereads(7, PY, with_listing=False),
    ),
    Shape(
        "re-reads with listings",
        "loop",
        "re-read unchanged files in random order with folder listings in between",
        shuffled_rereads(11, PY, with_listing=True),
    ),
    Shape(
        "round robin with listings",
        "loop",
        "read a, list, read b, list, read c, list, again (a period of six)",
        cycling(read("a.py"), LIST, read("b.py"), LIST, read("c.py"), LIST),
    ),
    Shape(
        "cycle after progress",
        "loop",
        "four useful reads, then read/list for ever",
        after([read(p) for p in ("b.py", "c.py", "d.py", "e.py")], cycling(read("a.py"), LIST)),
    ),
    Shape(
        "parallel pair repeated",
        "loop",
        "two reads in one reply, the same reply every time",
        lambda n: Turn((read("a.py"), read("b.py"))),
    ),
    Shape(
        "monologue",
        "loop",
        "text-only replies, no tool call",
        lambda n: Turn(text="I should check the configuration before going on."),
    ),
    Shape(
        "searches that find nothing",
        "loop",
        "ever-new spellings of a name that does not exist",
        never_found,
    ),
    Shape(
        "same error, new arguments",
        "loop",
        "an edit that keeps failing the same way, with a new replacement each time",
        same_error_new_arguments,
    ),
    Shape(
        "server never comes back",
        "loop",
        'the same call failing "server restarted" (retryable) for ever',
        cycling(("query_api", {"endpoint": "/users"})),
        setup=lambda w: setattr(w, "restarts", 10_000),
    ),
]


def _fix_then_test(rounds: int) -> list[Call]:
    calls: list[Call] = []
    for i in range(rounds):
        calls += [TESTS, edit("b.py", "BUG" if i == rounds - 1 else f"value_{i} =", f"fixed_{i} =")]
    return [*calls, TESTS]


def _tests_bugged(world: World) -> None:
    world.files["b.py"] += "BUG\n"


LEGIT = [
    legit(
        "polling, result changes",
        "a build status polled ten times, 10 % further each time (tool not declared pollable)",
        [("build_status", {"build": "main"})] * 10,
    ),
    legit(
        "pollable, result unchanged",
        'a pollable job status, "running" eight times, then "succeeded"',
        [("job_status", {"job": "deploy"})] * 9,
    ),
    legit(
        "waiting with a growing log",
        "pollable status and the job's log in turn; the status stays the same, the log grows",
        [
            c
            for _ in range(8)
            for c in (("job_status", {"job": "deploy"}), ("tail_log", {"job": "deploy"}))
        ],
    ),
    legit(
        "paging with moving offsets",
        "a long log read 50 lines at a time, 15 pages (every page the same size)",
        [("read_lines", {"path": "app.log", "offset": o, "limit": 50}) for o in range(0, 750, 50)],
    ),
    legit(
        "bulk inserts (affected_rows)",
        'ten inserts, each answered [{"affected_rows": 1}] (MCP tool, default traits)',
        [("db_insert", {"table": "users", "row": {"name": f"user{i}"}}) for i in range(10)],
    ),
    legit(
        "bulk creates (ids)",
        'ten creates, each answered {"id": N}',
        [("create_record", {"kind": "ticket", "name": f"ticket {i}"}) for i in range(10)],
    ),
    legit(
        "identical appends, new ids",
        "the same create eight times (a log line written on purpose), a new id each time",
        [("create_record", {"kind": "heartbeat", "name": "ping"})] * 8,
    ),
    legit(
        "retry after restart",
        'a call fails twice with "server restarted" (retryable), then succeeds; work goes on',
        [
            *[("query_api", {"endpoint": "/users"})] * 3,
            ("query_api", {"endpoint": "/teams"}),
            read("a.py"),
        ],
        setup=lambda w: setattr(w, "restarts", 2),
    ),
    legit(
        "search refinements",
        "a search narrowed step by step, some finding nothing, then the file is read",
        [
            search("Compute"),
            search("compute("),
            search("compute(1"),
            search("compute(17)"),
            search("value_17 = compute(17)"),
            search("value_17 = compute(17) "),
            read("b.py"),
        ],
    ),
    legit(
        "edit, then re-read",
        "five edits of one file, each checked by reading it again",
        [c for i in range(5) for c in (edit("a.py", f"value_{i} =", f"v{i} ="), read("a.py"))],
    ),
    legit(
        "test-fix loop",
        "run the tests, edit, run them again: the same failure until the last fix",
        _fix_then_test(5),
        setup=_tests_bugged,
    ),
    legit(
        "listing between new reads",
        "list the folder, read a new file, list again: the listing never changes",
        [c for p in PY for c in (LIST, read(p))],
    ),
    legit(
        "reading and searching",
        "six files read, then six searches, one after the other",
        [read(p) for p in PY] + [read("README.md")] + [search(f"value_{i} ") for i in range(6)],
    ),
    legit(
        "parallel reads of new files",
        "two new files per reply",
        [
            [read("a.py"), read("b.py")],
            [read("c.py"), read("d.py")],
            [read("e.py"), read("README.md")],
        ],
    ),
]

SHAPES = [*LOOPS, *LEGIT]
