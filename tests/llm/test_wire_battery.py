"""The wire-fault battery: every provider against broken, hostile and stalling servers.

Hundreds of cases per provider: broken bodies, every field of a valid answer (JSON and each
kind of stream event) replaced by each wrong type, broken event streams, servers that trickle
bytes or keep-alive comments, stay silent or ask for a long ``Retry-After``. Each must end
in an ``LLMError`` or a sane response, within the call's deadline. Run with ``pytest -s`` to
see the tally: tried / failed-safe / broke / hangs per provider.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from tests.llm.conftest import ProviderFactory
from tests.llm.fakeserver import FakeServer, Reply
from tests.llm.faults import (
    Case,
    error_body_cases,
    json_body_cases,
    judge,
    stream_cases,
    valid_events,
)
from tests.llm.wire import WIRES

#: The providers' total deadline in this battery, and how long a case may take at most.
DEADLINE = 0.3
BOUND = DEADLINE + 3.0


def wire_fault_cases(wire: str) -> Iterator[Case]:
    """Servers that never finish, or ask to be waited for far too long."""
    opening = valid_events(wire)[:2]
    yield Case("stall: a JSON body one byte at a time", Reply(stall="trickle"), False, "error")
    yield Case("stall: a stream one byte at a time", Reply(stall="trickle"), True, "error")
    yield Case(
        "stall: keep-alive comments", Reply(stall="keepalive", events=opening), True, "error"
    )
    yield Case("stall: no answer", Reply(stall="silent"), False, "error")
    yield Case("stall: no answer to a stream", Reply(stall="silent"), True, "error")
    yield Case("stall: headers one byte at a time", Reply(stall="slow-headers"), False, "error")
    for header in ("retry-after", "retry-after-ms"):
        value = "50" if header == "retry-after" else "50000"
        for status in (429, 503, 529):
            body = {"error": {"type": "rate_limit_error", "message": "slow down"}}
            reply = Reply(status, body, headers={header: value})
            yield Case(f"{status} {header}: {value}", reply, False, "error")
    yield Case("retry-after: a date far away", _retry_date(), False, "error")
    yield Case("retry-after: inf", Reply(429, {}, headers={"retry-after": "inf"}), False, "error")


def _retry_date() -> Reply:
    return Reply(429, {}, headers={"retry-after": "Wed, 21 Oct 2099 07:28:00 GMT"})


@pytest.mark.parametrize("wire", list(WIRES))
async def test_no_wire_fault_breaks_or_hangs_a_provider(
    wire: str, server: FakeServer, make_provider: ProviderFactory
) -> None:
    provider = make_provider(wire, timeout=DEADLINE, max_retries=2)
    path = WIRES[wire][0]
    tally: Counter[str] = Counter()
    broken: list[str] = []
    cases = [
        *json_body_cases(wire),
        *stream_cases(wire),
        *error_body_cases(),
        *wire_fault_cases(wire),
    ]
    for case in cases:
        server.queue(path, case.reply, *[case.reply] * 2)  # the same again for any retry
        verdict, why = await judge(provider, case, BOUND)
        server.clear(path)
        tally[verdict] += 1
        if verdict != "failed-safe":
            broken.append(f"{case.name} [{verdict}]: {why}")
    print(
        f"\nwire-fault battery, {wire}: tried {len(cases)}, failed-safe {tally['failed-safe']}, "
        f"broke {tally['broke']}, hangs {tally['hang']}"
    )
    assert len(cases) >= 300
    assert not broken, "\n".join(broken)
