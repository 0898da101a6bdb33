"""Signal feeds: rows checked and tailed as click feeds are, matched to sources (or to the
source a page was found on), late ones ignored, bad ones counted; the Python call."""

from __future__ import annotations

import json
import math

import pytest

import scrapy_echo
from scrapy_echo.core.events import SignalsArrived
from scrapy_echo.inputs.feed_reader import InvalidClickRow
from scrapy_echo.inputs.signalfeed import SignalFeedReader, SignalRow, parse_signal
from tests.test_middlewares import setup


def test_rows_in_either_format_and_bad_ones_counted(tmp_path) -> None:
    jsonl = tmp_path / "signals.jsonl"
    jsonl.write_text(
        json.dumps({"url": "http://news.test/", "ts": 60}) + "\n"
        + json.dumps({"url": "http://news.test/a", "ts": "1970-01-01T00:02:00Z"}) + "\n"
        + json.dumps({"url": "http://news.test/"}) + "\n"  # no ts
        + json.dumps({"url": "mailto:x@news.test", "ts": 1}) + "\n"
        + "not json\n"
        + json.dumps({"url": "http://news.test/b", "ts": 3})  # still being written
    )  # fmt: skip
    reader = SignalFeedReader(jsonl)
    assert reader.read() == [
        SignalRow("http://news.test/", 60.0),
        SignalRow("http://news.test/a", 120.0),
    ]
    assert reader.invalid == {"missing_field": 1, "bad_url": 1, "json": 1}
    with open(jsonl, "a") as handle:
        handle.write("\n")
    assert reader.read() == [SignalRow("http://news.test/b", 3.0)]

    csv = tmp_path / "signals.csv"
    csv.write_text("ts,url\n60,http://news.test/\nx,http://news.test/\n")
    csv_reader = SignalFeedReader(csv)
    assert csv_reader.read() == [SignalRow("http://news.test/", 60.0)]
    assert csv_reader.invalid == {"bad_ts": 1}
    with pytest.raises(InvalidClickRow):
        parse_signal("http://news.test/", math.nan)


def crawled_source(runtime, clock, url: str = "http://news.test/") -> int:
    """A source crawled at t = 100 that showed one page, fetched since."""
    from scrapy_echo.core.events import PageFetched, SourceFetched

    runtime.observe(SourceFetched(url, 50.0, ()))
    runtime.observe(SourceFetched(url, 100.0, ((url + "story", None),)))
    runtime.observe(PageFetched(url + "story", url, 99.0, 101.0))
    clock.now = 200.0
    return runtime.state.add_source(url)


def test_a_signal_names_a_source_or_a_page_of_one_and_late_ones_are_dropped() -> None:
    crawler, runtime, clock = setup()
    source = crawled_source(runtime, clock)
    taken = scrapy_echo.push_signals(
        crawler,
        [
            {"url": "http://news.test/", "ts": 150},  # the source itself
            {"url": "http://NEWS.test/story", "ts": 160},  # a page found on it
            {"url": "http://news.test/", "ts": 90},  # before its last crawl: seen already
            {"url": "http://elsewhere.test/", "ts": 150},  # nobody we know
            {"url": "http://news.test/", "ts": 10_000},  # the future: taken as now
            {"url": "http://news.test/", "ts": "yesterday"},
            ["http://news.test/", 170],  # as rows travel between workers
            "http://news.test/",
        ],
    )
    assert taken == 6
    get = crawler.stats.get_value
    assert get("echo/signalfeed/source") == 3 and get("echo/signalfeed/page") == 1
    assert get("echo/signalfeed/stale") == 1 and get("echo/signalfeed/unmatched") == 1
    assert get("echo/signalfeed/invalid") == 2
    assert get("echo/signalfeed/invalid/bad_ts") == 1
    assert get("echo/signalfeed/invalid/not_object") == 1
    book = runtime.state.signals
    assert book.count[source] == 4 and book.received == 4
    assert float(book._ref[source]) == 200.0  # the one from the future, at now


def test_a_retired_or_removed_source_is_not_signalled() -> None:
    crawler, runtime, clock = setup()
    crawled_source(runtime, clock)
    runtime.remove_source("http://news.test/")
    scrapy_echo.push_signals(crawler, [{"url": "http://news.test/", "ts": 150}])
    assert crawler.stats.get_value("echo/signalfeed/inactive") == 1
    assert runtime.state.signals.received == 0


def test_a_worker_without_the_state_sends_signals_to_the_planner() -> None:
    crawler, runtime, _ = setup()
    sent = []
    runtime.holds_state = False
    runtime.transport = sent.append
    assert scrapy_echo.push_signals(crawler, [{"url": "http://news.test/", "ts": 5}]) == 1
    assert sent == [SignalsArrived((["http://news.test/", 5.0],))]
    # The planner checks them again as it applies them.
    planner_crawler, planner, clock = setup()
    crawled_source(planner, clock)
    planner.apply(SignalsArrived((["http://news.test/", 150.0], ["bad", 1])))
    assert planner_crawler.stats.get_value("echo/signalfeed/source") == 1
    assert planner_crawler.stats.get_value("echo/signalfeed/invalid/bad_url") == 1


def test_the_extension_tails_the_signal_feed(tmp_path) -> None:
    from scrapy_echo.crawler.extension import EchoExtension

    feed = tmp_path / "signals.jsonl"
    feed.write_text(json.dumps({"url": "http://news.test/", "ts": 150}) + "\n" + "{}\n")
    crawler, runtime, clock = setup(ECHO_SIGNAL_FEED=str(feed))
    extension = EchoExtension.from_crawler(crawler)
    source = crawled_source(runtime, clock)
    assert extension.read_signal_feeds() == 1
    assert runtime.state.signals.count[source] == 1
    assert crawler.stats.get_value("echo/signalfeed/invalid/missing_field") == 1
    assert extension.read_signal_feeds() == 0  # nothing new
    assert str(feed) in runtime.feed_state()  # its position is saved with the job


def index_response(request, lastmods: dict[str, str]):
    from scrapy.http import XmlResponse

    entries = "".join(
        f"<sitemap><loc>{url}</loc><lastmod>{when}</lastmod></sitemap>"
        for url, when in lastmods.items()
    )
    body = (
        '<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{entries}</sitemapindex>"
    )
    return XmlResponse(request.url, body=body.encode(), request=request)


def test_a_sitemap_index_signals_the_sitemaps_whose_lastmod_moved() -> None:
    from scrapy_echo.crawler.spidermw import EchoSpiderMiddleware
    from tests.test_middlewares import source_request

    crawler, runtime, clock = setup()
    index = runtime.state.add_source("http://news.test/sitemap_index.xml")
    mw = EchoSpiderMiddleware.from_crawler(crawler)
    child = "http://news.test/sitemap-news.xml"

    def crawl_index(when: str) -> None:
        request = source_request(index, "http://news.test/sitemap_index.xml")
        mw.handle_response(index_response(request, {child: when}))

    clock.now = 2000.0
    crawl_index("1970-01-01T00:16:40Z")  # 1000 s: the child is new, and dated
    book = runtime.state.signals
    source = runtime.state.add_source(child)
    assert book.count[source] == 1 and crawler.stats.get_value("echo/signals/own") == 1
    crawl_index("1970-01-01T00:16:40Z")  # the same date again: nothing new
    assert book.count[source] == 1
    crawl_index("1970-01-01T00:25:00Z")  # moved: a change
    assert book.count[source] == 2 and crawler.stats.get_value("echo/signalfeed/source") == 2


def test_a_lastmod_in_the_future_does_not_hide_the_later_ones(caplog) -> None:
    from scrapy_echo.crawler.spidermw import EchoSpiderMiddleware
    from tests.test_middlewares import source_request

    crawler, runtime, clock = setup()
    index = runtime.state.add_source("http://news.test/sitemap_index.xml")
    mw = EchoSpiderMiddleware.from_crawler(crawler)
    child = "http://news.test/sitemap-news.xml"

    def crawl_index(when: str) -> None:
        request = source_request(index, "http://news.test/sitemap_index.xml")
        mw.handle_response(index_response(request, {child: when}))

    clock.now = 2000.0
    book = runtime.state.signals
    crawl_index("1970-01-01T00:16:40Z")  # 1000 s
    source = runtime.state.add_source(child)
    assert book.count[source] == 1
    with caplog.at_level("WARNING"):
        crawl_index("1970-01-02T00:33:20Z")  # a day ahead of the clock: a change, said oddly
        crawl_index("1970-01-02T00:33:20Z")  # the same date again: nothing new
        crawl_index("1970-01-02T00:50:00Z")  # moved, still ahead: another change
    assert book.count[source] == 3
    # The dates ahead did not raise the mark: a later, real date still counts as moved.
    crawl_index("1970-01-01T00:25:00Z")  # 1500 s
    assert book.count[source] == 4
    assert crawler.stats.get_value("echo/signals/own/future") == 3
    assert len([r for r in caplog.records if "in the future" in r.getMessage()]) == 1
    # Within the clock-skew allowance a date is not "in the future".
    crawl_index("1970-01-01T00:33:30Z")  # 2010 s
    assert book.count[source] == 5
    assert crawler.stats.get_value("echo/signals/own/future") == 3
    # Once the clock passes a date that came early, it is not signalled a second time.
    clock.now = 200_000.0
    crawl_index("1970-01-02T00:50:00Z")
    assert book.count[source] == 5


def test_a_dated_link_to_a_known_source_signals_it() -> None:
    from scrapy.http import XmlResponse

    from scrapy_echo.crawler.spidermw import EchoSpiderMiddleware
    from tests.test_middlewares import source_request

    crawler, runtime, _ = setup()
    hub = runtime.state.add_source("http://news.test/world/")
    sitemap = runtime.state.add_source("http://news.test/sections.xml")
    mw = EchoSpiderMiddleware.from_crawler(crawler)
    body = (
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        "<url><loc>http://news.test/world/</loc><lastmod>1970-01-01T00:16:40Z</lastmod></url>"
        "<url><loc>http://news.test/about</loc><lastmod>1970-01-01T00:16:40Z</lastmod></url>"
        "</urlset>"
    )
    request = source_request(sitemap, "http://news.test/sections.xml")
    mw.handle_response(XmlResponse(request.url, body=body.encode(), request=request))
    assert runtime.state.signals.count[hub] == 1  # a page that is no source is no signal
    assert runtime.state.signals.received == 1


def test_a_missing_signal_feed_is_counted_and_read_when_it_appears(tmp_path) -> None:
    from scrapy_echo.crawler.extension import EchoExtension

    feed = tmp_path / "signals.jsonl"
    crawler, runtime, clock = setup(ECHO_SIGNAL_FEED=str(feed))
    extension = EchoExtension.from_crawler(crawler)
    source = crawled_source(runtime, clock)
    assert extension.read_signal_feeds() == 0 and extension.read_signal_feeds() == 0
    assert crawler.stats.get_value("echo/signalfeed/missing") == 2
    feed.write_text(json.dumps({"url": "http://news.test/", "ts": 150}) + "\n")
    assert extension.read_signal_feeds() == 1
    assert runtime.state.signals.count[source] == 1
    assert crawler.stats.get_value("echo/signalfeed/missing") == 2
