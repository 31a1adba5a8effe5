"""The HTTP side of ``web_fetch``: an httpx client that only connects to vetted addresses.

Kept apart from :mod:`sp4rk.tools.builtins.web` so that importing the built-ins does not
import httpx; this module loads on the first fetch.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpcore
import httpx

from sp4rk.tools.base import ToolError

if TYPE_CHECKING:
    from sp4rk.tools.builtins.web import Resolver
#: ``address -> whether it may be reached``.
AddressCheck = Callable[[str], bool]

_HEADERS = {
    "User-Agent": "Mozilla/5.0 (compatible; sp4rk web_fetch)",
    "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
    "Accept-Language": "en;q=0.9,*;q=0.5",
}


class BlockedAddressError(httpcore.ConnectError):
    """A connection was refused because its address is not on the public internet."""


@dataclass(slots=True)
class Page:
    """A fetched response body and what is needed to decode it."""

    url: str
    content_type: str
    charset: str | None
    body: bytes


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves, vets and connects to exactly the vetted address; refuses the others."""

    def __init__(self, allow_hosts: frozenset[str], resolver: Resolver, check: AddressCheck):
        self._inner = httpcore.AnyIOBackend()
        self._allow = allow_hosts
        self._resolve = resolver
        self._check = check

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        name = host.lower()
        try:
            addresses = list(await self._resolve(host, port))
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        if not {name, f"{name}:{port}", f"[{name}]:{port}"} & self._allow:
            refused = [a for a in addresses if not self._check(a)]
            addresses = [a for a in addresses if self._check(a)]
            if not addresses:
                raise BlockedAddressError(
                    f"refused to connect to {host} ({', '.join(refused) or 'no address'}): not a "
                    "public internet address (loopback, private, link-local and metadata "
                    "addresses are blocked)"
                )
        last: Exception = httpcore.ConnectError(f"cannot resolve {host}")
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                last = exc
        raise last

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise BlockedAddressError("web_fetch never connects to Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


#: httpcore's exceptions, each raised again as the httpx exception of the same name.
_HTTPCORE_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.ProxyError,
    httpcore.UnsupportedProtocol,
)


@contextlib.contextmanager
def _as_httpx_errors() -> Iterator[None]:
    """Raise an httpcore failure as the matching httpx exception (what the client expects)."""
    try:
        yield
    except _HTTPCORE_ERRORS as exc:
        for cls in type(exc).__mro__:
            mapped = getattr(httpx, cls.__name__, None)
            if isinstance(mapped, type) and issubclass(mapped, httpx.TransportError):
                raise mapped(str(exc)) from exc
        raise httpx.TransportError(str(exc)) from exc  # pragma: no cover - all are mapped


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, stream: AsyncIterable[bytes]) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()


class _GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport over an httpcore pool that connects through the guarded backend.

    httpx's own transport offers no way to pass a network backend, so this one builds the
    pool itself (default TLS settings, no proxy) and translates requests and errors.
    """

    def __init__(self, backend: _GuardedBackend) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=10,
            network_backend=backend,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            response = await self._pool.handle_async_request(core_request)
        stream = response.stream
        if not isinstance(stream, AsyncIterable):  # pragma: no cover - async pool
            raise httpx.TransportError("the connection pool returned a synchronous stream")
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


async def fetch(
    url: str,
    *,
    allow_hosts: frozenset[str],
    resolver: Resolver,
    check: AddressCheck,
    max_bytes: int,
    max_redirects: int,
) -> Page:
    """GET ``url``, following redirects, connecting only where ``check`` allows.

    Raises:
        ToolError: for a refused connection, an HTTP error status, too many redirects, a
            body over ``max_bytes`` or any transport failure.
    """
    backend = _GuardedBackend(allow_hosts, resolver, check)
    async with httpx.AsyncClient(
        transport=_GuardedTransport(backend),
        follow_redirects=True,
        max_redirects=max_redirects,
        headers=_HEADERS,
        trust_env=False,
        timeout=None,
    ) as client:
        try:
            async with client.stream("GET", url) as response:
                if not response.is_success:
                    raise ToolError(
                        f"failed to fetch URL: HTTP {response.status_code}: "
                        f"{response.reason_phrase}"
                    )
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > max_bytes:
                    raise ToolError(_too_large(max_bytes))
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > max_bytes:
                        raise ToolError(_too_large(max_bytes))
                content_type = response.headers.get("content-type", "").split(";")[0]
                return Page(
                    str(response.url),
                    content_type.strip().lower(),
                    response.charset_encoding,
                    bytes(body),
                )
        except httpx.TooManyRedirects:
            raise ToolError(f"failed to fetch URL: more than {max_redirects} redirects") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"failed to fetch URL: {exc or type(exc).__name__}") from None
        except httpx.InvalidURL as exc:  # httpx cannot parse the URL (0177.0.0.1, …)
            raise ToolError(f"invalid URL: {exc}") from None


def _too_large(max_bytes: int) -> str:
    return (
        f"failed to fetch URL: the response is larger than {max_bytes} bytes; web_fetch "
        "refuses it rather than cut it. Look for a smaller page or a raw/text version."
    )
