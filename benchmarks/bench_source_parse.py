"""How long one big source response holds the reactor in the spider middleware.

A 50,000-URL sitemap (the sitemap protocol's most), the same gzipped, and a 10,000-item RSS
feed each pass ECHO's spider middlewares as Scrapy passes them, on a running reactor, with a
timer ticking every millisecond:

- inline: the response read on the reactor (``handle_response``, as before sources were read
  on a thread), its whole time a stall;
- threaded: Scrapy's asynchronous chain (``process_spider_output_async``), a big body read on
  a thread; the longest the timer waited is the stall.

Prints, per source, the median time of the read alone, the median stall inline and threaded,
and their ratio. What still holds the reactor when threaded is the work per link after the
read (a request per link for Scrapy's spider middlewares, ``ECHO_MAX_LINKS_PER_SOURCE`` of
them at most) and the collections of Python's cyclic garbage collector, which hold every
thread.

Run: python benchmarks/bench_source_parse.py [--urls 50000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import gzip
import itertools
import statistics
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import scrapy
from scrapy import Request
from scrapy.http import Response, XmlResponse
from scrapy.utils.test import get_crawler
from twisted.internet import defer, task

from scrapy_echo.crawler.link_collector import EchoLinkCollector
from scrapy_echo.crawler.runtime import EchoRuntime
from scrapy_echo.crawler.source_reading import read
from scrapy_echo.crawler.spidermw import EchoSpiderMiddleware

HOST = "https://www.example.com"


class Spider(scrapy.Spider):
    name = "bench"

    def parse(self, response: Any) -> Any:
        return []


def sitemap(urls: int) -> bytes:
    rows = "".join(
        f"<url><loc>{HOST}/news/2026/11/{i:06d}/a-story-with-a-slug</loc>"
        f"<lastmod>2026-11-20T12:{i % 60:02d}:00+00:00</lastmod></url>\n"
        for i in range(urls)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n{rows}</urlset>'
    ).encode()


def rss(items: int) -> bytes:
    rows = "".join(
        f"<item><title>Story {i}</title><link>{HOST}/news/{i:06d}/slug</link>"
        f"<pubDate>Fri, 20 Nov 2026 12:{i % 60:02d}:00 +0000</pubDate>"
        f"<description>What story {i} is about.</description></item>\n"
        for i in range(items)
    )
    channel = f"<channel><title>t</title>{rows}</channel>"
    return f'<?xml version="1.0"?><rss version="2.0">{channel}</rss>'.encode()


class Pair:
    """ECHO's two spider middlewares of a fresh crawler, and a source request for ``url``."""

    def __init__(self, url: str) -> None:
        crawler = get_crawler(Spider, {"ADDONS": {"scrapy_echo.Addon": 0}})
        crawler.spider = crawler._create_spider()
        runtime = EchoRuntime.of(crawler)
        self.inner = EchoSpiderMiddleware.from_crawler(crawler)
        self.outer = EchoLinkCollector.from_crawler(crawler)
        source = runtime.state.add_source(url)
        self.request = Request(url, meta={"echo": {"kind": "source", "source": source}})


async def nothing() -> AsyncIterator[Any]:
    return
    yield


async def threaded_stall(make: Callable[[Request], Response]) -> float:
    """The longest the reactor waited while a response went through Scrapy's chain."""
    pair = Pair(make(Request(HOST)).url)
    response = make(pair.request)
    ticks: list[float] = []
    timer = task.LoopingCall(lambda: ticks.append(time.perf_counter()))
    gc.collect()
    timer.start(0.001)
    try:
        inner = pair.inner.process_spider_output_async(response, nothing())
        async for _ in pair.outer.process_spider_output_async(response, inner):
            pass
        ticks.append(time.perf_counter())
    finally:
        timer.stop()
    return max(b - a for a, b in itertools.pairwise(ticks))


def inline_stall(make: Callable[[Request], Response]) -> float:
    pair = Pair(make(Request(HOST)).url)
    response = make(pair.request)
    gc.collect()
    started = time.perf_counter()
    for _ in pair.outer.process_spider_output(
        response, pair.inner.process_spider_output(response, [])
    ):
        pass
    return time.perf_counter() - started


def read_alone(make: Callable[[Request], Response]) -> float:
    pair = Pair(make(Request(HOST)).url)
    response = make(pair.request)
    rules = pair.inner._read_rules()
    gc.collect()
    started = time.perf_counter()
    read(response, rules)
    return time.perf_counter() - started


async def main(_: Any, urls: int, repeat: int) -> None:
    body = sitemap(urls)
    packed = gzip.compress(body)
    feed = rss(urls // 5)
    sources: list[tuple[str, Callable[[Request], Response]]] = [
        (
            f"sitemap, {urls:,} URLs ({len(body) / 1e6:.1f} MB)",
            lambda r: XmlResponse(f"{HOST}/sitemap.xml", body=body, request=r),
        ),
        (
            f"the same gzipped ({len(packed) / 1e6:.2f} MB)",
            lambda r: Response(f"{HOST}/sitemap.xml.gz", body=packed, request=r),
        ),
        (
            f"RSS feed, {urls // 5:,} items ({len(feed) / 1e6:.1f} MB)",
            lambda r: XmlResponse(f"{HOST}/feed.xml", body=feed, request=r),
        ),
    ]
    for name, make in sources:
        alone = statistics.median(read_alone(make) for _ in range(repeat))
        inline = statistics.median(inline_stall(make) for _ in range(repeat))
        stalls = [await threaded_stall(make) for _ in range(repeat)]
        threaded = statistics.median(stalls)
        print(
            f"{name}: read {alone * 1000:.0f} ms; reactor stall inline {inline * 1000:.0f} ms, "
            f"threaded {threaded * 1000:.0f} ms ({threaded / inline:.2f}x)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    task.react(lambda reactor: defer.ensureDeferred(main(reactor, args.urls, args.repeat)))
