"""Sources a crawl finds (a sitemap index's sitemaps, a robots.txt's) are capped per site
(``ECHO_MAX_SOURCES_PER_SITE``) and in all (``ECHO_MAX_FOUND_SOURCES``); those the operator
gives never are. Reproduced on the build of 2026-11-29: ``ECHO_MAX_SOURCES_PER_SOURCE`` capped
one response and the depth the nesting, but nothing a site or the crawl: a same-site sitemap
tree could add millions of sources, each with state and a crawl of its own."""

from __future__ import annotations

from scrapy_echo.core import CrawlCore, snapshot
from scrapy_echo.core.events import SourceAdded
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import SimSettings

SETTINGS = SimSettings(crawl_rate=1.0, max_sources_per_site=3, max_found_sources=5)


def _sitemaps(site: str, count: int, depth: int = 1) -> list[SourceAdded]:
    return [SourceAdded(f"http://www.{site}/sitemap-{i}.xml", depth) for i in range(count)]


def test_found_sources_stop_at_the_site_cap_and_the_crawl_cap() -> None:
    core = CrawlCore(SETTINGS, make_policy("echo-newpages"))
    core.configure_sources(["http://www.a.example/", "http://www.b.example/"])
    for event in _sitemaps("a.example", 10):
        core.apply(event)
    urls = {status.url for status in core.state.sources}
    assert sum("a.example/sitemap" in url for url in urls) == 3  # the site's cap
    assert core.sources_capped == 7
    for event in _sitemaps("b.example", 10, depth=2):
        core.apply(event)
    found = [status for status in core.state.sources if status.depth]
    assert len(found) == 5  # the crawl's cap: 3 of a, 2 of b
    assert core.sources_capped == 7 + 8
    # Known sources listed again, and sources the operator gives, are never refused.
    core.apply(_sitemaps("a.example", 1)[0])
    core.apply(SourceAdded("http://www.a.example/given-sitemap.xml"))
    assert core.status_of("http://www.a.example/given-sitemap.xml") is not None
    assert core.sources_capped == 15


def test_the_caps_hold_across_a_restart() -> None:
    core = CrawlCore(SETTINGS, make_policy("echo-newpages"))
    for event in _sitemaps("a.example", 3):
        core.apply(event)
    saved = snapshot.capture(core, 10.0, str).to_bytes()
    state, _, _ = snapshot.restore(core.config, snapshot.read(saved), str)
    again = CrawlCore(core.config, make_policy("echo-newpages"), state=state)
    again.apply(SourceAdded("http://www.a.example/sitemap-99.xml", 1))
    assert (
        again.sources_capped == 1 and again.status_of("http://www.a.example/sitemap-99.xml") is None
    )
