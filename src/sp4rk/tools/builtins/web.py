"""``web_fetch``: fetch a public web page as markdown, with size and time caps.

Server-side request forgery is stopped where it cannot be dodged, at connect time: the HTTP
client's network backend resolves every host itself, drops loopback, private, link-local,
shared, reserved and multicast addresses (cloud metadata endpoints included), and connects to
exactly the address it vetted. Every redirect opens its connections through the same check,
and a DNS answer that changes between a check and a connect (rebinding) cannot matter,
because there is no separate check. Proxies from the environment are ignored. Hosts that
need a local server (tests, an intranet wiki) are named explicitly in ``allow_hosts``.

The output is marked untrusted: the executor wraps it in ``<untrusted-content>`` tags.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

from sp4rk._internal.args import as_list
from sp4rk.tools.base import Tool, ToolError, ToolTraits
from sp4rk.tools.builtins.files import check_line_range
from sp4rk.tools.function import tool

#: Largest response body accepted; a larger one is an error, never a silent cut.
MAX_BODY_BYTES = 10 * 1024 * 1024
#: Seconds a whole fetch (connects, redirects, body) may take.
DEFAULT_FETCH_TIMEOUT = 30.0
#: Redirects followed before giving up.
MAX_REDIRECTS = 10
#: HTML converted to markdown; the rest of a larger page is left out (with a note).
MAX_HTML_BYTES = 1024 * 1024
#: Seconds the conversion to text may take (it runs in a worker thread).
CONVERT_TIMEOUT = 20.0

#: ``(host, port) -> IP addresses``; :func:`system_resolver` by default.
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
#: IPv6 ranges refused outright although Python may count them as global: IPv4-compatible
#: addresses (``::a.b.c.d``, deprecated), site-local ``fec0::/10`` and local-use NAT64.
_REFUSED_V6 = (
    ipaddress.ip_network("::/96"),
    ipaddress.ip_network("fec0::/10"),
    ipaddress.ip_network("64:ff9b:1::/48"),
)
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript")
_DROP_TAGS = (
    "script", "style", "noscript", "template", "svg", "canvas", "iframe", "form", "nav",
    "footer", "header", "aside", "button", "input", "select",
)  # fmt: skip


def is_public_address(address: str) -> bool:
    """Whether ``address`` is a globally routable unicast IP (embedded IPv4 checked too)."""
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(
            address.split("%", 1)[0]
        )
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in network for network in _REFUSED_V6):
            return False
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip.sixtofour is not None:
            ip = ip.sixtofour
        elif ip in _NAT64:
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.is_global and not ip.is_multicast


async def system_resolver(host: str, port: int) -> list[str]:
    """Resolve ``host`` with the system resolver, without blocking the event loop."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def web_tools(
    *,
    allow_hosts: Iterable[str] = (),
    timeout: float = DEFAULT_FETCH_TIMEOUT,
    max_bytes: int = MAX_BODY_BYTES,
    resolver: Resolver | None = None,
) -> list[Tool]:
    """``web_fetch``.

    Args:
        allow_hosts: hosts (``"localhost"``, ``"10.0.0.5"``) or ``host:port`` pairs that may
            be reached even though they are not public internet addresses.
        timeout: seconds a whole fetch may take.
        max_bytes: the largest body accepted.
        resolver: an async ``(host, port) -> addresses`` function; the system resolver by
            default.
    """
    hosts = as_list(allow_hosts, "allow_hosts", "hosts")
    allow = frozenset(h.strip().lower() for h in hosts if h.strip())
    resolve = resolver or system_resolver

    @tool(
        name="web_fetch",
        untrusted=True,
        traits=ToolTraits(read_only=True, external=True, network=True),
    )
    async def web_fetch(url: str, start_line: int = 0, end_line: int = 0) -> str:
        """Fetch a web page (http or https) and return it as markdown, by line range.

        Only public internet hosts are reachable. The header shows which lines of how
        many were returned; read further with start_line.

        Args:
            url: the address, starting with http:// or https://.
            start_line: first line to return, 1-based (default 1).
            end_line: last line to return, inclusive (default: the end).
        """
        url = url.strip()
        if not url:
            raise ToolError("url parameter is required")
        try:
            parts = urlsplit(url)
            host = parts.hostname
        except ValueError as exc:
            raise ToolError(f"invalid URL {url!r}: {exc}") from None
        if parts.scheme.lower() not in ("http", "https"):
            raise ToolError("only http and https URLs are supported")
        if not host:
            raise ToolError(f"invalid URL {url!r}: it names no host")
        check_line_range(start_line, end_line)
        from sp4rk.tools.builtins._netguard import fetch  # httpx loads on first use

        try:
            async with asyncio.timeout(timeout):
                page = await fetch(
                    url,
                    allow_hosts=allow,
                    resolver=resolve,
                    check=is_public_address,
                    max_bytes=max_bytes,
                    max_redirects=MAX_REDIRECTS,
                )
        except TimeoutError:
            raise ToolError(
                f"failed to fetch URL: no complete response within {timeout:g}s"
            ) from None
        # Converting a large page takes seconds of CPU: never on the event loop.
        try:
            async with asyncio.timeout(CONVERT_TIMEOUT):
                text = await asyncio.to_thread(_to_text, page.body, page.content_type, page.charset)
        except TimeoutError:
            raise ToolError(
                f"fetched {page.url}, but converting it to text took longer than "
                f"{CONVERT_TIMEOUT:g}s; look for a smaller page or a raw/text version"
            ) from None
        return _ranged(text, page.url, start_line, end_line)

    return [web_fetch]


def _to_text(body: bytes, content_type: str, charset: str | None) -> str:
    if content_type in _HTML_TYPES or (not content_type and _looks_like_html(body)):
        if len(body) <= MAX_HTML_BYTES:
            return html_to_markdown(body, charset)
        cut = body.rfind(b"<", 0, MAX_HTML_BYTES)  # at a tag, never inside a character
        markdown = html_to_markdown(body[: cut if cut > 0 else MAX_HTML_BYTES], charset)
        return (
            f"{markdown}\n\n[Only the first {MAX_HTML_BYTES} of the page's {len(body)} bytes "
            "of HTML were converted]"
        )
    is_text = content_type.startswith(_TEXT_TYPES) or content_type.endswith(("+json", "+xml"))
    if is_text or (not content_type and b"\x00" not in body[:8192]):
        try:
            return body.decode(charset or "utf-8", "replace")
        except LookupError:  # an unknown charset name
            return body.decode("utf-8", "replace")
    raise ToolError(
        f"failed to fetch URL: unsupported content type {content_type!r}; web_fetch returns "
        "HTML and text only"
    )


def _looks_like_html(body: bytes) -> bool:
    head = body[:1024].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html"))


def html_to_markdown(html: bytes | str, charset: str | None = None) -> str:
    """Readable markdown from an HTML page: scripts, styles and page chrome removed.

    The page's ``<main>`` or ``<article>`` is used when it holds most of the text.

    Raises:
        ToolError: when the HTML is nested too deeply to convert.
    """
    from bs4 import BeautifulSoup  # loaded on first use
    from markdownify import MarkdownConverter

    encoding = charset if isinstance(html, bytes) else None
    soup = BeautifulSoup(html, "html.parser", from_encoding=encoding)
    title = soup.title.get_text(strip=True) if soup.title else ""
    for tag in soup(_DROP_TAGS):
        tag.decompose()
    root: Any = soup.body or soup
    for name in ("main", "article"):
        candidate = soup.find(name)
        if candidate is not None and len(candidate.get_text(strip=True)) > 200:
            root = candidate
            break
    try:
        markdown = MarkdownConverter(heading_style="ATX", strip=["img"]).convert_soup(root)
    except RecursionError:
        raise ToolError(
            "the page's HTML is nested too deeply to convert to text; look for a simpler "
            "version of the page"
        ) from None
    markdown = re.sub(r"\n{3,}", "\n\n", markdown).strip()
    if title and title not in markdown[:500]:
        markdown = f"# {title}\n\n{markdown}"
    return markdown


def _ranged(text: str, url: str, start_line: int, end_line: int) -> str:
    lines = text.split("\n")
    total = len(lines)
    start = min(start_line if start_line > 0 else 1, total)
    end = min(end_line if end_line > 0 else total, total)
    content = "\n".join(lines[start - 1 : end])
    size = len(content.encode("utf-8"))
    out = f"[URL: {url} | Lines {start}-{end} of {total} | {size} bytes]\n{content}"
    if end < total:
        out += f"\n[Use start_line={end + 1} to continue reading]"
    return out
