"""Responses ECHO cannot read (JSON where HTML was expected, JSON nested past Python's
recursion limit, an API's ``{"error": ...}`` where a hub was, a 5,000-digit page number):
each is "unreadable" or simply without what ECHO looks for, never an exception, and the
spider's own items from that response reach the engine. Reproduced on the build of
2026-11-29: each raised inside the spider middleware, before the callback's output was
consumed, so that response's items were lost and its page or source never recorded."""

from __future__ import annotations

from scrapy import Request
from scrapy.http import HtmlResponse, JsonResponse

from scrapy_echo.core.events import SourceFetched
from scrapy_echo.crawler.spidermw import EchoSpiderMiddleware, page_aliases
from scrapy_echo.sources.outlinks import published_time, read_source
from scrapy_echo.sources.pagination import numbered_next
from tests.test_middlewares import SpiderMiddlewares, setup

HUB = "http://news.test/s/"
PAGE = "http://news.test/a/1"
DEEP = b"[" * 100_000 + b"]" * 100_000


def _json(url: str, body: bytes, meta: dict | None = None) -> JsonResponse:
    request = Request(url, meta=meta or {})
    return JsonResponse(url, body=body, headers={"Content-Type": "application/json"},
                        request=request)  # fmt: skip


def test_json_bodies_are_read_as_having_no_metadata_nor_links() -> None:
    for body in (b'{"a": 1}', b'{"error": "rate limited"}', b"[1, 2]", DEEP):
        page = _json(PAGE, body)
        assert published_time(page) is None
        assert page_aliases(page, PAGE) == ()
        content = read_source(_json(HUB, body))
        assert (content.kind, content.links) == ("json", [])
        assert content.error == "JSON, but not a JSON Feed"


def test_a_page_number_too_long_to_be_one_gives_no_next_page() -> None:
    assert numbered_next("http://news.test/s/?page=" + "9" * 5000) == []
    assert numbered_next("http://news.test/s/page/" + "9" * 5000 + "/") == []
    assert numbered_next("http://news.test/s/?page=41") == ["http://news.test/s/?page=42"]
    hub = HtmlResponse(
        "http://news.test/s/?page=" + "9" * 5000,
        body=b'<html><body><a href="/a/2">two</a><a rel="next" href="?page=x">more</a>'
        b"</body></html>",
        encoding="utf-8",
    )
    assert [link.url for link in read_source(hub).links] == ["http://news.test/a/2"]


def test_a_json_page_and_a_json_source_keep_their_items_and_are_recorded(tmp_path) -> None:
    crawler, runtime, clock = setup(ECHO_SOURCES=[HUB])
    middlewares = SpiderMiddlewares(crawler)
    inner: EchoSpiderMiddleware = middlewares.inner
    clock.now = 100.0
    runtime.observe(SourceFetched(HUB, 50.0, ()))
    (page,) = runtime.apply(SourceFetched(HUB, 100.0, ((PAGE, None),)))
    runtime.found([page])
    clock.now = 120.0
    meta = {"echo": {**page.meta(), "fetched": 120.0}}
    items = [{"title": "one"}]
    out = list(inner.process_spider_output(_json(PAGE, DEEP, meta), items))
    assert out == items  # the spider's item reached the engine
    assert runtime.state.already_fetched(PAGE)  # and the page is fetched, once
    source_meta = {"echo": {"kind": "source", "source": 0, "url": HUB, "fetched": 130.0}}
    out = list(inner.process_spider_output(_json(HUB, b'{"error": "x"}', source_meta), items))
    assert out == items
    assert crawler.stats.get_value("echo/sources/unreadable") == 1  # counted, as such


def test_whatever_fails_in_reading_a_response_the_spiders_items_go_on(tmp_path) -> None:
    # A response ECHO cannot make sense of (here meta another middleware broke: a fetch time
    # that is no time): counted as unexpected, the source's crawl recorded failed, and the
    # callback's output still reaches the engine.
    from scrapy_echo.core.unexpected import unexpected_counts

    crawler, runtime, clock = setup(ECHO_SOURCES=[HUB])
    inner = SpiderMiddlewares(crawler).inner
    clock.now = 100.0
    meta = {"echo": {"kind": "source", "source": 0, "url": HUB, "fetched": "soon"}}
    hub = HtmlResponse(HUB, body=b"<html><body></body></html>", encoding="utf-8",
                       request=Request(HUB, meta=meta))  # fmt: skip
    before = unexpected_counts().get("spider_middleware/ValueError", 0)
    items = [{"title": "kept"}]
    assert list(inner.process_spider_output(hub, items)) == items
    assert unexpected_counts()["spider_middleware/ValueError"] == before + 1
    assert runtime.state.sources[0].failures == 1
