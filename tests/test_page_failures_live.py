"""New pages whose fetch fails are tried again: a real ``scrapy crawl`` of a local site whose
every article fails twice before it answers (first no answer within ``DOWNLOAD_TIMEOUT``,
then a 503), with Scrapy's retries off as the test project has them, so that each failure
reaches the plugin. Every article published after the first crawl of its hub (and early
enough for three tries) is fetched, none given up (``echo/pages/given_up``), and the
failures are counted (``echo/pages/failed``). Before, a page whose last try failed was never
fetched: its link stayed seen and nothing put it back."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.crawling import crawl
from tests.local_site import LocalNewsSite, Section
from tests.test_crawl import FAST

pytestmark = pytest.mark.slow

DURATION = 40.0
TIMEOUT = 2.0  # DOWNLOAD_TIMEOUT: the first try of each article waits longer than this
SECTIONS = {"news": Section(period=1.5), "sport": Section(period=2.5)}


@pytest.fixture
def site() -> Iterator[LocalNewsSite]:
    made = LocalNewsSite(SECTIONS, flaky=("timeout", "503"), flaky_sleep=TIMEOUT + 1).start()
    yield made
    made.stop()


def _owed_and_missed(site: LocalNewsSite, started: float) -> tuple[int, list[str]]:
    """The articles owed (published after the first crawl of their hub, and at least 15 s
    before the end: a timeout, a back-off, a 503, a longer back-off, then the answer), and
    those of them never fetched."""
    owed, missed = 0, []
    for name in SECTIONS:
        hub = site.hub_url(name).split(str(site.port), 1)[1]
        first_crawl = min(t for t, path in site.hit_log if path == hub)
        for index in range(site.published(name, started + DURATION)):
            born = site.published_at(name, index)
            if first_crawl < born <= started + DURATION - 15.0:
                owed += 1
                if f"/a/{name}/{index}.html" not in site.first_fetch:
                    missed.append(f"{name}/{index}")
    return owed, missed


def test_an_article_that_fails_twice_is_fetched_the_third_time(tmp_path, site) -> None:
    settings = {
        **FAST,
        "ECHO_SOURCES": ",".join(site.hub_url(name) for name in SECTIONS),
        "ECHO_CRAWL_RATE": 8,
        "DOWNLOAD_TIMEOUT": TIMEOUT,
        "CLOSESPIDER_TIMEOUT": DURATION,
    }
    started = time.time()
    run = crawl(tmp_path, settings, timeout=DURATION + 60)
    assert run.returncode == 0, run.log[-3000:]
    owed, missed = _owed_and_missed(site, started)
    failed, given_up = run.stats.get("echo/pages/failed", 0), run.stats.get("echo/pages/given_up")
    print(f"owed {owed}, missed {missed}; echo/pages/failed {failed}, given up {given_up}")
    assert owed >= 20  # (the site made the case)
    assert len(missed) <= 0.01 * owed, missed
    assert failed >= 2 * (owed - len(missed))  # two failures each, counted
    assert given_up == 0


def test_a_fleet_tries_a_failed_page_again_on_any_worker(tmp_path, site, redis_server) -> None:
    # The same site crawled by two workers on one redis-server: a worker's failed fetch
    # reaches the planner as an event, and the page is queued again (under an id of its own:
    # Redis remembers the failed try's as done).
    from tests.test_distributed_crawl import FAST as FLEET
    from tests.test_distributed_crawl import Workers

    settings = {
        **FLEET,
        "ECHO_FAILURE_BACKOFF": 1,
        "REDIS_URL": redis_server.url,
        "ECHO_REDIS_KEY_PREFIX": f"t{time.time_ns()}",
        "ECHO_SOURCES": ",".join(site.hub_url(name) for name in SECTIONS),
        "ECHO_CRAWL_RATE": 8,
        "DOWNLOAD_TIMEOUT": TIMEOUT,
        "CLOSESPIDER_TIMEOUT": DURATION,
    }
    started = time.time()
    workers = Workers(tmp_path, settings)
    workers.start()
    workers.start()
    codes = [proc.wait(timeout=DURATION + 60) for proc in workers.procs]
    workers.stop()
    assert codes == [0, 0], workers.logs()[-3000:]
    owed, missed = _owed_and_missed(site, started)
    failed = sum(stats.get("echo/pages/failed", 0) for stats in workers.stats())
    print(f"fleet: owed {owed}, missed {missed}; echo/pages/failed {failed}")
    assert owed >= 20
    assert len(missed) <= 0.01 * owed, missed
