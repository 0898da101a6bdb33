"""Per-host politeness on a site of five hosts (127.0.0.11-15: five download slots), each
allowing one request per 0.5 s and publishing faster than that: the crawl budget (10/s) is
reachable only by spreading requests over the hosts. One host dies mid-crawl; one host's
robots.txt forbids one of its sections. ECHO against the paper's BFS hand-rolled in stock
Scrapy, under the same politeness settings."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crawling import crawl
from tests.local_site import LocalNewsSite, Section
from tests.test_crawl import FAST

pytestmark = pytest.mark.slow

HOSTS = [f"127.0.0.{n}" for n in range(11, 16)]
DELAY = 0.5  # s between requests to one host
DURATION = 30.0  # s of crawl
DIES_AFTER = 10.0  # s after the site starts, the last host answers 503 to everything
SECTIONS = {
    # Three articles a second per host, worth very different amounts: more than one host's
    # two requests a second can fetch, so what to fetch first matters.
    "top": Section(period=2.0, profit=20.0, decay=0.05),
    "news": Section(period=2.0, profit=5.0, decay=0.05),
    "misc": Section(period=1.0, profit=1.0, decay=0.05),
    "blog": Section(period=1.0, profit=0.3, decay=0.05),
}
POLITE = {
    "DOWNLOAD_DELAY": DELAY,
    "DOWNLOAD_DELAY_JITTER": 0,
    "CONCURRENT_REQUESTS": 16,
    "ROBOTSTXT_OBEY": True,
    "CLOSESPIDER_TIMEOUT": DURATION,
}


class Hosts:
    def __init__(self) -> None:
        self.sites = [
            LocalNewsSite(
                SECTIONS,
                host=host,
                disallow=("/s/blog/",) if n == 0 else (),
                dies_after=DIES_AFTER if n == len(HOSTS) - 1 else None,
            ).start()
            for n, host in enumerate(HOSTS)
        ]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sources(self) -> list[str]:
        return [site.hub_url(name) for site in self.sites for name in SECTIONS]

    def write_clicks(self, feed: Path) -> None:
        def loop() -> None:
            last = time.time()
            while not self._stop.wait(0.25):
                now = time.time()
                rows = [row for site in self.sites for row in site.click_rows(last, now)]
                with open(feed, "a", encoding="utf-8") as handle:
                    handle.writelines(json.dumps(row) + "\n" for row in rows)
                last = now

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def first_hit(self) -> float:
        return min(t for site in self.sites for t, _ in site.hit_log)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for site in self.sites:
            site.stop()


@pytest.fixture
def hosts_factory() -> Iterator[type[Hosts]]:
    made: list[Hosts] = []

    def make() -> Hosts:
        made.append(Hosts())
        return made[-1]

    yield make  # type: ignore[misc]
    for hosts in made:
        hosts.stop()


def profit(hosts: Hosts, start: float) -> float:
    """What the articles published from 1 s into the crawl to 3 s before its end were still
    worth when first fetched (later ones could not be fetched in time by anyone)."""
    return sum(site.profit_caught(start + 1.0, start + DURATION - 3.0) for site in hosts.sites)


JITTER = 0.15  # s a server-side stamp may lag the request's dispatch


def assert_spaced(times: list[float], host: str) -> None:
    for k in range(1, len(times)):
        shortest = min(b - a for a, b in zip(times, times[k:], strict=False))
        assert shortest >= k * DELAY - JITTER, (host, k, shortest)


def test_assert_spaced_catches_bursts_and_fast_rates() -> None:
    assert_spaced([0.0, 0.5, 1.0, 1.44, 2.0], "ok: one late stamp")
    with pytest.raises(AssertionError):
        assert_spaced([0.0, 0.5, 0.51, 1.5], "burst")
    with pytest.raises(AssertionError):
        assert_spaced([0.4 * n for n in range(20)], "0.4 s apart: faster than the delay")


def test_echo_spreads_over_hosts_keeps_their_delays_and_beats_stock_bfs(tmp_path, hosts_factory):
    echo_hosts = hosts_factory()
    feed = tmp_path / "clicks.jsonl"
    feed.touch()
    echo_hosts.write_clicks(feed)
    echo = crawl(
        tmp_path,
        {
            **FAST,
            **POLITE,
            "ECHO_SOURCES": ",".join(echo_hosts.sources()),
            "ECHO_CRAWL_RATE": len(HOSTS) / DELAY,
            "ECHO_CLICK_FEED": str(feed),
            "ECHO_SOURCE_MAX_FAILURES": 3,
        },
    )
    assert echo.returncode == 0, echo.log[-3000:]
    echo_hosts.stop()

    bfs_hosts = hosts_factory()
    bfs = crawl(
        tmp_path,
        {**POLITE, "ECHO_ENABLED": False},
        spider="bfs",
        sources=",".join(bfs_hosts.sources()),
    )
    assert bfs.returncode == 0, bfs.log[-3000:]
    bfs_hosts.stop()

    # Server-side, no host ever got requests faster than its delay allows. The server stamps
    # a request when it accepts the connection, and even that can come up to JITTER late on a
    # loaded machine (stamped later, when the handler thread ran, 0.159 s was seen in CI,
    # 2026-11-29): any run of k requests to one host spans at least (k - 1) delays less one
    # stamp's jitter. A burst (two requests at once) or a rate above the host's fails this at
    # every k.
    for site in echo_hosts.sites:
        assert_spaced(sorted(t for t, _ in site.hit_log), site.host)

    # The requests reached at least 0.8 of what the hosts allow: every host at its delay
    # while alive (the dead host's capacity counts until it died).
    start = echo_hosts.first_hit()
    end = max(t for site in echo_hosts.sites for t, _ in site.hit_log)
    span = end - start
    died = echo_hosts.sites[-1].started + DIES_AFTER
    attainable = ((len(HOSTS) - 1) * span + max(0.0, died - start)) / DELAY
    sent = sum(
        1
        for site in echo_hosts.sites
        for t, _ in site.hit_log
        if t < died or site.host != HOSTS[-1]
    )
    assert sent >= 0.8 * attainable, (sent, attainable, span)

    # More profit than the stock-Scrapy BFS by a quarter at least.
    echo_profit = profit(echo_hosts, start)
    bfs_profit = profit(bfs_hosts, bfs_hosts.first_hit())
    assert echo_profit >= 1.25 * bfs_profit, (echo_profit, bfs_profit)

    # The dead host's sources cost 3 failures each, then nothing.
    dead = echo_hosts.sites[-1]
    hub_hits_after = sum(
        1 for t, path in dead.hit_log if t >= died + 0.01 and path.startswith("/s/")
    )
    assert hub_hits_after <= 3 * len(SECTIONS), hub_hits_after
    assert echo.stats["echo/sources/retired"] == len(SECTIONS)

    # The forbidden section was never requested, was counted, and retired nothing.
    assert echo_hosts.sites[0].hits["/s/blog/"] == 0
    assert echo.stats.get("echo/sources/robots_blocked", 0) >= 1
    assert echo.stats.get("echo/scheduler/refunded", 0) >= 1
    print(
        f"politeness: echo profit {echo_profit:.1f}, bfs {bfs_profit:.1f} "
        f"({echo_profit / max(bfs_profit, 1e-9):.2f}x); requests {sent} of "
        f"{attainable:.0f} attainable ({sent / attainable:.2f})"
    )
