"""The ECHO scheduler's lanes and budget, driven directly (no reactor run needed)."""

from __future__ import annotations

from typing import Any

import pytest
import scrapy
from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from scrapy_echo.crawler.runtime import EchoRuntime
from scrapy_echo.crawler.scheduler import EchoScheduler


class Spider(scrapy.Spider):
    name = "unit"

    def parse(self, response: Any) -> Any:
        return []


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_scheduler(*, now: float = 1000.0, **settings: Any) -> tuple[EchoScheduler, Clock]:
    crawler = get_crawler(Spider, {"ADDONS": {"scrapy_echo.Addon": 0}, **settings})
    crawler.spider = crawler._create_spider()
    clock = Clock(now)
    EchoRuntime.of(crawler).clock = clock
    scheduler = EchoScheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    return scheduler, clock


def page(url: str, source: int, appeared: float) -> Request:
    meta = {"kind": "page", "source": source, "page": url, "appeared": appeared,
            "discovered": appeared + 1, "window": (appeared - 1, appeared + 1)}  # fmt: skip
    return Request(url, meta={"echo": meta})


def test_sources_are_crawled_first_and_keep_the_spider_open() -> None:
    scheduler, _ = make_scheduler(ECHO_SOURCES=["http://a.test/", "http://b.test/"])
    assert scheduler.has_pending_requests()
    assert len(scheduler) == 0
    first, second = scheduler.next_request(), scheduler.next_request()
    assert {first.url, second.url} == {"http://a.test/", "http://b.test/"}
    assert first.dont_filter and first.meta["echo"]["kind"] == "source"
    # Both were just dispatched: neither is due, nothing else is waiting.
    assert scheduler.next_request() is None
    assert scheduler.has_pending_requests()  # a monitor does not close on its own
    scheduler.close("finished")


def test_new_page_worth_a_crawl_goes_before_sources() -> None:
    scheduler, clock = make_scheduler(ECHO_SOURCES=["http://a.test/"])
    scheduler.next_request()  # the source's first crawl
    assert scheduler.enqueue_request(page("http://a.test/1", 0, clock.now))
    assert len(scheduler) == 1
    got = scheduler.next_request()
    assert got is not None and got.url == "http://a.test/1"
    assert len(scheduler) == 0
    scheduler.close("finished")


def test_source_requests_carry_the_last_validators() -> None:
    scheduler, clock = make_scheduler(ECHO_SOURCES=["http://a.test/"])
    first = scheduler.next_request()
    assert b"If-None-Match" not in first.headers
    status = scheduler.state.sources[0]
    status.etag, status.last_modified = '"v1"', "Sun, 22 Nov 2026 10:00:00 GMT"
    scheduler.runtime.policy.plan = scheduler.runtime.policy.plan.padded(1)
    clock.now += 10_000.0  # long past any interval
    again = scheduler.next_request()
    assert again.headers[b"If-None-Match"] == b'"v1"'
    assert again.headers[b"If-Modified-Since"] == b"Sun, 22 Nov 2026 10:00:00 GMT"
    scheduler.close("finished")


def test_plain_requests_are_deduplicated_and_share_slots() -> None:
    scheduler, clock = make_scheduler(ECHO_SOURCES=["http://a.test/"], ECHO_PLAIN_SHARE=0.5)
    assert scheduler.enqueue_request(Request("http://a.test/other"))
    assert not scheduler.enqueue_request(Request("http://a.test/other"))  # dupefilter
    for i in range(4):
        scheduler.enqueue_request(page(f"http://a.test/p{i}", 0, clock.now))
    kinds = [scheduler.next_request() for _ in range(4)]
    plain = [r for r in kinds if r is not None and "echo" not in r.meta]
    assert len(plain) == 1  # served, but it did not take every slot
    scheduler.close("finished")


def test_budget_holds_requests_back_until_their_slot() -> None:
    scheduler, clock = make_scheduler(ECHO_CRAWL_RATE=2, ECHO_SOURCES=["http://a.test/"])
    for i in range(5):
        scheduler.enqueue_request(page(f"http://a.test/p{i}", 0, clock.now))
    assert scheduler.next_request() is not None
    # A burst of up to a second of unused budget is allowed after idling, then 2/s.
    served = 1
    while scheduler.next_request() is not None:
        served += 1
    assert served <= 3
    assert scheduler._wake_call is not None and scheduler._wake_call.active()
    clock.now += 0.5
    assert scheduler.next_request() is not None
    assert scheduler.next_request() is None
    scheduler.close("finished")


def test_plan_spends_what_the_plain_lane_leaves() -> None:
    """The spider's own requests took half the slots lately: the plan gets half the rate."""
    scheduler, clock = make_scheduler(ECHO_CRAWL_RATE=4, ECHO_SOURCES=["http://a.test/"])
    runtime = scheduler.runtime
    for i in range(10):
        scheduler.enqueue_request(Request(f"http://other.test/{i}"))
        scheduler.enqueue_request(page(f"http://a.test/p{i}", 0, clock.now))
    served = []
    for _ in range(8):
        clock.now += 0.25
        request = scheduler.next_request()
        served.append(request.url.startswith("http://other.test/"))
    assert served.count(True) == 4
    assert runtime.lanes.share() == pytest.approx(0.5)
    runtime.replan()
    assert runtime.crawler.stats.get_value("echo/solver/crawl_rate") == pytest.approx(2.0)
    assert runtime.crawler.stats.get_value("echo/solver/plain_share") == pytest.approx(0.5)
    scheduler.close("finished")


def test_source_followups_go_first() -> None:
    scheduler, clock = make_scheduler(ECHO_SOURCES=["http://a.test/"])
    scheduler.enqueue_request(page("http://a.test/p", 0, clock.now))
    redirect = Request("http://a.test/moved", meta={"echo": {"kind": "source", "source": 0}})
    scheduler.enqueue_request(redirect)
    assert scheduler.next_request() is redirect
    scheduler.close("finished")


def test_refresh_followups_go_first_and_are_not_filtered() -> None:
    scheduler, clock = make_scheduler(ECHO_SOURCES=["http://a.test/"])
    scheduler.enqueue_request(Request("http://a.test/plain"))
    scheduler.enqueue_request(page("http://a.test/p", 0, clock.now))
    # A refetch's redirect: its URL was fetched before, so Scrapy's filter would drop it
    # (unless dont_filter), and behind the plain lane it would wait for the user's requests.
    echo = {"kind": "refresh", "page": "http://a.test/old", "source_url": "http://a.test/"}
    scheduler.enqueue_request(Request("http://a.test/plain"))  # (seen: filtered)
    redirect = Request("http://a.test/plain", meta={"echo": echo, "echo_refresh": True})
    assert scheduler.enqueue_request(redirect)
    assert scheduler.next_request() is redirect
    stats = scheduler.crawler.stats
    assert stats.get_value("echo/scheduler/enqueued/refresh_followup") == 1
    scheduler.close("finished")


@pytest.mark.parametrize("kind", ["source", "refresh", "page"])
def test_followups_go_first_even_when_the_plain_lane_used_its_share(kind: str) -> None:
    scheduler, clock = make_scheduler(
        ECHO_SOURCES=["http://a.test/"], ECHO_PLAIN_SHARE=0.0, ECHO_CRAWL_RATE=1000
    )
    scheduler.enqueue_request(Request("http://other.test/plain"))
    scheduler.next_request()  # (the source's first crawl, then the plain request)
    scheduler.next_request()
    for i in range(5):
        scheduler.enqueue_request(page(f"http://a.test/p{i}", 0, clock.now))
    echo = {"kind": kind, "page": "http://a.test/old", "source_url": "http://a.test/", "source": 0}
    meta = {"echo": echo, "redirect_urls": ["http://a.test/old"]}
    followup = Request("http://a.test/moved", meta=meta, dont_filter=True)
    assert scheduler.enqueue_request(followup)
    clock.now += 1.0
    assert scheduler.next_request() is followup
    assert scheduler.crawler.stats.get_value("echo/scheduler/dequeued/followup") == 1
    scheduler.close("finished")


def test_the_plain_lane_refuses_past_its_cap_but_never_a_followup(caplog) -> None:
    scheduler, clock = make_scheduler(ECHO_SOURCES=["http://a.test/"], ECHO_PLAIN_QUEUE_MAX=3)
    assert all(scheduler.enqueue_request(Request(f"http://other.test/{i}")) for i in range(3))
    with caplog.at_level("WARNING", logger="scrapy_echo.crawler.scheduler"):
        assert not scheduler.enqueue_request(Request("http://other.test/3"))
        assert not scheduler.enqueue_request(Request("http://other.test/4", dont_filter=True))
    stats = scheduler.crawler.stats
    assert stats.get_value("echo/scheduler/plain_refused") == 2
    assert [r.message for r in caplog.records].count(
        "ECHO plain lane full: 3 of the spider's requests wait (ECHO_PLAIN_QUEUE_MAX); "
        "<GET http://other.test/3> and any further one are refused until it has room, "
        "counted in echo/scheduler/plain_refused (logged once)"
    ) == 1
    assert len(caplog.records) == 1
    # The redirects and retries of ECHO's own requests finish work under way: never refused.
    for kind in ("source", "refresh", "page"):
        echo = {"kind": kind, "page": f"http://a.test/{kind}", "source_url": "http://a.test/",
                "source": 0}  # fmt: skip
        meta = {"echo": echo, "redirect_urls": [f"http://a.test/{kind}"]}
        assert scheduler.enqueue_request(Request(f"http://a.test/{kind}-moved", meta=meta))
    assert len(scheduler.plain) == 6
    assert stats.get_value("echo/scheduler/plain_refused") == 2
    # A refused request was not remembered as seen: once the lane has room it gets in.
    while len(scheduler.plain) >= 3:
        clock.now += 1.0
        assert scheduler.next_request() is not None
    assert scheduler.enqueue_request(Request("http://other.test/3"))
    scheduler.close("finished")


def test_spider_can_add_sources_at_run_time() -> None:
    scheduler, _ = make_scheduler()
    assert not scheduler.has_pending_requests()
    scheduler.enqueue_request(Request("http://new.test/", meta={"echo_source": True}))
    assert scheduler.has_pending_requests()
    assert scheduler.next_request().url == "http://new.test/"
    scheduler.close("finished")


def test_bad_setting_raises_not_configured_with_the_rule() -> None:
    crawler = get_crawler(Spider, {"ECHO_HISTORY_SIZE": -2})
    with pytest.raises(NotConfigured, match=r"ECHO_HISTORY_SIZE \(-2\) must be an integer >= 1"):
        EchoScheduler.from_crawler(crawler)


def test_a_crawl_spider_is_told_where_its_new_pages_go(caplog) -> None:
    from scrapy.spiders import CrawlSpider

    class Rules(CrawlSpider):
        name = "rules"

        def parse_item(self, response: Any) -> Any:
            return []

    def open_for(**settings: Any) -> None:
        crawler = get_crawler(Rules, {"ADDONS": {"scrapy_echo.Addon": 0}, **settings})
        crawler.spider = crawler._create_spider()
        EchoScheduler.from_crawler(crawler).open(crawler.spider)

    with caplog.at_level("WARNING"):
        open_for(ECHO_SOURCES=["http://a.test/"])
    assert "a CrawlSpider's rule engine: set ECHO_PAGE_CALLBACK" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        open_for(ECHO_SOURCES=["http://a.test/"], ECHO_PAGE_CALLBACK="parse_item")
    assert "rule engine" not in caplog.text
