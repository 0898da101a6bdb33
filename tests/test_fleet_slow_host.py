"""A fleet on one host whose pages answer slowly: three ``scrapy crawl`` workers on one real
redis-server, one loopback host of six sections, half its articles answering after 8 s, a
budget of 4 requests/s that the host allows (16 requests at a time, no delay). The fleet must
spend at least 0.8 of the budget, whichever worker holds the host; and when Redis restarts
(its append-only file brings every key back), the 20 s after it at least 0.8 of the 20 s
before."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import RedisServer
from tests.local_site import LocalNewsSite, Section
from tests.test_distributed_crawl import FAST, Workers, request_rate

pytestmark = pytest.mark.slow

RATE = 4.0
DURATION = 45.0
SLOW = (0.5, 8.0)  # half the articles answer after 8 s
CONCURRENCY = 16  # what the host takes at a time: 4/s of pages 4 s long on average, doubled
SECTIONS = {f"s{i}": Section(period=0.8, hub_items=200) for i in range(6)}


@pytest.fixture
def site() -> Iterator[LocalNewsSite]:
    made = LocalNewsSite(SECTIONS, slow=SLOW).start()
    yield made
    made.stop()


def _settings(site: LocalNewsSite, url: str, duration: float) -> dict[str, object]:
    return {
        **FAST,
        "REDIS_URL": url,
        "ECHO_REDIS_KEY_PREFIX": f"t{uuid.uuid4().hex[:8]}",
        "ECHO_SOURCES": ",".join(site.hub_url(name) for name in SECTIONS),
        "ECHO_CRAWL_RATE": RATE,
        "DOWNLOAD_DELAY": 0,
        "CONCURRENT_REQUESTS": 32,
        "CONCURRENT_REQUESTS_PER_DOMAIN": CONCURRENCY,
        "DOWNLOAD_TIMEOUT": 30,
        "CLOSESPIDER_TIMEOUT": duration,
    }


def test_a_fleet_spends_the_budget_a_slow_host_allows(tmp_path, site, redis_server) -> None:
    workers = Workers(tmp_path, _settings(site, redis_server.url, DURATION))
    for _ in range(3):
        workers.start()
    started = time.time()
    time.sleep(DURATION)
    workers.stop()
    rate = request_rate(site, started + 10.0, started + DURATION - 2.0)
    print(f"requests/s {rate:.2f} of {RATE:g}")
    assert rate >= 0.8 * RATE, rate


def test_after_a_redis_restart_a_fleet_on_a_slow_host_keeps_its_pace(tmp_path, site) -> None:
    server = RedisServer(tmp_path, appendonly=True)
    try:
        workers = Workers(tmp_path, _settings(site, server.url, 70.0))
        for _ in range(3):
            workers.start()
        time.sleep(30.0)
        server.restart()
        restarted = time.time()
        time.sleep(25.0)
        workers.stop()
    finally:
        server.stop()
    before = request_rate(site, restarted - 20.0, restarted)
    after = request_rate(site, restarted, restarted + 20.0)
    print(f"requests/s: {before:.2f} in the 20 s before the restart, {after:.2f} after")
    assert after >= 0.8 * before, (before, after)
