"""Capacity where it matters most: eight loopback hosts, where the three that publish the
valuable articles allow one request per 2 s and the five others one per 0.5 s, under a budget
of 4 requests/s that the hosts together could take three times over; one fast host dies
mid-crawl. The slow hosts' few turns must go to their best new pages and their hubs' due
recrawls, the budget left to the fast hosts. ECHO against the paper's BFS hand-rolled in
stock Scrapy (no budget: it may send what every host allows)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.crawling import crawl
from tests.local_site import LocalNewsSite, Section
from tests.test_crawl import FAST
from tests.test_fleet_politeness import shortest_gaps
from tests.test_politeness import Hosts

pytestmark = pytest.mark.slow

SLOW, FAST_HOSTS = [f"127.0.0.{n}" for n in (41, 42, 43)], [f"127.0.0.{n}" for n in range(44, 49)]
SLOW_DELAY, FAST_DELAY = 2.0, 0.5
DURATION = 90.0
DIES_AFTER = 20.0  # the last fast host answers 503 from then on
BUDGET = 4.0
# The slow hosts publish valuable stories and, four times as often, cheap wire copy: their few
# turns are worth most on the stories.
VALUABLE = {
    "top": Section(period=2.0, profit=20.0, decay=0.05, hub_items=20),
    "wire": Section(period=0.5, profit=0.5, decay=0.05, hub_items=20),
}
CHEAP = {"misc": Section(period=0.5, profit=1.0, decay=0.05, hub_items=20)}


class Site(Hosts):
    """The eight hosts, their click feed and what they were sent (see test_politeness)."""

    def __init__(self) -> None:
        self.sites = [LocalNewsSite(VALUABLE, host=host).start() for host in SLOW] + [
            LocalNewsSite(
                CHEAP, host=host, dies_after=DIES_AFTER if host == FAST_HOSTS[-1] else None
            ).start()
            for host in FAST_HOSTS
        ]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sources(self) -> list[str]:
        return [site.hub_url(name) for site in self.sites for name in site.sections]

    def profit(self) -> float:
        """What the articles published from 1 s into the crawl to 3 s before its end were
        still worth when first fetched."""
        start = self.first_hit()
        return sum(s.profit_caught(start + 1.0, start + DURATION - 3.0) for s in self.sites)


@pytest.fixture
def sites() -> Iterator[list[Site]]:
    made: list[Site] = []
    yield made
    for site in made:
        site.stop()


def polite() -> dict[str, object]:
    return {
        "DOWNLOAD_DELAY": FAST_DELAY,
        "DOWNLOAD_DELAY_JITTER": 0,
        "DOWNLOAD_SLOTS": {host: {"delay": SLOW_DELAY} for host in SLOW},
        "CONCURRENT_REQUESTS": 16,
        "ROBOTSTXT_OBEY": True,
        "CLOSESPIDER_TIMEOUT": DURATION,
    }


def test_the_slow_hosts_turns_go_to_their_best_pages_and_echo_beats_stock_bfs(
    tmp_path, sites
) -> None:
    echo_site = Site()
    sites.append(echo_site)
    feed = tmp_path / "clicks.jsonl"
    feed.touch()
    echo_site.write_clicks(feed)
    echo = crawl(
        tmp_path,
        {
            **FAST,
            **polite(),
            "ECHO_SOURCES": ",".join(echo_site.sources()),
            "ECHO_CRAWL_RATE": BUDGET,
            "ECHO_CLICK_FEED": str(feed),
            "ECHO_SOURCE_MAX_FAILURES": 3,
        },
        timeout=DURATION + 60,
    )
    assert echo.returncode == 0, echo.log[-3000:]
    echo_site.stop()

    bfs_site = Site()
    sites.append(bfs_site)
    bfs = crawl(
        tmp_path,
        {**polite(), "ECHO_ENABLED": False},
        spider="bfs",
        sources=",".join(bfs_site.sources()),
        timeout=DURATION + 60,
    )
    assert bfs.returncode == 0, bfs.log[-3000:]
    bfs_site.stop()

    for site in echo_site.sites:  # polite, host by host
        times = sorted(t for t, _ in site.hit_log)
        delay = SLOW_DELAY if site.host in SLOW else FAST_DELAY
        assert shortest_gaps(times, delay) == [], site.host

    start = echo_site.first_hit()
    slow_used = sum(
        sum(1 for t, _ in site.hit_log if t > start + 5) for site in echo_site.sites[:3]
    ) / (3 * (DURATION - 5) / SLOW_DELAY)
    echo_profit, bfs_profit = echo_site.profit(), bfs_site.profit()
    print(
        f"slow valuable hosts: echo {echo_profit:.1f}, bfs {bfs_profit:.1f} "
        f"({echo_profit / max(bfs_profit, 1e-9):.2f}x); slow hosts' turns used {slow_used:.2f}; "
        f"echo requests {sum(len(s.hit_log) for s in echo_site.sites)}, "
        f"bfs {sum(len(s.hit_log) for s in bfs_site.sites)}"
    )
    # Measured 1.94x and 1.35x in two runs (0.27x before the slow hosts' turns were planned):
    # the early plan, made before the clicks tell the sections apart, varies from run to run.
    # With the re-solves on the reactor, 1.22x in one CI run (below this), 1.67x and 1.74x;
    # with the solve on a thread, 1.51x to 1.92x in four runs (one beside two simulations).
    assert echo_profit >= 1.25 * bfs_profit, (echo_profit, bfs_profit)
