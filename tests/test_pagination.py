"""Paginated hubs: where a hub continues (the documented rule), its next page kept out of the
hub's links, and a next page's links taken into the crawl that read it, not as a crawl."""

from __future__ import annotations

import math

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse

from scrapy_echo.core import CrawlCore
from scrapy_echo.core.events import SourceFetched, from_json, to_json
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import SimSettings
from scrapy_echo.sources.outlinks import read_source
from scrapy_echo.sources.pagination import next_page
from tests.test_middlewares import SpiderMiddlewares, setup

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


# -- when a crawl reads on: through the spider middlewares, on a hub with navigation ---------

WORLD = "http://news.test/world/"
NAV = ["/", "/world/", "/sport/"]  # home (a page), the hub itself and another section (sources)


def _recrawl(source: int) -> Request:
    """A crawl of the hub, as the scheduler sends it."""
    return Request(WORLD, meta={"echo": {"kind": "source", "source": source, "url": WORLD}})


class _Hub(SpiderMiddlewares):
    """ECHO's pair of spider middlewares: a hub page's trip through both gives the new pages
    it revealed and the request for the hub's next page, if the crawl reads on."""

    def read(
        self, request: Request, articles: list[str], at: float, *, more: bool = True
    ) -> tuple[list[str], Request | None]:
        request.meta["echo"]["fetched"] = at
        page = int(request.url.partition("?page=")[2] or 1)
        head = f'<link rel="next" href="?page={page + 1}">' if more else ""
        links = "".join(f'<a href="{href}">x</a>' for href in [*NAV, *articles])
        body = f"<html><head>{head}</head><body>{links}</body></html>".encode()
        response = HtmlResponse(request.url, body=body, encoding="utf-8", request=request)
        self.found = []
        out = list(
            self.outer.process_spider_output(
                response, self.inner.process_spider_output(response, [])
            )
        )
        assert len(out) <= 1
        return [r.url.rsplit("/", 1)[1] for r in self.found], out[0] if out else None


def test_a_crawl_reads_on_when_the_hub_overflowed_whatever_navigation_it_shows() -> None:
    crawler, runtime, _ = setup(ECHO_BACKLOG="skip")
    source = runtime.state.add_source(WORLD)
    runtime.state.add_source("http://news.test/sport/")
    hub = _Hub(crawler)

    def crawl(articles: list[str], at: float) -> tuple[list[str], Request | None]:
        return hub.read(_recrawl(source), articles, at)

    # The first crawl: backlog (a0 and a1 only on its next page), never read on.
    assert crawl(["a6", "a5", "a4", "a3", "a2"], 100.0) == ([], None)
    # One new link: the overflow watch knows no content of the hub yet, so its first page
    # cannot tell, and the next is read; it stops at a2, which the hub showed before, and
    # what it lists past a2 (a1, a0: backlog the first crawl did not see) is no new page.
    found, more = crawl(["a7", "a6", "a5", "a4", "a3"], 200.0)
    assert found == ["a7"] and more is not None and more.url == WORLD + "?page=2"
    assert hub.read(more, ["a2", "a1", "a0"], 201.0) == ([], None)
    # a7 (content now) is still listed: complete, nothing to read on.
    assert crawl(["a8", "a7", "a6", "a5", "a4"], 300.0) == (["a8"], None)
    # A burst: neither a8 nor a7 is listed, the hub overflowed. Its second page shows b4,
    # pushed down while the first was read (of this crawl, not shown before), then b3 to b1,
    # then a8, where it stops.
    found, more = crawl(["b9", "b8", "b7", "b6", "b5"], 400.0)
    assert found == ["b9", "b8", "b7", "b6", "b5"] and more is not None
    found, again = hub.read(more, ["b4", "b3", "b2", "b1", "a8"], 401.0)
    assert found == ["b4", "b3", "b2", "b1"] and again is None
    # A burst of eleven: pages 2 and 3, all new but navigation, and page 3 stops at b9.
    found, more = crawl([f"c{i}" for i in range(11, 6, -1)], 500.0)
    assert more is not None
    found, more = hub.read(more, [f"c{i}" for i in range(6, 1, -1)], 501.0)
    assert found == ["c6", "c5", "c4", "c3", "c2"] and more is not None
    found, more = hub.read(more, ["c1", "b9", "b8"], 502.0)
    assert found == ["c1"] and more is None
    assert crawler.stats.get_value("echo/sources/next_pages") == 4  # (1, 1 and 2)
    assert runtime.state.sources[source].crawls == 5  # (next pages are no crawls)


def test_a_next_page_past_echo_max_next_pages_is_cut() -> None:
    crawler, runtime, _ = setup(ECHO_MAX_NEXT_PAGES=1)
    source = runtime.state.add_source(WORLD)
    hub = _Hub(crawler)
    hub.read(_recrawl(source), ["a2", "a1"], 100.0)
    _, more = hub.read(_recrawl(source), ["b2", "b1"], 200.0)
    assert more is not None
    assert hub.read(more, ["b0", "b-1"], 201.0) == (["b0", "b-1"], None)
    assert crawler.stats.get_value("echo/sources/next_pages_cut") == 1
