"""End to end: the refresh lane in a real ``scrapy crawl`` of two sites, one whose articles
are edited every 4 seconds and one whose articles never change."""

from __future__ import annotations

import re
import time

import pytest

from tests.crawling import crawl
from tests.local_site import LocalNewsSite, Section
from tests.test_crawl import FAST
from tests.test_distributed_crawl import FAST as DISTRIBUTED
from tests.test_distributed_crawl import Workers

pytestmark = pytest.mark.slow


def refetches(site: LocalNewsSite) -> int:
    """Article fetches past each article's first."""
    return sum(n - 1 for path, n in site.hits.items() if re.match(r"^/a/", path))


def test_pages_that_change_are_refetched_and_the_callback_is_told(tmp_path) -> None:
    live = LocalNewsSite({"live": Section(period=2.0, edits=4.0)}, host="127.0.0.31").start()
    calm = LocalNewsSite({"calm": Section(period=2.0)}, host="127.0.0.32").start()
    try:
        run = crawl(
            tmp_path,
            {
                **FAST,
                "ECHO_SOURCES": f"{live.hub_url('live')},{calm.hub_url('calm')}",
                "ECHO_CRAWL_RATE": 12,
                "ECHO_DEFAULT_HALF_LIFE": 60,
                "ECHO_REFRESH_SHARE": 0.3,
                "ECHO_REFRESH_PRIOR_PERIOD": 20,  # (time runs fast: seconds for hours)
                "ECHO_REFRESH_SHORTEST": 1,
                "CLOSESPIDER_TIMEOUT": 25,
            },
        )
    finally:
        live.stop()
        calm.stop()
    assert run.returncode == 0, run.log[-3000:]
    refreshed = run.stats.get("echo/pages/refreshed", 0)
    assert refreshed > 0 and run.stats["echo/scheduler/dequeued/refresh"] >= refreshed
    # Every refetch reached the spider's page callback, flagged.
    assert run.stats["monitor/refreshed"] == refreshed
    assert refetches(live) + refetches(calm) == refreshed
    # Refetches of the edited site found changes; those of the other, none. (That the lane
    # then refetches the changing site more is tested on the model: test_refresh_lane.py; in
    # 25 s of crawl the counts are too few to compare without chance.)
    assert refetches(live) > 0 and refetches(calm) > 0
    assert 0 < run.stats["echo/refresh/changes"] <= refetches(live)
    # The plan's risks reach the stats: the chance a page's rate is over twice its estimate.
    assert 0 < run.stats["echo/refresh/underestimate_risk"] < 1
    # New pages still come first: most articles were found and fetched.
    published = live.published("live") + calm.published("calm")
    assert run.stats["echo/pages/crawled"] >= 0.6 * published


def test_no_refresh_share_means_no_refetch(tmp_path) -> None:
    site = LocalNewsSite({"live": Section(period=0.5, edits=1.0)}, host="127.0.0.33").start()
    try:
        run = crawl(
            tmp_path,
            {
                **FAST,
                "ECHO_SOURCES": site.hub_url("live"),
                "ECHO_CRAWL_RATE": 12,
                "ECHO_REFRESH_SHARE": 0,
                "CLOSESPIDER_TIMEOUT": 5,
            },
        )
    finally:
        site.stop()
    assert run.returncode == 0, run.log[-3000:]
    assert refetches(site) == 0 and "echo/pages/refreshed" not in run.stats


def test_the_refresh_lane_runs_across_distributed_workers(tmp_path, redis_url) -> None:
    live = LocalNewsSite({"live": Section(period=2.0, edits=4.0)}, host="127.0.0.34").start()
    calm = LocalNewsSite({"calm": Section(period=2.0)}, host="127.0.0.35").start()
    settings = {
        **DISTRIBUTED,
        "REDIS_URL": redis_url,
        "ECHO_REDIS_KEY_PREFIX": "refresh",
        "ECHO_SOURCES": f"{live.hub_url('live')},{calm.hub_url('calm')}",
        "ECHO_CRAWL_RATE": 12,
        "ECHO_DEFAULT_HALF_LIFE": 60,
        "ECHO_REFRESH_SHARE": 0.3,
        "ECHO_REFRESH_PRIOR_PERIOD": 20,
        "ECHO_REFRESH_SHORTEST": 1,
    }
    workers = Workers(tmp_path, settings)
    try:
        workers.start()
        workers.start()
        time.sleep(25)
        codes = workers.stop()
    finally:
        live.stop()
        calm.stop()
    assert codes == [0, 0], workers.logs()[-3000:]
    stats = workers.stats()
    total: dict[str, float] = {}
    for worker in stats:
        for key, value in worker.items():
            if isinstance(value, int | float):
                total[key] = total.get(key, 0) + value
    # The planner queued refetches; whichever worker leased one fetched it, and its report
    # (the page's digest) reached the planner's refresh lane.
    assert total.get("echo/planner/queued/refresh", 0) > 0
    refreshed = total.get("echo/pages/refreshed", 0)
    assert refreshed > 0 and total["echo/scheduler/dequeued/refresh"] >= refreshed
    assert total["monitor/refreshed"] == refreshed
    assert refetches(live) + refetches(calm) == refreshed
    assert refetches(live) > 0
    assert 0 < total["echo/refresh/changes"] <= refetches(live)
