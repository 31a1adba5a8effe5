"""Record real model calls to a JSONL cassette, and replay them for deterministic tests.

A cassette is a dump file (the format of ``sp4rk.agent.DumpCaller``): one JSON object per
line, ``{"ts", "direction": "request"|"response", "id", "data": <to_dict()>, "error"?}``. The
request line is written when the call starts (a call that hangs still leaves it), the
response line when it ends; both carry the call's ``id``, so calls made concurrently pair up
whatever the order of their lines. Every string written is masked with the credentials of
the caller being recorded (see ``Provider.redact``). Record a run once against a real
provider::

    async with RecordingLLM(OpenAIChatProvider("gpt-4o-mini"), "run.jsonl") as llm:
        await Executor(llm, registry, 20).run(registry.list(), window)

then replay it offline, as often as you like::

    llm = ReplayLLM("run.jsonl")
    result = await Executor(llm, registry, 20).run(registry.list(), window)
    llm.assert_complete()

``ReplayLLM`` answers each request with the response recorded for an identical request
(compared by a canonical hash of its JSON form), so the agent must take the same path it took
when recording. A request that was never recorded fails with :class:`CassetteMissError` and a
diff against the request the cassette expected next. Key-shaped text (``sk-...``) is masked
in live requests as in recorded ones before they are compared; a request that held another
credential, masked when recorded, needs a ``normalize`` function to match. Failed calls
replay as the same exception type, with the same ``status_code``, ``retryable``,
``retry_after`` and ``code``: an overflow recorded as ``ContextWindowExceededError`` replays
as one.
"""

from __future__ import annotations

import collections
import difflib
import hashlib
import json
import os
import threading
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self, cast

from sp4rk._internal import safejson
from sp4rk.llm import _secrets, errors
from sp4rk.llm._last_told import last_observation
from sp4rk.llm._secrets import map_strings
from sp4rk.llm.types import ChatRequest, ChatResponse

#: Maps a request's JSON form to what should be compared (drop volatile fields here).
Normalizer = Callable[[dict[str, Any]], dict[str, Any]]
_DIFF_LINES = 60
#: Nesting accepted in a cassette line (requests carry tool schemas).
_MAX_LINE_DEPTH = 200


def dump_record(
    direction: str,
    data: dict[str, Any] | None,
    error: BaseException | None = None,
    *,
    ts: datetime | None = None,
    call_id: str = "",
    redact: Callable[[str], str] | None = None,
) -> str:
    """One cassette/dump line (without the newline).

    A failed call's line carries ``error`` (the message) and ``error_type`` (the class name);
    for an :class:`~sp4rk.llm.errors.LLMError` also ``error_status_code``,
    ``error_retryable`` and ``error_retry_after``, and ``error_code`` for a
    :class:`~sp4rk.llm.errors.ProviderAPIError`, so a replay raises an equal exception.

    Args:
        direction: ``"request"`` or ``"response"``.
        data: the request or response as ``to_dict()``; ``None`` for a failed call.
        error: the exception of a failed call.
        ts: when it happened (default: now).
        call_id: the call's id, the same on its request and response lines.
        redact: applied to every string of the record (masks credentials).
    """
    record: dict[str, Any] = {
        "ts": (ts or datetime.now(UTC)).isoformat(timespec="microseconds"),
        "direction": direction,
    }
    if call_id:
        record["id"] = call_id
    record["data"] = data
    if error is not None:
        record["error"] = str(error)
        record["error_type"] = type(error).__name__
        if isinstance(error, errors.LLMError):
            record["error_status_code"] = error.status_code
            record["error_retryable"] = error.retryable
            if error.retry_after is not None:
                record["error_retry_after"] = error.retry_after
        if isinstance(error, errors.ProviderAPIError):
            record["error_code"] = error.code
    if redact is not None:
        record = map_strings(record, redact)
    return json.dumps(record, ensure_ascii=False)


def redactor_for(caller: object) -> Callable[[str], str]:
    """The credential masking of ``caller`` (a provider, a router, a decorator of one).

    Callers without one get the masking of key-shaped words (``sk-...``) only.
    """
    redact = getattr(caller, "redact", None)
    if callable(redact):
        return cast("Callable[[str], str]", redact)
    return _mask_key_shaped


def _mask_key_shaped(text: str) -> str:
    return _secrets.redact(text, ())


async def record_call(
    request: ChatRequest,
    send: Callable[[], Awaitable[ChatResponse]],
    write: Callable[[str], None],
    redact: Callable[[str], str],
) -> ChatResponse:
    """Call ``send`` and write the request line before it, the response line after it.

    Each ``write`` gets one whole line (newline included): writers lock around it, so lines of
    concurrent calls never mix. A failed call's response line holds its exception; a
    cancelled call leaves its request line alone (replay ignores it).
    """
    call_id = uuid.uuid4().hex
    write(dump_record("request", request.to_dict(), call_id=call_id, redact=redact) + "\n")
    try:
        response = await send()
    except Exception as exc:
        write(dump_record("response", None, exc, call_id=call_id, redact=redact) + "\n")
        raise
    answer = response.to_dict()
    write(dump_record("response", answer, call_id=call_id, redact=redact) + "\n")
    return response


def request_key(request: dict[str, Any], normalize: Normalizer | None = None) -> str:
    """The canonical hash of a request's JSON form (key order and spacing do not matter)."""
    data = normalize(request) if normalize else request
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _recorded_error(record: dict[str, Any]) -> errors.LLMError:
    """The exception a failed call's record describes (an ``LLMError`` whatever was raised)."""
    cls = getattr(errors, str(record.get("error_type")), None)
    if not (isinstance(cls, type) and issubclass(cls, errors.LLMError)):
        cls = errors.LLMError
    status = record.get("error_status_code")
    options: dict[str, Any] = {
        "status_code": status if isinstance(status, int) else None,
        "retryable": record.get("error_retryable") is True,
    }
    wait = record.get("error_retry_after")
    if isinstance(wait, int | float) and not isinstance(wait, bool):
        options["retry_after"] = float(wait)
    if issubclass(cls, errors.ProviderAPIError):
        options["code"] = str(record.get("error_code") or "")
    return cls(str(record["error"]), **options)


class CassetteMissError(AssertionError):
    """A replayed request was never recorded; the message shows how it differs."""


class RecordingLLM:
    """Forwards every call to ``inner`` and appends the request and response to a cassette.

    Streaming is forwarded when ``inner`` streams. The file is truncated when the recorder is
    created, and closed by ``aclose()`` (or ``async with``). The request line is written (and
    flushed) when the call starts, the response line when it ends: a failed call is recorded
    with its exception, a cancelled one keeps its request line only. Strings are masked with
    ``inner``'s credentials (:func:`redactor_for`).

    Args:
        inner: the real caller (a provider, a router, ...).
        path: the cassette file to write (missing parent folders are created).
    """

    def __init__(self, inner: Any, path: str | os.PathLike[str]) -> None:
        self.inner = inner
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)  # tests/cassettes/ on first record
        self._file: IO[str] | None = self.path.open("w", encoding="utf-8")
        self._lock = threading.Lock()

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Call ``inner`` and record the exchange."""
        return await self._record(request, lambda: self.inner.call(request))

    async def call_stream(
        self, request: ChatRequest, on_text: Callable[[str], None]
    ) -> ChatResponse:
        """Stream from ``inner`` when it can (else one delta), and record the exchange."""
        stream = getattr(self.inner, "call_stream", None)
        if stream is None:
            response = await self.call(request)
            if response.message.content:
                on_text(response.message.content)
            return response
        return await self._record(request, lambda: stream(request, on_text))

    async def _record(
        self, request: ChatRequest, send: Callable[[], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        return await record_call(request, send, self._write, redactor_for(self.inner))

    def redact(self, text: str) -> str:
        """``text`` masked as ``inner`` masks it (so recorders stack with dumps)."""
        return redactor_for(self.inner)(text)

    def _write(self, lines: str) -> None:
        with self._lock:
            if self._file is None:
                raise ValueError(f"cassette {self.path} is closed")
            self._file.write(lines)
            self._file.flush()

    async def aclose(self) -> None:
        """Close the cassette file (``inner`` is left to its owner)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class ReplayLLM:
    """Answers requests from a cassette, matched by the canonical hash of the request.

    Identical requests recorded several times are answered in recording order.

    Args:
        path: the cassette (a file written by :class:`RecordingLLM` or ``DumpCaller``).
        normalize: applied to every request's JSON form, recorded and live, before hashing;
            use it to drop fields that legitimately vary between runs (temporary paths,
            timestamps in tool output).

    Raises:
        ValueError: the file is not a cassette (a line is not JSON, or a response has no
            request before it).
    """

    def __init__(self, path: str | os.PathLike[str], *, normalize: Normalizer | None = None):
        self.path = Path(path)
        self._normalize = normalize
        self._order: list[tuple[str, dict[str, Any]]] = []
        self._answers: dict[str, collections.deque[dict[str, Any]]] = {}
        self._used: set[int] = set()
        self.requests: list[ChatRequest] = []
        pending: dict[str, Any] | None = None  # a request line without an id
        by_id: dict[str, dict[str, Any]] = {}
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = safejson.loads(line, max_depth=_MAX_LINE_DEPTH, allow_duplicate_keys=True)
            except ValueError as exc:
                raise ValueError(f"{self.path}:{number}: not a JSON line: {exc}") from None
            if not isinstance(record, dict):
                raise ValueError(f"{self.path}:{number}: not a dump record (a JSON object)")
            call_id = record.get("id")
            data = record.get("data") or {}
            if record.get("direction") == "request":
                if isinstance(call_id, str) and call_id:
                    by_id[call_id] = data
                else:
                    pending = data
                continue
            if isinstance(call_id, str) and call_id in by_id:
                request = by_id.pop(call_id)
            elif pending is not None and not call_id:
                request, pending = pending, None
            else:
                raise ValueError(f"{self.path}:{number}: a response without a request")
            key = self._key(request)
            self._answers.setdefault(key, collections.deque()).append(
                {**record, "_index": len(self._order)}
            )
            self._order.append((key, request))

    @property
    def remaining(self) -> int:
        """Recorded exchanges not replayed yet."""
        return len(self._order) - len(self._used)

    async def call(self, request: ChatRequest) -> ChatResponse:
        """The recorded response to ``request`` (or its recorded exception, raised).

        Raises:
            CassetteMissError: ``request`` was not recorded (or its recordings are used up).
        """
        self.requests.append(request)
        data = request.to_dict()
        queue = self._answers.get(self._key(data))
        if not queue:
            raise CassetteMissError(self._miss_message(request, data))
        record: dict[str, Any] = queue.popleft()
        self._used.add(record["_index"])
        if record.get("error") is not None:
            raise _recorded_error(record)
        return ChatResponse.from_dict(record.get("data") or {})

    async def call_stream(
        self, request: ChatRequest, on_text: Callable[[str], None]
    ) -> ChatResponse:
        """Like :meth:`call`, delivering the recorded text as one delta."""
        response = await self.call(request)
        if response.message.content:
            on_text(response.message.content)
        return response

    def assert_complete(self) -> None:
        """Fail unless every recorded exchange was replayed.

        Raises:
            AssertionError: naming how many were left.
        """
        if self.remaining:
            raise AssertionError(
                f"{self.path}: {self.remaining} of {len(self._order)} recorded call(s) were "
                "not replayed: the agent stopped earlier than when it was recorded"
            )

    def _key(self, request: dict[str, Any]) -> str:
        """The request's hash, key-shaped text masked (a recording masks it too)."""
        return request_key(map_strings(request, _mask_key_shaped), self._normalize)

    def _miss_message(self, request: ChatRequest, data: dict[str, Any]) -> str:
        expected = next(
            (req for i, (_, req) in enumerate(self._order) if i not in self._used), None
        )
        head = f"{self.path}: no recorded response for request #{len(self.requests)}"
        if expected is None:
            told = last_observation(request)
            return f"{head}: every recorded call was already replayed. {told}".rstrip()

        def pretty(value: dict[str, Any]) -> list[str]:
            shown = self._normalize(value) if self._normalize else value
            return json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False).splitlines()

        diff = list(
            difflib.unified_diff(
                pretty(expected), pretty(data), "recorded (next unused)", "live", lineterm=""
            )
        )
        if len(diff) > _DIFF_LINES:
            diff = [*diff[:_DIFF_LINES], f"... ({len(diff) - _DIFF_LINES} more diff lines)"]
        return f"{head}. Differences from the next recorded request:\n" + "\n".join(diff)
