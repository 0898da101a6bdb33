"""End to end on a site that shows each article under several URLs, through feeds, a robots.txt
-> sitemap index -> gzipped news sitemap chain, and a feed on another host."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.crawling import crawl
from tests.real_site import SITE_HOST, RealSite
from tests.test_crawl import FAST

pytestmark = pytest.mark.slow


@pytest.fixture
def real_site() -> Iterator[RealSite]:
    site = RealSite(period=0.5).start()
    yield site
    site.stop()


def test_every_listed_article_fetched_once_and_every_click_attributed(tmp_path, real_site):
    site = real_site
    feed = tmp_path / "clicks.jsonl"
    feed.touch()
    site.write_clicks(feed)
    run = crawl(
        tmp_path,
        {
            **FAST,
            # A source that is gone (404) besides: retired after 3 failures in a row.
            "ECHO_SOURCES": ",".join([*site.sources(), f"{site.base}/gone.xml"]),
            "ECHO_SOURCE_MAX_FAILURES": 3,
            "ECHO_LOG_INTERVAL": 1,
            "ECHO_ALLOWED_HOSTS": site.base.split("//")[1].split(":")[0],
            "ECHO_CLICK_FEED": str(feed),
            "ECHO_CRAWL_RATE": 20,
            "CLOSESPIDER_TIMEOUT": 12,
        },
    )
    assert run.returncode == 0, run.log[-3000:]
    stats = run.stats
    # Every kind of source was read for what it is.
    for kind in ("rss", "atom", "robots", "sitemap-index", "news-sitemap"):
        assert stats.get(f"echo/sources/kind/{kind}", 0) >= 1, (kind, stats)
    assert stats["echo/sources/found"] >= 2  # the index, then the gzipped news sitemap
    assert "echo/sources/unreadable" not in stats
    # Too few sources to tell whether sites explain rates: none borrows from its site's.
    assert stats["echo/sources/site_share"] == 0.0
    # Every article listed long enough for a source recrawl to see it was fetched, once:
    # under one URL, though the sources list it under four (short link, slug, parameters).
    listed = site.published(site.started + 12 - 3)
    assert listed >= 10
    fetched = [site.article_hits(a) for a in range(listed)]
    assert all(n == 1 for n in fetched), fetched
    assert max(site.article_hits(a) for a in range(site.published())) == 1
    # Comment feeds are never taken for articles.
    assert site.paths_hit("/comments/") == 0
    # Clicks under the final URL, over https, with a newsletter parameter: all attributed.
    assert stats["echo/clickfeed/matched_rows"] > 0
    assert stats.get("echo/clickfeed/unmatched_rows", 0) == 0
    assert stats["echo/clickfeed/rows"] == stats["echo/clickfeed/matched_rows"]
    # Scrapy's own scheduler stats are there for dashboards, and agree with ECHO's lanes.
    kinds = ("source", "page", "refresh", "followup", "plain")
    lanes = sum(stats.get(f"echo/scheduler/dequeued/{k}", 0) for k in kinds)
    assert stats["scheduler/dequeued"] == stats["scheduler/dequeued/memory"] == lanes > 0
    assert stats["scheduler/enqueued"] >= stats["echo/scheduler/enqueued/page"]
    # The gone source cost three requests, then none.
    assert site.hits[f"{SITE_HOST} /gone.xml"] == 3
    assert stats["echo/sources/retired"] == 1 and stats["echo/status/retired"] == 1
    # Pages reached by a short link recorded where they landed.
    assert stats.get("echo/pages/aliases", 0) >= 1
    assert stats["echo/pages/crawled"] == sum(site.article_hits(a) for a in range(listed + 30))
