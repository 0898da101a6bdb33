"""A live crawl with change-indicating signals (seed 002): sixteen sections publishing at random
times (one article every 16 s each, on average), a budget that polls each hub only every 10 s or
so, and a signal feed that names a section's hub when it publishes (recall 0.8) and at random
(precision 0.8). The same crawl runs at the same time against a twin site without the feed; the
one with signals must catch 1.2 times the profit (it caught 1.36 to 1.53 times in four runs)."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from tests.crawling import CrawlRun, crawl
from tests.local_site import LocalNewsSite, Section
from tests.test_crawl import FAST

pytestmark = pytest.mark.slow

DURATION = 90.0  # s of crawl
LEARNING = 30.0  # s before profit counts: the crawl learns the signals' quality first
MEAN_GAP = 16.0  # s between a section's articles, on average (Poisson)
PROFITS = (8.0, 6.0, 5.0, 4.0, 3.0, 3.0, 2.0, 2.0, 1.5, 1.5, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5)


def sections(seed: int) -> dict[str, Section]:
    rng = random.Random(seed)
    made = {}
    for n, profit in enumerate(PROFITS):
        times, t = [], 0.0
        while t < DURATION + 10.0:
            t += rng.expovariate(1.0 / MEAN_GAP)
            times.append(t)
        made[f"s{n}"] = Section(period=None, profit=profit, decay=0.15, times=tuple(times))
    return made


def run(tmp_path: Path, site: LocalNewsSite, signals: bool, out: dict[str, CrawlRun]) -> None:
    work = tmp_path / ("with" if signals else "without")
    work.mkdir()
    clicks = work / "clicks.jsonl"
    clicks.touch()
    site.write_clicks(clicks)
    settings = {
        **FAST,
        "ECHO_SOURCES": ",".join(site.hub_url(name) for name in site.sections),
        "ECHO_CRAWL_RATE": 2.0,
        "ECHO_CLICK_FEED": str(clicks),
        "CLOSESPIDER_TIMEOUT": DURATION,
    }
    if signals:
        feed = work / "signals.jsonl"
        feed.touch()
        site.write_signals(feed, recall=0.8, precision=0.8, seed=7)
        settings |= {"ECHO_SIGNAL_FEED": str(feed), "ECHO_SIGNAL_POLL_INTERVAL": 0.2}
    out["with" if signals else "without"] = crawl(work, settings, timeout=DURATION + 60)


def test_noisy_signals_catch_more_profit_than_the_same_crawl_without(tmp_path):
    layout = sections(seed=3)
    sites = {
        True: LocalNewsSite(layout, host="127.0.0.21").start(),
        False: LocalNewsSite(layout, host="127.0.0.22").start(),
    }
    runs: dict[str, CrawlRun] = {}
    try:
        threads = [
            threading.Thread(target=run, args=(tmp_path, site, signals, runs))
            for signals, site in sites.items()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for site in sites.values():
            site.stop()
    for name in ("with", "without"):
        assert runs[name].returncode == 0, runs[name].log[-3000:]
    stats = runs["with"].stats
    assert stats["echo/signalfeed/rows"] > 0
    assert stats["echo/signalfeed/source"] > 0
    assert "echo/signalfeed/rows" not in runs["without"].stats

    def caught(site: LocalNewsSite) -> float:
        return site.profit_caught(site.started + LEARNING, site.started + DURATION - 3.0)

    with_signals, without = caught(sites[True]), caught(sites[False])
    print(
        f"signals: profit {with_signals:.1f} with, {without:.1f} without "
        f"({with_signals / max(without, 1e-9):.2f}x); "
        f"hub fetches {sum(sites[True].hits[f'/s/{n}/'] for n in layout)} with, "
        f"{sum(sites[False].hits[f'/s/{n}/'] for n in layout)} without"
    )
    assert with_signals >= 1.2 * without, (with_signals, without)
