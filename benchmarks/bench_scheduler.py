"""Scheduler overhead: ECHO's scheduler against Scrapy's default one, on the same pages.

Prints, for 100,000 new pages spread over 1,000 sources (requests for Scrapy's scheduler, pages
as the core queues them for ECHO's), the enqueue+dequeue throughput of each scheduler and their
ratio (the target: ECHO at least half of Scrapy's default), then the spider middlewares' cost
per source response with 300 links (10 of them new each time): ECHO's pair, with Scrapy's
depth, URL length and referer middlewares between them as in a crawl (each new link passes
them as a probe). Medians of several rounds; the machine is noisy.

Run: python benchmarks/bench_scheduler.py [--requests 100000] [--sources 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import scrapy
from scrapy import Request
from scrapy.core.scheduler import Scheduler
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.spidermiddlewares.depth import DepthMiddleware
from scrapy.spidermiddlewares.referer import RefererMiddleware
from scrapy.spidermiddlewares.urllength import UrlLengthMiddleware
from scrapy.utils.test import get_crawler

from scrapy_echo.core.pages import NewPage
from scrapy_echo.crawler.link_collector import EchoLinkCollector
from scrapy_echo.crawler.runtime import EchoRuntime
from scrapy_echo.crawler.scheduler import EchoScheduler
from scrapy_echo.crawler.spidermw import EchoSpiderMiddleware


class BenchSpider(scrapy.Spider):
    name = "bench"

    def parse(self, response: Any) -> Any:
        return []


def page_requests(count: int, sources: int) -> list[Request]:
    requests = []
    for i in range(count):
        meta = {
            "kind": "page",
            "source": i % sources,
            "page": f"http://site{i % 97}.test/{i}",
            "appeared": 1000.0 + i * 1e-3,
            "discovered": 1001.0 + i * 1e-3,
        }
        requests.append(Request(f"http://site{i % 97}.test/{i}", meta={"echo": meta}))
    return requests


def crawler_with_spider(settings: dict[str, Any]) -> Any:
    # No download handlers: nothing is downloaded, and without a reactor some handlers
    # (aiohttp's, when installed) log an error when built.
    settings = {"DOWNLOAD_HANDLERS": {"http": None, "https": None}, **settings}
    crawler = get_crawler(BenchSpider, settings)
    crawler.spider = crawler._create_spider()
    # Scrapy's default priority queue asks the engine's downloader for its slots.
    crawler.engine = crawler._create_engine()
    return crawler


def time_default(requests: list[Request]) -> float:
    crawler = crawler_with_spider({})
    scheduler = Scheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    started = time.perf_counter()
    for request in requests:
        scheduler.enqueue_request(request)
    while scheduler.next_request() is not None:
        pass
    elapsed = time.perf_counter() - started
    scheduler.close("finished")
    return elapsed


def new_pages(requests: list[Request]) -> list[NewPage]:
    """The same pages as the core finds them (the link collector queues these)."""
    return [NewPage.from_meta(r.meta["echo"], r.url) for r in requests]


def time_echo(pages: list[NewPage], sources: int) -> float:
    # (Politeness off: no download finishes here, so every host would stay busy.)
    crawler = crawler_with_spider({"ADDONS": {"scrapy_echo.Addon": 0}, "ECHO_POLITENESS": False})
    runtime = EchoRuntime.of(crawler)
    for i in range(sources):
        runtime.state.add_source(f"http://hub{i}.test/")
    runtime.state.last_crawl[:] = 1000.0  # every source crawled once: pages compete alone
    scheduler = EchoScheduler.from_crawler(crawler)
    runtime.clock = lambda: 1002.0
    scheduler.open(crawler.spider)
    started = time.perf_counter()
    runtime.found(pages)
    served = 0
    while len(scheduler) and scheduler.next_request() is not None:
        served += 1
    elapsed = time.perf_counter() - started
    scheduler.close("finished")
    if served < len(pages):
        print(f"  (ECHO served {served:,} of {len(pages):,}: the rest were not worth a crawl)")
    return elapsed


def time_spider_middleware(rounds: int, links: int = 300, new: int = 10) -> tuple[float, float]:
    """Median seconds per source response: through ECHO's spider middlewares and Scrapy's
    between them (the new pages queued), and Scrapy's ``LinkExtractor`` alone on the same
    response (the baseline it builds on)."""
    extractor = LinkExtractor(unique=True)
    crawler = crawler_with_spider({"ADDONS": {"scrapy_echo.Addon": 0}})
    runtime = EchoRuntime.of(crawler)
    source = runtime.state.add_source("http://hub.test/")
    chain = [  # from the spider out, as Scrapy calls them
        EchoSpiderMiddleware.from_crawler(crawler),
        DepthMiddleware.from_crawler(crawler),
        UrlLengthMiddleware.from_crawler(crawler),
        RefererMiddleware.from_crawler(crawler),
        EchoLinkCollector.from_crawler(crawler),
    ]

    def through_middlewares(response: HtmlResponse) -> None:
        result: Any = []
        for middleware in chain:
            result = middleware.process_spider_output(response, result)
        assert not list(result)  # (the probes never go on)

    times, baseline = [], []
    for k in range(rounds):
        body = "".join(
            f'<a href="/story/{k * new + i}">story</a>' for i in range(links - new)
        ) + "".join(f'<a href="/fresh/{k}/{i}">new</a>' for i in range(new))
        response = HtmlResponse(
            "http://hub.test/",
            body=f"<html><body>{body}</body></html>".encode(),
            encoding="utf-8",
            request=Request(
                "http://hub.test/",
                meta={"echo": {"kind": "source", "source": source, "fetched": 1000.0 + k}},
            ),
        )
        started = time.perf_counter()
        extractor.extract_links(response)
        baseline.append(time.perf_counter() - started)
        started = time.perf_counter()
        through_middlewares(response)
        times.append(time.perf_counter() - started)
    # The first crawl of a source only records its links: leave it out.
    return statistics.median(times[1:]), statistics.median(baseline[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--sources", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ratios, echo_times, default_times = [], [], []
    for _ in range(args.rounds):
        default = time_default(page_requests(args.requests, args.sources))
        echo = time_echo(new_pages(page_requests(args.requests, args.sources)), args.sources)
        default_times.append(default)
        echo_times.append(echo)
        ratios.append(default / echo)
    n = args.requests
    print(
        f"Scrapy default scheduler: {n / statistics.median(default_times):,.0f} requests/s "
        f"enqueued+dequeued (median of {args.rounds})"
    )
    print(
        f"ECHO scheduler ({args.sources:,} sources): {n / statistics.median(echo_times):,.0f} "
        "requests/s"
    )
    print(
        f"throughput ratio ECHO / default: {statistics.median(ratios):.2f} "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f}; target >= 0.5)"
    )
    per_response, extraction = time_spider_middleware(rounds=41)
    print(
        f"spider middlewares, source response with 300 links (10 new): "
        f"{per_response * 1e3:.2f} ms; Scrapy's LinkExtractor alone: {extraction * 1e3:.2f} ms "
        f"(ratio {per_response / extraction:.2f})"
    )


if __name__ == "__main__":
    main()
