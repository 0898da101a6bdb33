"""The downloader and spider middlewares on hand-made responses (no reactor needed)."""

from __future__ import annotations

from typing import Any

import pytest
import scrapy
from scrapy import Request
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import HtmlResponse, Response, TextResponse, XmlResponse
from scrapy.utils.test import get_crawler

from scrapy_echo.crawler.downloadermw import EchoDownloaderMiddleware
from scrapy_echo.crawler.link_collector import EchoLinkCollector
from scrapy_echo.crawler.runtime import EchoRuntime
from scrapy_echo.crawler.signals import page_found
from scrapy_echo.crawler.spidermw import EchoSpiderMiddleware


class Spider(scrapy.Spider):
    name = "unit"

    def parse(self, response: Any) -> Any:
        return []

    def parse_article(self, response: Any) -> Any:
        return []


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def setup(**settings: Any) -> tuple[Any, EchoRuntime, Clock]:
    crawler = get_crawler(Spider, {"ADDONS": {"scrapy_echo.Addon": 0}, **settings})
    crawler.spider = crawler._create_spider()
    runtime = EchoRuntime.of(crawler)
    clock = Clock()
    runtime.clock = clock
    return crawler, runtime, clock


class SpiderMiddlewares:
    """ECHO's pair of spider middlewares, with nothing between them: ``handle_response`` is
    a response's trip through both, and gives the requests of the new pages it revealed."""

    def __init__(self, crawler: Any) -> None:
        self.inner = EchoSpiderMiddleware.from_crawler(crawler)
        self.outer = EchoLinkCollector.from_crawler(crawler)
        self.found: list[Request] = []
        crawler.signals.connect(self.page_found, signal=page_found)

    def page_found(self, request: Request, **_: Any) -> None:
        self.found.append(request)

    def handle_response(self, response: Response) -> list[Request]:
        self.found = []
        out = list(
            self.outer.process_spider_output(
                response, self.inner.process_spider_output(response, [])
            )
        )
        assert out == []  # (a probe never goes on to the scheduler)
        return self.found


def source_request(source: int, url: str = "http://news.test/") -> Request:
    return Request(url, meta={"echo": {"kind": "source", "source": source}})


def hub(request: Request, links: list[str], **headers: str) -> HtmlResponse:
    body = "".join(f'<a href="{link}">x</a>' for link in links)
    return HtmlResponse(
        request.url, body=body.encode(), encoding="utf-8", request=request, headers=headers
    )


def test_validators_are_kept_and_304_is_a_cheap_crawl() -> None:
    crawler, runtime, clock = setup()
    source = runtime.state.add_source("http://news.test/")
    mw = EchoDownloaderMiddleware.from_crawler(crawler)
    spider_mw = SpiderMiddlewares(crawler)
    first = source_request(source)
    response = hub(first, [], ETag='"v1"', **{"Last-Modified": "Sun, 22 Nov 2026"})
    spider_mw.handle_response(mw.process_response(first, response))
    status = runtime.state.sources[source]
    assert (status.etag, status.last_modified) == ('"v1"', "Sun, 22 Nov 2026")
    clock.now += 60
    again = source_request(source)
    with pytest.raises(IgnoreRequest):
        mw.process_response(again, Response(again.url, status=304, request=again))
    assert runtime.state.sources[source].not_modified == 1
    assert runtime.state.sources[source].crawls == 2  # counted as a crawl with nothing new
    assert crawler.stats.get_value("echo/sources/not_modified") == 1


def test_failing_source_backs_off_doubling() -> None:
    crawler, runtime, clock = setup(ECHO_FAILURE_BACKOFF=10, ECHO_FAILURE_BACKOFF_MAX=25)
    source = runtime.state.add_source("http://news.test/")
    mw = EchoDownloaderMiddleware.from_crawler(crawler)
    request = source_request(source)
    mw.process_response(request, Response(request.url, status=503, request=request))
    assert runtime.state.last_crawl[source] == clock.now + 10
    mw.process_exception(request, TimeoutError())
    assert runtime.state.last_crawl[source] == clock.now + 20
    mw.process_exception(request, TimeoutError())
    assert runtime.state.last_crawl[source] == clock.now + 25  # capped
    assert crawler.stats.get_value("echo/sources/failed") == 3
    # Plain requests are none of its business.
    mw.process_exception(Request("http://other.test/"), TimeoutError())
    assert crawler.stats.get_value("echo/sources/failed") == 3


def test_a_source_retired_after_its_failures_sends_the_signal_once() -> None:
    from scrapy_echo.crawler.signals import source_retired

    crawler, runtime, _ = setup(ECHO_SOURCE_MAX_FAILURES=2)
    retired: list[tuple[str, str]] = []

    def on_retired(source: str, why: str, spider: Any) -> None:
        retired.append((source, why))

    crawler.signals.connect(on_retired, signal=source_retired)  # (held weakly: keep a name)
    source = runtime.state.add_source("http://news.test/")
    mw = EchoDownloaderMiddleware.from_crawler(crawler)
    for status in (404, 410, 410):
        request = source_request(source)
        mw.process_response(request, Response(request.url, status=status, request=request))
    assert retired == [("http://news.test/", "HTTP 410")]
    assert runtime.state.sources[source].retired


def test_an_unreadable_source_is_counted_each_time_and_logged_once(caplog) -> None:
    crawler, runtime, _ = setup()
    source = runtime.state.add_source("http://news.test/s.xml.gz")
    mw = SpiderMiddlewares(crawler)
    with caplog.at_level("WARNING"):
        for at in (1.0, 2.0):
            request = source_request(source, "http://news.test/s.xml.gz")
            request.meta["echo"]["fetched"] = at
            body = b"\x1f\x8b\x08broken"
            assert mw.handle_response(Response(request.url, body=body, request=request)) == []
    assert crawler.stats.get_value("echo/sources/unreadable") == 2
    assert crawler.stats.get_value("echo/sources/kind/gzip") == 2
    assert caplog.text.count("unreadable") == 1


def test_source_response_yields_only_new_pages_with_midpoint_appearance() -> None:
    crawler, runtime, _ = setup(ECHO_BACKLOG="skip")
    source = runtime.state.add_source("http://news.test/")
    mw = SpiderMiddlewares(crawler)

    def crawl(links: list[str], at: float) -> list[Request]:
        request = source_request(source)
        request.meta["echo"]["fetched"] = at
        return mw.handle_response(hub(request, links))

    assert crawl(["/a", "/b", "http://elsewhere.test/x"], 100.0) == []  # first crawl: old
    new = crawl(["/a", "/b", "/c", "http://elsewhere.test/y"], 200.0)
    assert [r.url for r in new] == ["http://news.test/c"]  # same site only, never seen
    echo = new[0].meta["echo"]
    assert echo["appeared"] == 150.0 and echo["discovered"] == 200.0
    assert echo["window"] == [100.0, 200.0]
    assert new[0].callback == crawler.spider.parse
    assert crawl(["/c", "/d"], 300.0)[0].url == "http://news.test/d"
    assert runtime.state.learner.crawls.window()[0][source] == 2.0  # two new links after the first


def test_feed_pubdate_that_fits_the_window_is_the_appearance() -> None:
    crawler, runtime, _ = setup()
    source = runtime.state.add_source("http://news.test/feed.xml")
    mw = SpiderMiddlewares(crawler)

    def feed(items: list[tuple[str, str]], at: float) -> list[Request]:
        body = "".join(f"<item><link>{u}</link><pubDate>{d}</pubDate></item>" for u, d in items)
        request = source_request(source, "http://news.test/feed.xml")
        request.meta["echo"]["fetched"] = at
        xml = f'<?xml version="1.0"?><rss><channel>{body}</channel></rss>'.encode()
        return mw.handle_response(XmlResponse(request.url, body=xml, request=request))

    feed([("http://news.test/old", "Thu, 01 Jan 1970 00:00:00 GMT")], 100.0)
    new = feed(
        [
            ("http://news.test/fits", "Thu, 01 Jan 1970 00:02:00 GMT"),  # 120 s: inside
            ("http://news.test/lies", "Thu, 01 Jan 1970 10:00:00 GMT"),  # after the crawl
        ],
        200.0,
    )
    appeared = {r.url: r.meta["echo"]["appeared"] for r in new}
    assert appeared == {"http://news.test/fits": 120.0, "http://news.test/lies": 150.0}


def test_page_response_tells_the_learner_with_its_own_published_time() -> None:
    crawler, runtime, _ = setup()
    source = runtime.state.add_source("http://news.test/")
    mw = SpiderMiddlewares(crawler)
    meta = {"kind": "page", "source": source, "source_url": "http://news.test/",
            "page": "http://news.test/a", "appeared": 150.0, "window": (100.0, 200.0),
            "discovered": 200.0, "fetched": 210.0}  # fmt: skip
    request = Request("http://news.test/a", meta={"echo": meta})
    page = HtmlResponse(
        request.url,
        body=b'<meta property="article:published_time" content="1970-01-01T00:01:50Z">',
        encoding="utf-8",
        request=request,
    )
    assert mw.handle_response(page) == []
    assert runtime.state.crawled_pages == 1
    assert crawler.stats.get_value("echo/pages/published_time_used") == 1
    clicks = runtime.state.learner.clicks
    key = runtime.state.page_key("http://news.test/a")  # http and https: one page
    assert clicks._row_appeared[clicks._rows[key]] == 110.0


def test_spider_may_name_its_page_callback() -> None:
    crawler, runtime, _ = setup()
    crawler.spider.echo_page_callback = "parse_article"
    source = runtime.state.add_source("http://news.test/")
    mw = SpiderMiddlewares(crawler)
    for at, links in ((1.0, ["/a"]), (2.0, ["/a", "/b"])):
        request = source_request(source)
        request.meta["echo"]["fetched"] = at
        new = mw.handle_response(hub(request, links))
    assert new[0].callback == crawler.spider.parse_article


def test_page_found_signal_for_each_new_page() -> None:
    from scrapy_echo.crawler.signals import page_found

    crawler, runtime, _ = setup()
    found: list[tuple[str, str]] = []

    def on_page(request: Request, source: str, spider: Any) -> None:
        found.append((request.url, source))

    crawler.signals.connect(on_page, signal=page_found)  # (held weakly: keep a name)
    source = runtime.state.add_source("http://news.test/")
    mw = SpiderMiddlewares(crawler)
    for at, links in ((1.0, ["/a"]), (2.0, ["/a", "/b", "/c"])):
        request = source_request(source)
        request.meta["echo"]["fetched"] = at
        mw.handle_response(hub(request, links))
    # ECHO_BACKLOG = "crawl" (the default): what the first crawl listed is a page too.
    assert found == [
        ("http://news.test/a", "http://news.test/"),
        ("http://news.test/b", "http://news.test/"),
        ("http://news.test/c", "http://news.test/"),
    ]


@pytest.mark.parametrize("backlog", ["crawl", "skip"])
def test_backlog_setting_decides_what_a_first_crawl_yields(backlog: str) -> None:
    crawler, runtime, _ = setup(ECHO_BACKLOG=backlog)
    source = runtime.state.add_source("http://news.test/")
    runtime.state.add_source("http://news.test/world/")
    mw = SpiderMiddlewares(crawler)
    request = source_request(source)
    request.meta["echo"]["fetched"] = 100.0
    # An article, and a link to another source (navigation): never a page.
    first = mw.handle_response(hub(request, ["/a", "/world/"]))
    assert [r.url for r in first] == (["http://news.test/a"] if backlog == "crawl" else [])
    if first:  # a backlog page with no stated time: as if it appeared at the first crawl
        assert first[0].meta["echo"]["appeared"] == 100.0


def test_bad_backlog_setting_is_refused() -> None:
    from scrapy.settings import Settings

    from scrapy_echo.crawler.settings import EchoConfig

    with pytest.raises(NotConfigured, match="ECHO_BACKLOG"):
        EchoConfig.from_settings(Settings({"ECHO_BACKLOG": "all"}))


def test_page_callback_setting_and_a_clear_error_when_it_names_no_method() -> None:
    crawler, runtime, _ = setup(ECHO_PAGE_CALLBACK="parse_article")
    assert runtime.page_callback() == crawler.spider.parse_article
    crawler, runtime, _ = setup(ECHO_PAGE_CALLBACK="parse_story")
    with pytest.raises(ValueError, match=r"ECHO_PAGE_CALLBACK \('parse_story'\) is not a method"):
        runtime.page_callback()


def test_a_project_scheduler_that_overrides_the_addon_is_reported(caplog) -> None:
    with caplog.at_level("WARNING"):
        crawler = get_crawler(
            Spider,
            {
                "ADDONS": {"scrapy_echo.Addon": 0},
                "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
            },
            prevent_warnings=False,
        )
    assert crawler.settings["SCHEDULER"] == "scrapy_redis.scheduler.Scheduler"
    assert "overrides the ECHO add-on's scheduler" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        get_crawler(
            Spider,
            {
                "ADDONS": {"scrapy_echo.Addon": 0},
                "SCHEDULER": "scrapy_echo.scheduler.EchoScheduler",
            },
            prevent_warnings=False,
        )
    assert "overrides" not in caplog.text


def test_push_clicks_counts_bad_rows() -> None:
    import scrapy_echo

    crawler, runtime, _ = setup()
    taken = scrapy_echo.push_clicks(
        crawler,
        [
            {"url": "http://news.test/a", "ts": 5, "clicks": 2},
            {"url": "nope", "ts": 5, "clicks": 2},
            {"url": "http://news.test/a", "ts": 5, "clicks": -1},
            ("http://news.test/a", 5, 1),
        ],
    )
    assert taken == 1
    assert crawler.stats.get_value("echo/clickfeed/invalid") == 3
    assert crawler.stats.get_value("echo/clickfeed/invalid/bad_url") == 1
    assert runtime.state.learner.pending_clicks == 1  # waits for its page to be crawled


def redirected_source(source: int, asked: str, landed: str) -> Request:
    """The request a redirect of ``source``'s crawl (asked at ``asked``) made for ``landed``."""
    echo = {"kind": "source", "source": source, "url": asked}
    return Request(landed, meta={"echo": echo, "redirect_urls": [asked]})


def test_a_source_redirected_off_its_site_yields_nothing_counted_and_logged_once(
    caplog,
) -> None:
    crawler, runtime, _ = setup()
    source = runtime.state.add_source("http://news.test/")
    mw = SpiderMiddlewares(crawler)
    with caplog.at_level("WARNING"):
        for at in (100.0, 200.0):
            request = redirected_source(source, "http://news.test/", "http://10.0.0.5/")
            request.meta["echo"]["fetched"] = at
            found = mw.handle_response(hub(request, ["/admin", "/status"]))
            assert found == []  # not 10.0.0.5's pages, as if that were the source's site
    assert crawler.stats.get_value("echo/sources/redirected_refused") == 2
    assert caplog.text.count("redirected to http://10.0.0.5/") == 1
    # A redirect on its own site is read as before.
    request = redirected_source(source, "http://news.test/", "https://news.test/home")
    request.meta["echo"]["fetched"] = 300.0
    found = mw.handle_response(hub(request, ["/a"]))
    assert [r.url for r in found] == ["https://news.test/a"]


def test_robots_sitemaps_on_other_sites_or_refused_hosts_are_no_sources(caplog) -> None:
    robots = (
        b"Sitemap: http://news.test/s.xml\nSitemap: http://cdn.other.test/s.xml\n"
        b"Sitemap: http://169.254.169.254/latest/meta-data/\n"
    )
    for cross_site in (False, True):
        crawler, runtime, _ = setup(ECHO_CROSS_SITE_SITEMAPS=cross_site)
        source = runtime.state.add_source("http://news.test/robots.txt")
        request = source_request(source, "http://news.test/robots.txt")
        response = TextResponse(
            request.url, body=robots, headers={"Content-Type": "text/plain"}, request=request
        )
        with caplog.at_level("WARNING"):
            SpiderMiddlewares(crawler).handle_response(response)
        sources = [status.url for status in runtime.state.sources]
        stats = crawler.stats
        if cross_site:
            assert sources[1:] == ["http://news.test/s.xml", "http://cdn.other.test/s.xml"]
            assert stats.get_value("echo/sources/address_refused") == 1
            assert "169.254.169.254" in caplog.text
        else:
            assert sources[1:] == ["http://news.test/s.xml"]
            assert stats.get_value("echo/sources/cross_site_refused") == 2
            assert "ECHO_CROSS_SITE_SITEMAPS" in caplog.text


def test_links_to_refused_hosts_are_counted_and_the_first_logged(caplog) -> None:
    crawler, runtime, _ = setup(
        ECHO_SAME_SITE=False,
        ECHO_SOURCES=["http://127.0.0.2:8000/"],
        ECHO_ALLOWED_PRIVATE_HOSTS=["10.9.0.0/16"],
    )
    source = runtime.state.add_source("http://127.0.0.2:8000/")
    mw = SpiderMiddlewares(crawler)
    links = [
        "/own",  # the source's own host: allowed
        "http://10.9.1.1/allowed",
        "http://127.0.0.3/other-loopback",
        "http://[::ffff:169.254.169.254]/latest/",
        "http://example.org/public",
    ]
    with caplog.at_level("WARNING"):
        found = mw.handle_response(hub(source_request(source, "http://127.0.0.2:8000/"), links))
    assert [r.url for r in found] == [
        "http://127.0.0.2:8000/own",
        "http://10.9.1.1/allowed",
        "http://example.org/public",
    ]
    assert crawler.stats.get_value("echo/links/address_refused") == 2
    assert caplog.text.count("ECHO refused 2 links") == 1


def test_a_redirect_of_echos_request_to_a_refused_host_is_not_followed(caplog) -> None:
    crawler, runtime, clock = setup(ECHO_FAILURE_BACKOFF=10)
    source = runtime.state.add_source("http://news.test/")
    mw = EchoDownloaderMiddleware.from_crawler(crawler)
    with caplog.at_level("WARNING"):
        for landed in ("http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:6379/"):
            request = redirected_source(source, "http://news.test/", landed)
            with pytest.raises(IgnoreRequest):
                mw.prepare(request)
            mw.process_exception(request, IgnoreRequest())  # (as Scrapy then calls it)
    stats = crawler.stats
    assert stats.get_value("echo/redirects/refused/source") == 2
    assert stats.get_value("echo/sources/failed") == 2  # a failed crawl each, backing off
    assert runtime.state.last_crawl[source] == clock.now + 20
    assert caplog.text.count("ECHO refused a redirect") == 1
    # A redirect on the web, and ECHO's requests that were not redirected, go on.
    assert mw.prepare(redirected_source(source, "http://news.test/", "http://b.test/")) is None
    assert mw.prepare(source_request(source, "http://10.0.0.5/")) is None
