"""Parity: the live scheduler and the simulator make the same decisions.

One trace is replayed by the simulator's engine and, slot by slot, fed to a real
:class:`~scrapy_echo.scheduler.EchoScheduler` (a test crawler with a clock of its own, no
network): each request it hands out is answered with what the trace's web shows at that
moment, through the same events the middlewares send. Both drive one
:class:`~scrapy_echo.core.crawl.CrawlCore`, so they must fetch the same things in the same
order; a difference means a driver does bookkeeping of its own.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import scrapy
from scrapy.utils.test import get_crawler

from scrapy_echo.core.events import PageFetched, SourceFetched
from scrapy_echo.crawler.runtime import EchoRuntime
from scrapy_echo.crawler.scheduler import EchoScheduler
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import ClickLog, SimSettings, TraceWeb, simulate
from scrapy_echo.sim.synth import SynthParams, synthesize
from scrapy_echo.sim.trace import Trace

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


def live_decisions(trace: Trace, policy: str, **settings: Any) -> list[tuple[float, str, str]]:
    """The trace replayed through a real EchoScheduler, as the simulator's loop does."""
    web = TraceWeb(trace)
    crawler = get_crawler(
        Spider,
        {
            "ADDONS": {"scrapy_echo.Addon": 0},
            "ECHO_SOURCES": web.source_urls,
            "ECHO_CRAWL_RATE": RATE,
            "ECHO_POLICY": policy,
            # No downloader runs here, so no download slot is ever busy; the masking of busy
            # slots is the core's and has tests of its own.
            "ECHO_POLITENESS": False,
            **settings,
        },
    )
    crawler.spider = crawler._create_spider()
    clock = Clock()
    runtime = EchoRuntime.of(crawler)
    runtime.clock = clock
    scheduler = EchoScheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)  # (its first re-solve, at 0, as the simulator's)
    config = runtime.config
    clicks = ClickLog(trace)
    decisions: list[tuple[float, str, str]] = []
    next_resolve, next_push = config.resolve_interval, config.click_push_period
    try:
        for k in range(math.floor(trace.duration * RATE)):
            clock.now = now = k / RATE
            if now >= next_push:
                pages, ts, counts = clicks.until(next_push)
                rows = [
                    {"url": web.page_urls[p], "ts": t, "clicks": c}
                    for p, t, c in zip(pages, ts, counts, strict=True)
                ]
                assert runtime.click_intake.push(rows) == len(rows)
                next_push += config.click_push_period
            if now >= next_resolve:
                runtime.replan()
                next_resolve += config.resolve_interval
            request = scheduler.next_request()
            if request is None:
                continue
            echo = request.meta["echo"]
            kind = echo["kind"]
            if kind == "source":
                decisions.append((now, kind, request.url))
                source = echo["source"]
                previous = runtime.state.sources[source].last_fetched
                shown = web.shown(source, previous, now)
                runtime.observe(SourceFetched(request.url, now, shown))  # (queues its pages)
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
