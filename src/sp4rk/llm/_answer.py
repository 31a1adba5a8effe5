"""Reading a provider's HTTP answer ourselves: a bounded JSON body, or server-sent events.

The SDKs would parse answers with an unbounded ``json.loads`` and hand back objects whose
fields may be anything the server sent; sp4rk reads the raw bytes instead, so a hostile or
broken server meets the bounded parser (:func:`sp4rk._internal.safejson.loads`), size limits,
and a typed reader that names what is wrong (:mod:`sp4rk.llm._shape`). Every failure here is
an :class:`~sp4rk.llm.errors.LLMError` whose message says what the server sent.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from sp4rk._internal import safejson
from sp4rk.llm._shape import kind, malformed

#: The largest answer body, and the largest single event of a stream, read (bytes).
MAX_BODY_BYTES = 64 * 1024 * 1024
#: Nesting accepted in an answer: a tool input of ``safejson.MAX_DEPTH`` levels fits inside.
MAX_ANSWER_DEPTH = safejson.MAX_DEPTH + 16
_NEWLINE = re.compile(r"\r\n|\r|\n")


def decode_json(text: str | bytes, provider: str, what: str) -> Any:
    """``text`` parsed by the bounded parser.

    Raises:
        LLMError: it is not JSON, or breaks a limit (depth, number size, non-finite numbers).
    """
    try:
        return safejson.loads(text, max_depth=MAX_ANSWER_DEPTH, allow_duplicate_keys=True)
    except ValueError as exc:
        shown = text[:80] if isinstance(text, str) else text[:80].decode("utf-8", "replace")
        raise malformed(provider, f"{what} is not valid JSON ({exc}): {shown!r}") from None


async def read_json(chunks: AsyncIterator[bytes], provider: str) -> Any:
    """The JSON body arriving as ``chunks``, at most :data:`MAX_BODY_BYTES` of it."""
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise malformed(provider, f"the body is larger than {MAX_BODY_BYTES} bytes")
    return decode_json(bytes(body), provider, "the body")


@dataclass(frozen=True, slots=True)
class Event:
    """One server-sent event: its ``event:`` name (``""`` when none) and its data lines."""

    name: str
    data: str


async def sse_events(chunks: AsyncIterator[bytes], provider: str) -> AsyncIterator[Event]:
    """The events of a ``text/event-stream`` body, as the SSE specification splits them.

    Lines end in CR, LF or CRLF; ``data:`` lines are joined with newlines; comments (keep-alive
    ``:`` lines) and ``id:``/``retry:`` fields are skipped; an event is dispatched at a blank
    line when it has data, and at the end of the body. Invalid UTF-8 is replaced. An event
    (or a line) larger than :data:`MAX_BODY_BYTES` is an error rather than memory without
    bound.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    buffer = ""
    data: list[str] = []
    name, size = "", 0
    scanned = 0  # the buffer holds no line end before this
    finished = False
    iterator = chunks.__aiter__()
    while not finished:
        try:
            chunk = await iterator.__anext__()
        except StopAsyncIteration:
            finished = True  # the last event counts even without its blank line
            buffer += decoder.decode(b"", final=True) + "\n\n"
        else:
            buffer += decoder.decode(chunk)
        start = 0
        for match in _NEWLINE.finditer(buffer, scanned):
            if match.group() == "\r" and match.end() == len(buffer) and not finished:
                break  # perhaps the first half of CRLF: wait for the next chunk
            line = buffer[start : match.start()]
            start = match.end()
            if not line:
                if data:
                    yield Event(name, "\n".join(data))
                name, data, size = "", [], 0
                continue
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "data":
                data.append(value)
                size += len(value) + 1
            elif field == "event":
                name = value
            if size > MAX_BODY_BYTES:
                raise malformed(provider, f"a stream event is larger than {MAX_BODY_BYTES} bytes")
        buffer = buffer[start:]
        scanned = max(len(buffer) - 1, 0)  # a trailing CR is looked at again
        if len(buffer) > MAX_BODY_BYTES:
            raise malformed(provider, f"a stream line is longer than {MAX_BODY_BYTES} bytes")


def event_json(event: Event, provider: str) -> dict[str, Any]:
    """The event's data as a JSON object.

    Raises:
        LLMError: the data is not JSON, or not an object.
    """
    value = decode_json(event.data, provider, f"stream event {event.name or 'data'!r}")
    if not isinstance(value, dict):
        raise malformed(
            provider, f"stream event {event.name or 'data'!r} is {kind(value)}, not an object"
        )
    return value
