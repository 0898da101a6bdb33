"""Bursts past a hub's first page, crawled by a fleet: the two hubs of
``test_burst_pages_live.py`` (12 articles at a time every 10 s, 5 a page with ``rel="next"``)
crawled by three ``scrapy crawl`` workers on one real redis-server, at the same budget and
delay. A worker without the crawl state cannot tell whether a hub overflowed: it sends the
page's next page with its links, and the planner decides by the rule the one-process crawl
follows (:mod:`scrapy_echo.core.hub_paging`) and queues the next page. At least 90% of the
articles published after the first crawl of their hub are fetched, whichever worker read it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.burst_site import BurstSite
from tests.test_burst_pages_live import CUTOFF, DELAY, DURATION, SECTIONS, SHARE
from tests.test_distributed_crawl import FAST, Workers

pytestmark = pytest.mark.slow


@pytest.fixture
def site() -> Iterator[BurstSite]:
    made = BurstSite(SECTIONS).start()
    yield made
    made.stop()


def test_a_fleet_finds_a_burst_past_the_first_page(tmp_path, site, redis_server) -> None:
    settings = {
        **FAST,
        "REDIS_URL": redis_server.url,
        "ECHO_REDIS_KEY_PREFIX": f"t{uuid.uuid4().hex[:8]}",
        "ECHO_SOURCES": ",".join(site.sources()),
        "ECHO_CRAWL_RATE": 4,
        "DOWNLOAD_DELAY": DELAY,
        "DOWNLOAD_DELAY_JITTER": 0,
        "CLOSESPIDER_TIMEOUT": DURATION,
    }
    workers = Workers(tmp_path, settings)
    for _ in range(3):
        workers.start()
    codes = [proc.wait(timeout=DURATION + 60) for proc in workers.procs]  # (CLOSESPIDER_TIMEOUT)
    workers.stop()
    assert codes == [0, 0, 0], workers.logs()[-3000:]
    stats = workers.stats()
    unmet = []
    for name in SECTIONS:
        first = site.page_hits(name, 1)[0]
        owed = site.published_between(name, first.at + 1e-6, CUTOFF)
        found = site.fetched(name) & set(owed)
        pages = [len(site.page_hits(name, page)) for page in (2, 3)]
        print(f"{name}: found {len(found)}/{len(owed)}; pages 2 and 3 read {pages} times")
        assert len(owed) >= 36, name  # (three bursts of 12: the site made the case)
        if len(found) < SHARE * len(owed):
            unmet.append(f"{name}: {len(found)}/{len(owed)} found, under {SHARE:.0%}")
    read_on = sum(s.get("echo/sources/next_pages", 0) for s in stats)
    print(f"next pages the fleet read on to: {read_on}")
    assert not unmet, unmet
    assert read_on > 0
