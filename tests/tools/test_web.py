"""web_fetch: markdown output, caps, and connect-time refusal of non-public addresses.

Every server here listens on 127.0.0.1 and counts its connections, so a refused fetch can
be shown to have opened none.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from sp4rk.tools import Tool
from sp4rk.tools.builtins import html_to_markdown, is_public_address, web_tools
from sp4rk.tools.builtins import web as web_module
from tests.tools.builtin_helpers import PAGE, LocalServer, Route, call, serve


@pytest.fixture
async def server() -> AsyncIterator[LocalServer]:
    async with serve() as s:
        yield s


@pytest.fixture
async def other() -> AsyncIterator[LocalServer]:
    async with serve() as s:
        yield s


def fetcher(allow: Sequence[str] = (), **options: Any) -> Tool:
    return web_tools(allow_hosts=allow, **options)[0]


def resolver_for(table: dict[str, list[str]]) -> Callable[[str, int], Any]:
    async def resolve(host: str, port: int) -> list[str]:
        return table[host]

    return resolve


# --- refused connections -------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "127.1.2.3"])
async def test_loopback_is_refused_without_a_connection(server: LocalServer, host: str) -> None:
    result = await call(fetcher(), url=f"http://{host}:{server.port}/page")
    assert result.is_error
    assert "refused to connect" in result.content
    assert "not a public internet address" in result.content
    assert server.connections == 0


async def test_a_redirect_to_a_private_address_is_refused(
    server: LocalServer, other: LocalServer
) -> None:
    server.routes["/go"] = (302, {"Location": f"{other.url}/page"}, b"")
    other.routes["/page"] = (200, {"Content-Type": "text/plain"}, b"internal secrets")
    result = await call(fetcher([server.host]), url=f"{server.url}/go")
    assert result.is_error
    assert "refused to connect" in result.content
    assert server.connections == 1
    assert other.connections == 0


@pytest.mark.parametrize(
    ("name", "addresses"),
    [
        ("rebind.example", ["127.0.0.1"]),
        ("mixed.example", ["10.0.0.7", "127.0.0.1"]),
        ("metadata.google.internal", ["169.254.169.254"]),
        ("v6.example", ["::1", "::ffff:127.0.0.1"]),
    ],
)
async def test_names_resolving_to_private_addresses_are_refused_at_connect_time(
    server: LocalServer, name: str, addresses: list[str]
) -> None:
    tool = fetcher(resolver=resolver_for({name: addresses}))
    result = await call(tool, url=f"http://{name}:{server.port}/page")
    assert result.is_error
    assert f"refused to connect to {name} ({', '.join(addresses)})" in result.content
    assert server.connections == 0


async def test_environment_proxies_are_ignored(
    server: LocalServer, other: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.routes["/t"] = (200, {"Content-Type": "text/plain"}, b"direct")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, other.url)
    result = await call(fetcher([server.host]), url=f"{server.url}/t")
    assert result.content.endswith("\ndirect")
    assert other.connections == 0


# --- allowed fetches -----------------------------------------------------------------------


async def test_html_becomes_markdown(server: LocalServer) -> None:
    server.routes["/page"] = (200, {"Content-Type": "text/html; charset=utf-8"}, PAGE)
    result = await call(fetcher([server.host]), url=f"{server.url}/page")
    assert not result.is_error, result.content
    header, _, body = result.content.partition("\n")
    assert header.startswith(f"[URL: {server.url}/page | Lines 1-")
    assert "# Getting started" in body
    assert "`pip install sp4rk`" in body
    assert "* one" in body or "- one" in body
    assert "[Next page](/next)" in body
    for dropped in ("alert(", "color: red", "Home | About", "Copyright"):
        assert dropped not in body


async def test_text_by_line_range(server: LocalServer) -> None:
    text = "".join(f"line {i}\n" for i in range(1, 11)).encode()
    server.routes["/t"] = (200, {"Content-Type": "text/plain"}, text)
    result = await call(fetcher([server.host]), url=f"{server.url}/t", start_line=3, end_line=4)
    assert result.content == (
        f"[URL: {server.url}/t | Lines 3-4 of 11 | 13 bytes]\nline 3\nline 4\n"
        "[Use start_line=5 to continue reading]"
    )


@pytest.mark.parametrize(
    ("route", "options", "message"),
    [
        ((404, {}, b"no"), {}, "failed to fetch URL: HTTP 404: Not Found"),
        ((200, {"Content-Type": "image/png"}, b"\x89PNG"), {}, "unsupported content type"),
        ((200, {"Content-Type": "text/plain"}, b"x" * 5000), {"max_bytes": 1000},
         "larger than 1000 bytes"),
        ((200, {"Content-Type": "text/plain", "X-No-Length": "1"}, b"x" * 5000),
         {"max_bytes": 1000}, "larger than 1000 bytes"),
        (None, {"timeout": 0.5}, "no complete response within 0.5s"),
    ],
)  # fmt: skip
async def test_fetch_failures_and_caps(
    server: LocalServer, route: Route | None, options: dict[str, Any], message: str
) -> None:
    server.routes["/r"] = route
    result = await call(fetcher([server.host], **options), url=f"{server.url}/r")
    assert result.is_error
    assert message in result.content


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "url parameter is required"),
        ("ftp://example.com/x", "only http and https URLs are supported"),
        ("file:///etc/passwd", "only http and https URLs are supported"),
        ("http:///nohost", "names no host"),
        ("http://0177.0.0.1/", "invalid URL: Invalid IPv4 address: '0177.0.0.1'"),
    ],
)
async def test_url_validation(url: str, message: str) -> None:
    result = await call(fetcher(), url=url)
    assert result.is_error
    assert message in result.content


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True), ("2606:4700::1111", True), ("127.0.0.1", False),
        ("10.1.2.3", False), ("172.16.0.1", False), ("192.168.1.1", False),
        ("169.254.169.254", False), ("100.64.0.1", False), ("0.0.0.0", False),
        ("224.0.0.1", False), ("240.0.0.1", False), ("198.18.0.1", False), ("::1", False),
        ("fd00:ec2::254", False), ("fe80::1%eth0", False), ("::ffff:10.0.0.1", False),
        ("64:ff9b::7f00:1", False), ("2002:7f00:1::", False), ("not-an-ip", False),
        ("::7f00:1", False), ("::127.0.0.1", False), ("::a00:1", False), ("::8.8.8.8", False),
        ("fec0::1", False), ("64:ff9b:1::a00:1", False), ("64:ff9b:1::808:808", False),
        ("64:ff9b::808:808", True), ("::ffff:8.8.8.8", True),
    ],
)  # fmt: skip
def test_public_address_rules(address: str, public: bool) -> None:
    assert is_public_address(address) is public


async def test_html_is_converted_off_the_event_loop(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.routes["/page"] = (200, {"Content-Type": "text/html"}, PAGE)
    loop = asyncio.get_running_loop()
    loop_ran = threading.Event()

    def convert_while_the_loop_runs(html: bytes, charset: str | None = None) -> str:
        loop.call_soon_threadsafe(loop_ran.set)  # runs only if the loop is not blocked
        assert loop_ran.wait(10), "the event loop was blocked while converting"
        return "converted"

    monkeypatch.setattr(web_module, "html_to_markdown", convert_while_the_loop_runs)
    result = await call(fetcher([server.host]), url=f"{server.url}/page")
    assert result.content.endswith("\nconverted")


async def test_a_conversion_that_takes_too_long_is_an_error(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.routes["/page"] = (200, {"Content-Type": "text/html"}, PAGE)
    release = threading.Event()
    monkeypatch.setattr(web_module, "CONVERT_TIMEOUT", 0.2)
    monkeypatch.setattr(web_module, "html_to_markdown", lambda html, charset=None: release.wait(10))
    try:
        result = await call(fetcher([server.host]), url=f"{server.url}/page")
    finally:
        release.set()
    assert result.is_error
    assert "converting it to text took longer than 0.2s" in result.content


async def test_only_the_first_part_of_huge_html_is_converted(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(web_module, "MAX_HTML_BYTES", 5000)
    seen: list[int] = []
    real = web_module.html_to_markdown

    def measuring(html: bytes, charset: str | None = None) -> str:
        seen.append(len(html))
        return real(html, charset)

    monkeypatch.setattr(web_module, "html_to_markdown", measuring)
    body = b"<html><body>" + b"<p>paragraph text</p>\n" * 2000 + b"</body></html>"
    server.routes["/big"] = (200, {"Content-Type": "text/html"}, body)
    result = await call(fetcher([server.host]), url=f"{server.url}/big")
    assert not result.is_error, result.content
    assert seen and seen[0] <= 5000
    assert f"[Only the first 5000 of the page's {len(body)} bytes of HTML were converted]" in (
        result.content
    )


async def test_deeply_nested_html_is_a_clear_error(server: LocalServer) -> None:
    deep = b"<html><body>" + b"<div>" * 5000 + b"x" + b"</div>" * 5000 + b"</body></html>"
    server.routes["/deep"] = (200, {"Content-Type": "text/html"}, deep)
    result = await call(fetcher([server.host]), url=f"{server.url}/deep")
    assert result.is_error
    assert result.content.startswith("the page's HTML is nested too deeply to convert")


def test_html_to_markdown_prefers_the_main_content() -> None:
    markdown = html_to_markdown(PAGE, "utf-8")
    assert markdown.startswith("# Sp4rk Docs\n\n# Getting started")
