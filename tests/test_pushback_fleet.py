"""Hosts that push back, crawled by a fleet: two ``scrapy crawl`` workers on one real
redis-server against :mod:`tests.pushback_site` (a host that answers 429 with
``Retry-After: 12`` to requests closer than 1 s, one with a 15 s outage of 503s asking for
4 s, a paginated hub, a control), Scrapy's retries on as a new project has them, and leases
of 1 s: a refused request's retry waits longer than ten of them.

What it asks, as the one-process test (``test_pushback.py``) does: no request reaches a host
inside a ``Retry-After`` it announced, whichever worker sends it (Scrapy's retries of the
refused request included); and each article is served once, not fetched again by a worker
whose lease ran out while its retry waited.
"""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest

from tests.pushback_site import PushbackSite
from tests.test_distributed_crawl import FAST, Workers

pytestmark = pytest.mark.slow

DURATION = 60.0
CUTOFF = DURATION - 10.0
_ARTICLE = re.compile(r"^/a/\d+\.html$")


@pytest.fixture
def site() -> Iterator[PushbackSite]:
    made = PushbackSite(retry_after=12.0, outage_retry_after=4.0).start()
    yield made
    made.stop()


def test_a_fleet_keeps_each_hosts_retry_after_and_fetches_each_article_once(
    tmp_path, site, redis_server
) -> None:
    settings = {
        **FAST,
        "REDIS_URL": redis_server.url,
        "ECHO_REDIS_KEY_PREFIX": f"t{uuid.uuid4().hex[:8]}",
        "ECHO_SOURCES": ",".join(site.sources()),
        "ECHO_CRAWL_RATE": 4,
        "DOWNLOAD_DELAY": 0.25,
        "DOWNLOAD_DELAY_JITTER": 0,
        "RETRY_ENABLED": True,  # (Scrapy retries 429 and 503 at once)
        "ECHO_REDIS_LEASE_TIMEOUT": 1,
        "CLOSESPIDER_TIMEOUT": DURATION,
    }
    workers = Workers(tmp_path, settings)
    workers.start()
    workers.start()
    time.sleep(DURATION + 5)
    workers.stop()
    inside = site.inside_windows()
    coverage = site.coverage(CUTOFF)
    served = Counter(
        (hit.host, hit.path)
        for name in ("rate_limited", "outage", "paginated", "control")
        for hit in site.hits(name)
        if hit.status == 200 and _ARTICLE.match(hit.path)
    )
    twice = {key: n for key, n in served.items() if n > 1}
    for name, covered in coverage.items():
        print(f"{name}: {covered} ({covered.share:.0%}); inside Retry-After {inside[name]}; "
              f"statuses {site.statuses(name)}")  # fmt: skip
    print(f"articles served more than once: {twice}")
    assert site.statuses("rate_limited").get(429, 0) >= 1  # (it pushed back)
    assert inside == dict.fromkeys(inside, 0), inside
    assert not twice, twice
    assert coverage["control"].share >= 0.9, coverage["control"]
