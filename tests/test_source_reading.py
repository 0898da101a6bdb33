"""A big source response is read on a thread while the reactor turns, and yields what it would
read inline: the same new pages, in the same order (the spider middlewares' asynchronous
chain, as Scrapy runs it, on the reactor)."""

from __future__ import annotations

import gzip
import itertools
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest_twisted
from scrapy.http import Response, XmlResponse
from twisted.internet import reactor
from twisted.internet.task import LoopingCall

from scrapy_echo.crawler import source_reading
from tests.test_middlewares import SpiderMiddlewares, setup, source_request

URL = "http://news.test/sitemap.xml"
NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def sitemap(count: int) -> bytes:
    rows = "".join(
        f"<url><loc>http://news.test/2026/11/{i:06d}/a-story-with-a-slug</loc>"
        f"<lastmod>2026-11-20T12:{i % 60:02d}:00+00:00</lastmod></url>\n"
        for i in range(count)
    )
    return f'<?xml version="1.0"?><urlset xmlns="{NS}">{rows}</urlset>'.encode()


async def nothing() -> AsyncIterator[Any]:
    return
    yield


async def through_the_chain(mw: SpiderMiddlewares, response: Response) -> list[str]:
    """``response``'s trip through ECHO's spider middlewares as Scrapy makes it; the URLs of
    the new pages it revealed."""
    mw.found = []
    inner = mw.inner.process_spider_output_async(response, nothing())
    assert [item async for item in mw.outer.process_spider_output_async(response, inner)] == []
    return [request.url for request in mw.found]


def read_inline(body: bytes, **settings: Any) -> list[str]:
    crawler, runtime, _ = setup(**settings)
    request = source_request(runtime.state.add_source(URL), URL)
    return [
        r.url
        for r in SpiderMiddlewares(crawler).handle_response(
            Response(URL, body=body, request=request)
        )
    ]


class ReadThreads:
    """The threads sources are read on, and when each read began and ended."""

    def __init__(self, monkeypatch: Any) -> None:
        self.on_main: list[bool] = []
        self.spans: list[tuple[float, float]] = []
        read_source = source_reading.read_source

        def spied(*args: Any, **kwargs: Any) -> Any:
            self.on_main.append(threading.current_thread() is threading.main_thread())
            began = time.monotonic()
            try:
                return read_source(*args, **kwargs)
            finally:
                self.spans.append((began, time.monotonic()))

        monkeypatch.setattr(source_reading, "read_source", spied)


@pytest_twisted.ensureDeferred
async def test_a_big_sitemap_is_read_on_a_thread_the_reactor_turning_meanwhile(
    monkeypatch,
) -> None:
    body = sitemap(40_000)  # 4.7 MB, the better part of a second's read
    expected = read_inline(body)
    assert len(expected) == 2000  # (ECHO_MAX_LINKS_PER_SOURCE: the first 2000 it lists)
    threads = ReadThreads(monkeypatch)
    crawler, runtime, _ = setup()
    mw = SpiderMiddlewares(crawler)
    request = source_request(runtime.state.add_source(URL), URL)
    ticks: list[float] = []
    ticking = LoopingCall(lambda: ticks.append(time.monotonic()))
    ticking.clock = reactor
    ticking.start(0.01)
    try:
        found = await through_the_chain(mw, XmlResponse(URL, body=body, request=request))
    finally:
        ticking.stop()
    assert found == expected  # the same pages, in the same order
    assert threads.on_main == [False]
    assert crawler.stats.get_value("echo/sources/read_on_thread") == 1
    assert crawler.stats.get_value("echo/sources/kind/sitemap") == 1
    # Inline, the reactor would not turn while the read lasts: one gap as long as it. On a
    # thread, the longest is a collection of Python's cyclic garbage collector (about 0.1 s
    # here), which holds every thread, inline or not.
    ((began, ended),) = threads.spans
    turns = [began, *(t for t in ticks if began < t < ended), ended]
    longest = max(b - a for a, b in itertools.pairwise(turns))
    assert ended - began > 0.2  # (a read worth moving)
    assert longest < (ended - began) / 3, (longest, ended - began)


@pytest_twisted.ensureDeferred
async def test_a_small_source_is_read_inline_and_a_gzip_one_on_a_thread(monkeypatch) -> None:
    threads = ReadThreads(monkeypatch)
    crawler, runtime, _ = setup()
    mw = SpiderMiddlewares(crawler)
    source = runtime.state.add_source(URL)
    small, packed = sitemap(10), gzip.compress(sitemap(2000))  # (a few kB that unpack to 250)
    assert len(small) < source_reading.THREAD_BYTES and len(packed) < source_reading.THREAD_BYTES
    found = await through_the_chain(
        mw, XmlResponse(URL, body=small, request=source_request(source, URL))
    )
    assert len(found) == 10 and threads.on_main == [True]
    request = source_request(source, URL)
    found = await through_the_chain(mw, Response(URL, body=packed, request=request))
    assert len(found) == 2000 - 10 and threads.on_main == [True, False]  # (10 seen before)
    assert crawler.stats.get_value("echo/sources/read_on_thread") == 1
