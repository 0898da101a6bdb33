"""Parity: the live scheduler and the simulator make the same decisions.

One trace is replayed by the simulator's engine and, slot by slot, fed to a real
:class:`~scrapy_echo.scheduler.EchoScheduler` (a test crawler with a clock of its own, no
network): each request it hands out is answered with what the trace's web shows at that
moment, through the same events the middlewares send. Both drive one
:class:`~scrapy_echo.core.crawl.CrawlCore`, so they must fetch the same things in the same
order; a difference means a driver does bookkeeping of its own.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import scrapy
from scrapy import signals
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from scrapy_echo.core.events import PageFetched, SourceFailed, SourceFetched
from scrapy_echo.crawler.runtime import EchoRuntime
from scrapy_echo.crawler.scheduler import EchoScheduler
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import ClickLog, SimSettings, TraceWeb, simulate
from scrapy_echo.sim.synth import SynthParams, synthesize
from scrapy_echo.sim.trace import Trace
from scrapy_echo.sim.web_hosts import WebHosts, host_of

RATE = 0.05  # slots 20 s apart: the scheduler's budget lets one request out per slot


class Spider(scrapy.Spider):
    name = "parity"

    def parse(self, response: Any) -> Any:
        return []


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def trace() -> Trace:
    # Updates make the refresh lane (on by default, as in a crawl) find changes too.
    return synthesize(SynthParams(sources=40, days=1.5, warmup_days=0.5, seed=3))


class SlotInputs:
    """What each slot brings a live driver before its choice, as the simulator's loop does:
    the clicks pushed up to then, then a re-solve when one is due."""

    def __init__(self, trace: Trace, web: TraceWeb, runtime: EchoRuntime) -> None:
        self.clicks, self.web, self.runtime = ClickLog(trace), web, runtime
        config = runtime.config
        self.next_resolve, self.next_push = config.resolve_interval, config.click_push_period

    def tick(self, now: float) -> None:
        config, runtime = self.runtime.config, self.runtime
        if now >= self.next_push:
            pages, ts, counts = self.clicks.until(self.next_push)
            rows = [
                {"url": self.web.page_urls[p], "ts": t, "clicks": c}
                for p, t, c in zip(pages, ts, counts, strict=True)
            ]
            assert runtime.click_intake.push(rows) == len(rows)
            self.next_push += config.click_push_period
        if now >= self.next_resolve:
            runtime.replan()
            self.next_resolve += config.resolve_interval


def live_decisions(trace: Trace, policy: str, **settings: Any) -> list[tuple[float, str, str]]:
    """The trace replayed through a real EchoScheduler, as the simulator's loop does. With
    the trace's hosts (``hosts.csv``), politeness is on: each host's delay is its download
    slot's (``DOWNLOAD_SLOTS``), the scheduler's politeness reads the test's clock, and a
    hub's next pages are asked for as the spider middleware asks (the core's rule), and
    come back through the scheduler's follow-ups."""
    web = TraceWeb(trace)
    hosts = trace.hosts
    # The replay's host names, by the trace's (TraceWeb numbers them as first seen).
    renamed = {
        host_of(a): host_of(b) for a, b in zip(trace.source_urls, web.source_urls, strict=True)
    }
    slots = {renamed[h]: {"delay": d} for h, d in (hosts.delay.items() if hosts else ())}
    crawler = get_crawler(
        Spider,
        {
            "ADDONS": {"scrapy_echo.Addon": 0},
            "ECHO_SOURCES": web.source_urls,
            "ECHO_CRAWL_RATE": RATE,
            "ECHO_POLICY": policy,
            # No downloader runs here: without hosts no download slot is ever busy, and the
            # masking of busy slots is tested apart; with them, the delays make them busy.
            "ECHO_POLITENESS": hosts is not None,
            "DOWNLOAD_SLOTS": slots,
            **settings,
        },
    )
    crawler.spider = crawler._create_spider()
    clock = Clock()
    runtime = EchoRuntime.of(crawler)
    runtime.clock = clock
    scheduler = EchoScheduler.from_crawler(crawler)
    scheduler.politeness.clock = clock
    scheduler.open(crawler.spider)  # (its first re-solve, at 0, as the simulator's)
    page_size = {renamed[h]: n for h, n in (hosts.page_size.items() if hosts else ())}
    # Per source whose crawl reads on, the crawl before it (the window its pages list).
    before: dict[int, float] = {}
    slots = SlotInputs(trace, web, runtime)
    decisions: list[tuple[float, str, str]] = []
    try:
        for k in range(math.floor(trace.duration * RATE)):
            clock.now = now = k / RATE
            slots.tick(now)
            request = scheduler.next_request()
            if request is None:
                continue
            echo = request.meta["echo"]
            kind = echo["kind"]
            refused = _refusal(hosts, renamed, request.url, now)
            if refused is not None:  # the host is down: 503, and when it will be back
                page = echo.get("hub_page", 1)
                url = echo.get("url", request.url)
                decisions.append((now, "next-page" if page > 1 else kind, url))
                headers = {"Retry-After": str(int(refused))}
                response = Response(request.url, status=503, headers=headers, request=request)
                crawler.signals.send_catch_log(
                    signals.response_downloaded, response=response, request=request
                )
                if kind == "source" and page == 1:  # (as the downloader middleware records it)
                    runtime.observe(SourceFailed(url, now, "HTTP 503", refused))
                continue
            if kind == "source":
                source = echo["source"]
                page = echo.get("hub_page", 1)
                decisions.append((now, "next-page" if page > 1 else kind, echo["url"]))
                if page == 1:
                    before[source] = runtime.state.sources[source].last_fetched
                size = page_size.get(host_of(echo["url"]), 0)
                shown = web.shown(
                    source,
                    before[source],
                    now,
                    page=page,
                    size=size,
                    newest_first=hosts is not None,
                )
                more = _reads_on(runtime, source, page, shown) if size else None
                if more is not None:
                    shown = more[0]
                runtime.observe(SourceFetched(echo["url"], now, shown, continued=page > 1))
                if more is not None and more[1]:  # (as the spider middleware's output would)
                    meta = {**echo, "hub_page": page + 1}
                    scheduler.enqueue_request(
                        request.replace(url=f"{echo['url']}?page={page + 1}", meta={"echo": meta})
                    )
                continue
            page = web.page_ids[request.url]
            decisions.append((now, kind, request.url))
            refreshing = runtime.core.refreshing
            runtime.observe(
                PageFetched(
                    request.url,
                    echo["source_url"],
                    float(echo["appeared"]),
                    now,
                    digest=web.digest(page, now) if refreshing else None,
                    refresh=kind == "refresh",
                )
            )
    finally:
        scheduler.close("finished")
    return decisions


def _refusal(hosts: WebHosts | None, renamed: dict[str, str], url: str, now: float) -> float | None:
    """The Retry-After a host down at ``now`` answers ``url`` with (None: it answers)."""
    for host, (start, end) in hosts.outages.items() if hosts else ():
        if renamed[host] == host_of(url) and start <= now < end:
            return end - now
    return None


def _reads_on(
    runtime: EchoRuntime, source: int, page: int, shown: tuple[tuple[str, float | None], ...]
) -> tuple[tuple[tuple[str, float | None], ...], bool]:
    """What the spider middleware makes of a hub page: its links up to one the hub showed
    before this crawl, and whether the crawl reads the next page (the core's rule)."""
    urls = [url for url, _ in shown]
    known = runtime.state.links_seen(urls)
    boundary = runtime.core.next_page_boundary(source, page, urls, known)
    if boundary is not None:
        shown, urls, known = shown[: boundary + 1], urls[: boundary + 1], known[: boundary + 1]
    if not shown:
        return shown, False
    most = runtime.config.max_next_pages
    return shown, runtime.core.reads_on(source, page, urls, known, boundary, most=most) == "next"


@pytest.mark.parametrize("policy", ["echo-newpages", "echo-paper"])
def test_the_live_scheduler_decides_as_the_simulator(trace: Trace, policy: str) -> None:
    replayed: list[tuple[float, str, str]] = []
    replay = simulate(trace, make_policy(policy), SimSettings(crawl_rate=RATE), decisions=replayed)
    live = live_decisions(trace, policy)
    kinds = {kind for _, kind, _ in replayed}
    # A replay that exercised every lane, with pages found and fetched.
    assert {"source", "page"} <= kinds
    assert replay.page_crawls > 50
    if policy == "echo-newpages":
        assert "refresh" in kinds
    first_difference = next(
        (i for i, (a, b) in enumerate(zip(live, replayed, strict=False)) if a != b), None
    )
    assert first_difference is None, (live[first_difference], replayed[first_difference])
    assert len(live) == len(replayed)


@pytest.fixture(scope="module")
def hosts_trace(trace: Trace) -> Trace:
    """The same trace on hosts that make the scheduler wait: two slower than the slots
    (20 s apart), one of them and a third with hubs of a few links a page, and two that go
    down for a while (503 with the Retry-After that ends it, on the slots' grid)."""
    names = sorted({host_of(url) for url in trace.source_urls})
    hosts = WebHosts(
        delay={names[0]: 50.0, names[1]: 30.0},
        page_size={names[0]: 3, names[2]: 2},
        outages={names[1]: (20_000.0, 24_000.0), names[3]: (30_000.0, 60_000.0)},
    )
    return dataclasses.replace(trace, hosts=hosts)


@pytest.mark.parametrize("policy", ["echo-newpages", "echo-paper", "bfs"])
def test_with_politeness_and_next_pages_the_live_scheduler_decides_as_the_simulator(
    hosts_trace: Trace, policy: str
) -> None:
    replayed: list[tuple[float, str, str]] = []
    replay = simulate(
        hosts_trace, make_policy(policy), SimSettings(crawl_rate=RATE), decisions=replayed
    )
    live = live_decisions(hosts_trace, policy)
    # Hosts that held choices back, refused, and hubs read past their first page.
    assert replay.next_pages > 0 and replay.refused > 0
    assert "next-page" in {kind for _, kind, _ in replayed}
    delays = hosts_trace.hosts.delay if hosts_trace.hosts else {}
    assert delays and replay.page_crawls > 50
    first_difference = next(
        (i for i, (a, b) in enumerate(zip(live, replayed, strict=False)) if a != b), None
    )
    assert first_difference is None, (live[first_difference], replayed[first_difference])
    assert len(live) == len(replayed)
