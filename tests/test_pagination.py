"""Paginated hubs: where a hub continues (the documented rule), its next page kept out of the
hub's links, and a next page's links taken into the crawl that read it, not as a crawl."""

from __future__ import annotations

import math

import pytest
from scrapy.http import HtmlResponse

from scrapy_echo.core import CrawlCore
from scrapy_echo.core.events import SourceFetched, from_json, to_json
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import SimSettings
from scrapy_echo.sources.outlinks import read_source
from scrapy_echo.sources.pagination import next_page

HUB = "https://news.test/world/"


def _page(body: str, url: str = HUB) -> HtmlResponse:
    return HtmlResponse(url, body=f"<html><head>{body}</head></html>".encode(), encoding="utf-8")


@pytest.mark.parametrize(
    ("html", "url", "expected"),
    [
        ('<link rel="next" href="?page=2">', HUB, HUB + "?page=2"),
        ('<a rel="prev next" href="/world/p2">more</a>', HUB, "https://news.test/world/p2"),
        ('<a href="/world/?page=2">2</a><a href="/world/?page=3">3</a>', HUB, HUB + "?page=2"),
        ('<a href="/world/page/2/">older</a>', HUB, HUB + "page/2/"),
        ('<a href="?page=3">3</a><a href="?page=2">2</a>', HUB + "?page=2", HUB + "?page=3"),
        ('<a href="/world/page/3">next</a>', HUB + "page/2/", HUB + "page/3"),
        # Not on the hub's host, not the hub itself, not a guess from words: no next page.
        ('<link rel="next" href="https://other.test/world/?page=2">', HUB, None),
        ('<a rel="next" href="/world/">again</a>', HUB, None),
        ('<a href="/world/older">Older stories</a>', HUB, None),
        (
            '<a rel="next" href="http://[::1">broken</a><a href="?page=2">2</a>',
            HUB,
            HUB + "?page=2",
        ),
    ],
)
def test_the_next_page_by_the_documented_rule(html: str, url: str, expected: str | None) -> None:
    assert next_page(_page(f"</head><body>{html}</body><head>", url)) == expected


def test_the_next_page_is_part_of_the_source_not_one_of_its_links() -> None:
    body = (
        '<link rel="next" href="/world/?page=2"></head><body>'
        '<a href="/world/a1">one</a><a href="/world/?page=2">2</a><head>'
    )
    content = read_source(_page(body))
    assert content.next_page == HUB + "?page=2"
    assert [link.url for link in content.links] == ["https://news.test/world/a1"]


def _core() -> CrawlCore:
    return CrawlCore(SimSettings(crawl_rate=1.0, backlog="skip"), make_policy("echo-newpages"))


def _crawl(t: float, *urls: str, continued: bool = False) -> SourceFetched:
    return SourceFetched(HUB, t, tuple((url, None) for url in urls), continued=continued)


def test_a_next_pages_links_are_pages_of_the_crawl_that_read_it() -> None:
    core = _core()
    core.apply(_crawl(100.0, HUB + "old"))
    first = core.apply(_crawl(200.0, HUB + "n1", HUB + "n2"))
    more = core.apply(_crawl(201.0, HUB + "n2", HUB + "n3", HUB + "old", continued=True))
    status = core.state.sources[0]
    assert [page.url for page in first] == [HUB + "n1", HUB + "n2"]
    assert [page.url for page in more] == [HUB + "n3"]  # the others were seen
    # In the window of the crawl that read it, not a crawl: λ sees two crawls.
    assert more[0].window == (100.0, 200.0) and more[0].appeared == 150.0
    assert status.crawls == 2 and status.next_pages == 1 and status.new_links == 3
    assert status.last_fetched == 200.0  # (a next page moves no crawl time)


def test_a_next_page_of_a_source_never_crawled_adds_nothing() -> None:
    core = _core()
    assert core.apply(_crawl(101.0, HUB + "b", continued=True)) == []
    assert core.state.sources[0].next_pages == 0 and math.isnan(core.state.last_crawl[0])


def test_continued_goes_through_the_journal() -> None:
    event = _crawl(5.0, HUB + "x", continued=True)
    assert from_json(to_json(event)) == event
    assert not from_json(to_json(_crawl(5.0, HUB + "x"))).continued
