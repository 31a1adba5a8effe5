"""Record real model calls to a JSONL cassette, and replay them for deterministic tests.

A cassette is a dump file (the format of ``sp4rk.agent.DumpCaller``): one JSON object per
line, ``{"ts", "direction": "request"|"response", "data": <to_dict()>, "error"?}``, a request
followed by its response. Both lines of an exchange are written together once the call has
ended, so calls made concurrently never interleave. Record a run once against a real
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
diff against the request the cassette expected next. Failed calls replay as the same
exception type, with the same ``status_code``, ``retryable`` and ``code``: an overflow recorded
as ``ContextWindowExceededError`` replays as one.
"""

from __future__ import annotations

import collections
import difflib
import hashlib
import json
import os
import threading
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from sp4rk.llm import errors
from sp4rk.llm.types import ChatRequest, ChatResponse

#: Maps a request's JSON form to what should be compared (drop volatile fields here).
Normalizer = Callable[[dict[str, Any]], dict[str, Any]]
_DIFF_LINES = 60


def dump_record(
    direction: str,
    data: dict[str, Any] | None,
    error: BaseException | None = None,
    *,
    ts: datetime | None = None,
) -> str:
    """One cassette/dump line (without the newline).

    A failed call's line carries ``error`` (the message) and ``error_type`` (the class name);
    for an :class:`~sp4rk.llm.errors.LLMError` also ``error_status_code`` and
    ``error_retryable``, and ``error_code`` for a
    :class:`~sp4rk.llm.errors.ProviderAPIError`, so a replay raises an equal exception.

    Args:
        direction: ``"request"`` or ``"response"``.
        data: the request or response as ``to_dict()``; ``None`` for a failed call.
        error: the exception of a failed call.
        ts: when it happened (default: now).
    """
    record: dict[str, Any] = {
        "ts": (ts or datetime.now(UTC)).isoformat(timespec="microseconds"),
        "direction": direction,
        "data": data,
    }
    if error is not None:
        record["error"] = str(error)
        record["error_type"] = type(error).__name__
        if isinstance(error, errors.LLMError):
            record["error_status_code"] = error.status_code
            record["error_retryable"] = error.retryable
        if isinstance(error, errors.ProviderAPIError):
            record["error_code"] = error.code
    return json.dumps(record, ensure_ascii=False)


def exchange_lines(
    request: ChatRequest,
    sent: datetime,
    response: ChatResponse | None,
    error: BaseException | None = None,
) -> str:
    """The request line and the response (or error) line of one call, each ending in a newline.

    Writers emit both with a single write once the call is over, so exchanges made
    concurrently never interleave and a replay pairs every response with its request.

    Args:
        request: the request sent.
        sent: when it was sent (the request line's timestamp).
        response: the response, or ``None`` when the call failed.
        error: the exception of a failed call.
    """
    answer = None if response is None else response.to_dict()
    return (
        dump_record("request", request.to_dict(), ts=sent)
        + "\n"
        + dump_record("response", answer, error)
        + "\n"
    )


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
    if issubclass(cls, errors.ProviderAPIError):
        options["code"] = str(record.get("error_code") or "")
    return cls(str(record["error"]), **options)


class CassetteMissError(AssertionError):
    """A replayed request was never recorded; the message shows how it differs."""


class RecordingLLM:
    """Forwards every call to ``inner`` and appends the request and response to a cassette.

    Streaming is forwarded when ``inner`` streams. The file is truncated when the recorder is
    created, and closed by ``aclose()`` (or ``async with``). Each exchange is written (and
    flushed) when its call ends: a failed call is recorded with its exception, a cancelled one
    not at all.

    Args:
        inner: the real caller (a provider, a router, ...).
        path: the cassette file to write.
    """

    def __init__(self, inner: Any, path: str | os.PathLike[str]) -> None:
        self.inner = inner
        self.path = Path(path)
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
        sent = datetime.now(UTC)
        try:
            response = await send()
        except Exception as exc:
            self._write(exchange_lines(request, sent, None, exc))
            raise
        self._write(exchange_lines(request, sent, response))
        return response

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
        pending: dict[str, Any] | None = None
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{self.path}:{number}: not a JSON line: {exc}") from None
            if record.get("direction") == "request":
                pending = record.get("data") or {}
            elif pending is None:
                raise ValueError(f"{self.path}:{number}: a response without a request")
            else:
                key = request_key(pending, normalize)
                self._answers.setdefault(key, collections.deque()).append(
                    {**record, "_index": len(self._order)}
                )
                self._order.append((key, pending))
                pending = None

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
        queue = self._answers.get(request_key(data, self._normalize))
        if not queue:
            raise CassetteMissError(self._miss_message(data))
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

    def _miss_message(self, data: dict[str, Any]) -> str:
        expected = next(
            (req for i, (_, req) in enumerate(self._order) if i not in self._used), None
        )
        head = f"{self.path}: no recorded response for request #{len(self.requests)}"
        if expected is None:
            return f"{head}: every recorded call was already replayed"

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
