"""Click times a crawl cannot use (centuries off, in milliseconds, far in its future) on a
crawled page: each row refused, counted and logged once per kind, none an exception, whether
the feed is read as the spider opens or at a re-solve."""

from __future__ import annotations

import json
import logging
from typing import Any

from scrapy_echo.core.events import PageFetched, SourceFetched
from scrapy_echo.crawler.extension import EchoExtension
from tests.test_middlewares import setup

HUB = "http://news.test/"
PAGE = HUB + "a/1"
NOW = 1_764_000_000.0  # the crawl's clock: late 2025


def row(ts: object, clicks: float = 1) -> str:
    return json.dumps({"url": PAGE, "ts": ts, "clicks": clicks}) + "\n"


def crawl_with_feed(tmp_path) -> tuple[Any, Any, EchoExtension]:
    """A crawl at ``NOW`` whose one page was fetched a few minutes ago: its clicks are binned
    by age (an unknown page's would only wait)."""
    feed = tmp_path / "clicks.jsonl"
    feed.touch()
    crawler, runtime, clock = setup(ECHO_CLICK_FEED=str(feed), ECHO_SOURCES=[HUB])
    clock.now = NOW
    extension = EchoExtension.from_crawler(crawler)
    runtime.observe(SourceFetched(HUB, NOW - 900, ()))
    runtime.observe(SourceFetched(HUB, NOW - 600, ((PAGE, None),)))
    runtime.observe(PageFetched(PAGE, HUB, NOW - 700, NOW - 590))
    assert runtime.state.learner.source_of_page(runtime.state.page_key(PAGE)) is not None
    return crawler, runtime, extension


BAD = {
    "ts_out_of_range": [1e300, -1e300, "9999-01-01T00:00:00Z"],
    "ts_milliseconds": [int(NOW - 60) * 1000, str(int(NOW) * 1000)],
    "ts_microseconds": [int(NOW) * 1_000_000],
    "ts_future": [NOW + 2 * 86400, 5e9],  # (a day past the crawl's clock: no skew's doing)
}


def test_unusable_times_are_refused_counted_and_logged_once_as_the_spider_opens(
    tmp_path, caplog
) -> None:
    crawler, runtime, extension = crawl_with_feed(tmp_path)
    lines = [row(NOW - 500, 2)] + [row(ts) for kind in BAD for ts in BAD[kind]]
    (tmp_path / "clicks.jsonl").write_text("".join(lines) + row(NOW - 400, 3) + row(NOW + 60, 4))
    with caplog.at_level(logging.WARNING, logger="scrapy_echo"):
        extension.spider_opened()  # raised out of the click histogram before
    try:
        assert extension._loop is not None and extension._loop.running  # re-solves will come
    finally:
        extension.spider_closed()
    get = crawler.stats.get_value
    assert {kind: get(f"echo/clickfeed/invalid/{kind}") for kind in BAD} == {
        kind: len(times) for kind, times in BAD.items()
    }
    assert get("echo/clickfeed/invalid") == sum(map(len, BAD.values()))
    assert get("echo/clickfeed/rows") == 3  # the good ones, a minute ahead of the clock too
    assert runtime.state.learner.clicks_caught == 2 + 3 + 4
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(logged) == len(BAD)  # one line a kind
    (millis,) = [m for m in logged if "milliseconds" in m]
    assert "looks like milliseconds since the epoch (2025-11-24T" in millis
    assert "divide it by 1000" in millis


def test_unusable_times_at_a_re_solve_lose_no_good_row(tmp_path) -> None:
    crawler, runtime, extension = crawl_with_feed(tmp_path)
    feed = tmp_path / "clicks.jsonl"
    extension.read_click_feeds()
    feed.write_text(row(NOW - 500, 2) + row(1e300) + row(1e308) + row(NOW - 400, 3))
    extension.resolve()
    assert crawler.stats.get_value("echo/solver/errors") is None
    assert runtime.state.learner.clicks_caught == 5
    assert crawler.stats.get_value("echo/clickfeed/invalid/ts_out_of_range") == 2
    assert extension.read_click_feeds() == 0  # read once, counted once


def test_a_click_older_than_the_horizon_is_refused_and_moves_no_page_back(tmp_path) -> None:
    # Reproduced on the build of 2026-11-29: a page with 50 clicks, then one row stamped 0 (an
    # exporter's empty date) moved its appearance back 56 years: 1 click left in the table,
    # later clicks ignored. A year-old backfill did the same.
    crawler, runtime, extension = crawl_with_feed(tmp_path)
    feed = tmp_path / "clicks.jsonl"
    feed.write_text(row(NOW - 500, 50))
    extension.read_click_feeds()
    with open(feed, "a", encoding="utf-8") as handle:
        handle.write(row(0) + row(NOW - 365 * 86400) + row(NOW - 300, 5))
    extension.read_click_feeds()
    assert crawler.stats.get_value("echo/clickfeed/invalid/ts_past") == 2
    assert runtime.state.learner.clicks_caught == 55
    # The page still appeared when it did (its clicks binned by their age from then).
    assert runtime.state.learner.clicks.to_data()["row_appeared"][0] == NOW - 700
