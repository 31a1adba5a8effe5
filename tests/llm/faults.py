"""Hostile answers for the provider fault tests: mutations of valid answers, and a judge.

A fault case is a reply the fake server sends, whether the call streams, and what must come of
it: ``"error"`` (an ``LLMError``), ``"ok"`` (a sane response) or ``"either"``. :func:`judge`
runs one case and says whether the provider failed safe, broke (any other exception, or a
response that is not sane) or hung (no outcome within the case's bound).
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from sp4rk.llm.base import Provider
from sp4rk.llm.errors import LLMError
from sp4rk.llm.types import ChatRequest, ChatResponse, Message
from tests.llm.fakeserver import Reply
from tests.llm.wire import WIRES, Turn

Expect = Literal["ok", "error", "either"]
Verdict = Literal["failed-safe", "broke", "hang"]
REQUEST = ChatRequest(messages=[Message("user", "hi")])
#: A turn that uses every part of each wire format: reasoning, text, two tool calls.
TURN = Turn(
    text="Reading both.",
    calls=[("call_1", "read_file", '{"path": "a"}'), ("call_2", "read_file", '{"path": "b"}')],
    reasoning=[("rs_1", "think", "sig")],
    usage=(120, 30),
)
DELETE = object()
#: What replaces a field: nothing at all, and each wrong JSON type (a lone surrogate too).
BAD_VALUES: tuple[Any, ...] = (DELETE, None, 7, True, "\ud800x", [], {})
TOKEN_LIMIT = 1_000_000_000


@dataclass
class Case:
    name: str
    reply: Reply
    stream: bool
    expect: Expect = "either"


def mutated(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """A deep copy of ``value`` with the item at ``path`` replaced (or deleted: ``DELETE``)."""
    result = copy.deepcopy(value)
    if not path:
        return new
    parent = result
    for key in path[:-1]:
        parent = parent[key]
    if new is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return result


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into ``value`` (lists: their first two items only)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:2]):
            yield (*prefix, index)
            yield from paths(item, (*prefix, index))


def show(path: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in path) or "body"


def raw(body: bytes, content_type: str = "application/json", status: int = 200) -> Reply:
    return Reply(status=status, raw=body, content_type=content_type)


def sse(*frames: str | bytes) -> Reply:
    """A stream written byte for byte (each frame: one event, its blank line included)."""
    data = b"".join(
        f if isinstance(f, bytes) else f.encode("utf-8", "surrogatepass") for f in frames
    )
    return Reply(raw=data, events=[])


def frame(data: Any, event: str | None = None) -> str:
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "") + f"data: {text}\n\n"


def valid_events(wire: str) -> list[tuple[str | None, Any]]:
    return WIRES[wire][2](TURN).events or []


def valid_body(wire: str) -> Any:
    return WIRES[wire][1](TURN).body


def json_body_cases(wire: str) -> Iterator[Case]:
    """Generic broken bodies, then every field of a valid body replaced by each bad value."""
    yield from _broken_bodies()
    body = valid_body(wire)
    for path in paths(body):
        for bad in BAD_VALUES:
            name = f"json {show(path)}={_label(bad)}"
            yield Case(name, Reply(body=mutated(body, path, bad)), stream=False)


def stream_cases(wire: str) -> Iterator[Case]:
    """Broken streams, then fields of one event of each kind replaced by each bad value."""
    events = valid_events(wire)
    frames = [frame(data, event) for event, data in events]
    yield Case("sse empty", sse(), True, "error")
    yield Case("sse only comments", sse(": hi\n\n", ": ho\n\n"), True, "error")
    yield Case("sse broken json", sse(frames[0], frame("{broken")), True, "error")
    for label, data in (("null", "null"), ("list", "[]"), ("number", "5"), ("text", '"x"')):
        yield Case(f"sse event {label}", sse(frames[0], frame(data), *frames[1:]), True, "error")
    yield Case("sse not utf-8", sse(frames[0], b"data: \xff\xfe\n\n", *frames[1:]), True, "error")
    yield Case("sse deep", sse(frame("[" * 100_000 + "]" * 100_000)), True, "error")
    yield Case("sse html", Reply(raw=b"<html>busy</html>", events=[]), True, "error")
    yield Case(
        "sse crlf and keep-alives",
        sse(*(": keep-alive\r\n\r\n" + f.replace("\n", "\r\n") for f in frames)),
        True,
        "ok",
    )
    yield Case("sse cr only", sse(*(f.replace("\n", "\r") for f in frames)), True, "ok")
    yield Case("sse json body", Reply(body=valid_body(wire)), True, "error")
    for error in (5, None, [], "text", {"message": 5}, {"type": []}):
        bad = frame({"type": "error", "error": error}, "error")
        yield Case(f"sse error event {_label(error)}", sse(frames[0], bad), True, "error")
    seen_kinds: set[str] = set()
    for position, (event, data) in enumerate(events):
        kind = _event_kind(data)
        if kind in seen_kinds or not isinstance(data, dict):
            continue
        seen_kinds.add(kind)
        for path in paths(data):
            for bad in BAD_VALUES:
                changed = list(events)
                changed[position] = (event, mutated(data, path, bad))
                name = f"sse {kind} {show(path)}={_label(bad)}"
                yield Case(name, Reply(events=changed), stream=True)


def _event_kind(data: Any) -> str:
    if not isinstance(data, dict):
        return str(data)
    if "type" in data:
        return str(data["type"])
    choices = data.get("choices") or [{}]
    delta = choices[0].get("delta") or {}
    return "chunk:" + ",".join(sorted(delta)) + (":usage" if data.get("usage") else "")


def _broken_bodies() -> Iterator[Case]:
    yield Case("body null", raw(b"null"), False, "error")
    yield Case("body list", raw(b"[]"), False, "error")
    yield Case("body list of object", raw(b"[{}]"), False, "error")
    yield Case("body string", raw(b'"hello"'), False, "error")
    yield Case("body number", raw(b"5"), False, "error")
    yield Case("body true", raw(b"true"), False, "error")
    yield Case("body empty object", raw(b"{}"), False, "error")
    yield Case("body empty", raw(b""), False, "error")
    yield Case("body broken json", raw(b'{"choices": [{"message": '), False, "error")
    yield Case("body not utf-8", raw(b'{"x": "\xff\xfe"}'), False, "error")
    yield Case("body nested 100000", raw(b"[" * 100_000 + b"]" * 100_000), False, "error")
    yield Case("body 5000 digits", raw(b'{"n": ' + b"9" * 5000 + b"}"), False, "error")
    yield Case("body NaN", raw(b'{"n": NaN}'), False, "error")
    yield Case("body Infinity", raw(b'{"n": Infinity}'), False, "error")
    yield Case("body 1e999", raw(b'{"n": 1e999}'), False, "error")
    yield Case("body html", raw(b"<html>502</html>", "text/html"), False, "error")
    yield Case("body gzip garbage", _gzip_garbage(), False, "error")


def error_body_cases() -> Iterator[Case]:
    """Error statuses whose bodies are as broken as the answers above."""
    bodies: dict[str, bytes] = {
        "null": b"null",
        "list": b"[]",
        "nested 100000": b"[" * 100_000 + b"]" * 100_000,
        "nested 900": b'{"error": ' * 900 + b"1" + b"}" * 900,
        "5000 digits": b'{"error": {"code": ' + b"9" * 5000 + b"}}",
        "broken": b'{"error": {"message": ',
        "1 MB of text": b"x" * 1_000_000,
        "error number": b'{"error": 5}',
        "wrong types": b'{"error": {"message": 5, "code": [], "type": {}, "metadata": []}}',
        "upstream number": b'{"error": {"message": "x", "metadata": {"raw": 5}}}',
        "not utf-8": b'{"error": {"message": "\xff\xfe"}}',
    }
    for status in (400, 500):  # a 500 is retried: after 1 ms, not the SDK's backoff
        for label, body in bodies.items():
            reply = raw(body, status=status)
            reply.headers = {"retry-after-ms": "1"}
            yield Case(f"HTTP {status} body {label}", reply, False, "error")
            yield Case(f"HTTP {status} stream body {label}", reply, True, "error")


def _gzip_garbage() -> Reply:
    return Reply(
        raw=b"not gzip at all",
        content_type="application/json",
        headers={"Content-Encoding": "gzip"},
    )


def _label(value: Any) -> str:
    if value is DELETE:
        return "<deleted>"
    text = json.dumps(value)
    return text if len(text) < 20 else text[:17] + "..."


def sane(response: Any) -> str:
    """``""`` when ``response`` is a well-typed ``ChatResponse``, else what is wrong."""
    if not isinstance(response, ChatResponse):
        return f"returned {type(response).__name__}"
    strings = [response.model, response.reasoning, response.stop_reason]
    message = response.message
    strings += [message.content, message.reasoning_content]
    for call in message.tool_calls:
        strings += [call.id, call.name, call.input]
    for item in message.reasoning_items:
        strings += [item.id, item.summary]
    for text in strings:
        if not isinstance(text, str):
            return f"a field is {type(text).__name__}, not str"
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return f"text that cannot be sent again: {text!r}"
    for count in (response.usage.input_tokens, response.usage.output_tokens):
        if type(count) is not int or not 0 <= count <= TOKEN_LIMIT:
            return f"token count {count!r}"
    if not math.isfinite(response.usage.total_tokens):
        return "total tokens"
    json.dumps(response.to_dict())
    return ""


async def judge(provider: Provider, case: Case, bound: float) -> tuple[Verdict, str]:
    """Run ``case`` against ``provider``; ``bound`` seconds without an outcome is a hang."""
    call = provider.call_stream(REQUEST, lambda _: None) if case.stream else provider.call(REQUEST)
    try:
        response = await asyncio.wait_for(call, bound)
    except TimeoutError:
        return "hang", "no outcome"
    except LLMError as exc:
        if case.expect == "ok":
            return "broke", f"expected an answer, got {type(exc).__name__}: {exc}"
        return "failed-safe", ""
    except Exception as exc:
        return "broke", f"{type(exc).__name__}: {exc}"
    if case.expect == "error":
        return "broke", "accepted an answer it should have refused"
    problem = sane(response)
    return ("broke", problem) if problem else ("failed-safe", "")
