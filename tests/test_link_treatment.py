"""New pages get the same treatment by Scrapy's spider middlewares in one process and across
Redis: real ``scrapy crawl`` runs with a project's middleware that drops some links and tags
the rest, next to Scrapy's depth and referer middlewares."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.crawling import crawl
from tests.local_site import LocalNewsSite, Section

pytestmark = pytest.mark.slow

SECTIONS = {"busy": Section(period=0.4), "calm": Section(period=1.5)}
SETTINGS = {
    "ECHO_RESOLVE_INTERVAL": 1,
    "ECHO_CRAWL_RATE": 8,
    "ECHO_REFRESH_SHARE": 0,  # new pages only: every page response is a first fetch
    "CLOSESPIDER_TIMEOUT": 8,
    "SPIDER_MIDDLEWARES": {"monitor.middlewares.DropSomeLinks": 500},
    "ECHO_REDIS_META_ALLOW": "tag",  # (what a request in Redis may carry besides ECHO's)
}


@pytest.fixture
def site() -> Iterator[LocalNewsSite]:
    site = LocalNewsSite(SECTIONS).start()
    yield site
    site.stop()


@pytest.mark.parametrize("mode", ["one process", "redis"])
def test_new_pages_pass_the_spider_middlewares_in_both_modes(tmp_path, site, redis_url, mode):
    settings: dict[str, Any] = {
        **SETTINGS,
        "ECHO_SOURCES": ",".join(site.hub_url(name) for name in SECTIONS),
    }
    if mode == "redis":
        settings["REDIS_URL"] = redis_url
        settings["ECHO_REDIS_KEY_PREFIX"] = f"t{uuid.uuid4().hex[:8]}"
    run = crawl(tmp_path, settings)
    assert run.returncode == 0, run.log[-3000:]
    stats = run.stats
    pages = stats.get("item_scraped_count", 0)
    assert pages >= 10, stats
    # Every third article's request is dropped by the project's middleware: never fetched,
    # and the crawl counts what the middlewares dropped.
    assert "monitor/refused_fetched" not in stats
    assert stats.get("echo/links/dropped_by_middlewares", 0) > 0
    # Every page fetched carries what the middlewares added to its link's request: the
    # project's tag, Scrapy's depth (the source is 0) and Referer (the source's URL).
    assert stats.get("monitor/tagged") == pages
    assert stats.get("monitor/depth/1") == pages
    assert stats.get("monitor/referer_is_source") == pages
    assert stats.get("echo/pages/crawled") == pages
