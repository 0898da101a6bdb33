"""Hosts that push back, hubs that paginate: one 75 s crawl of the four hubs of
:mod:`tests.pushback_site` (a host that rate-limits with 429 and ``Retry-After``, one with a
15 s outage, one whose bursts overflow the first page of a paginated hub, a control), with a
budget of 4 requests/s and a 0.25 s download delay, Scrapy's retries on as a new project has
them and ``ECHO_FAILURE_BACKOFF`` at its default.

What it asks: no request reaches a host inside a ``Retry-After`` that host announced; at least
90% of each pushing-back section's articles are fetched; the control loses none; the crawl
reads hub pages past the first (``echo/sources/next_pages``). It prints the figures first.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.crawling import crawl
from tests.pushback_site import PushbackSite
from tests.test_crawl import FAST

pytestmark = pytest.mark.slow

DURATION = 75.0
# Articles published in the last 10 s may be listed after the crawl's last look at their hub:
# only those before this are owed.
CUTOFF = DURATION - 10.0
SHARE = 0.9
PUSHING_BACK = ("rate_limited", "outage", "paginated")


@pytest.fixture
def site() -> Iterator[PushbackSite]:
    made = PushbackSite().start()
    yield made
    made.stop()


def test_hosts_that_push_back_and_paginated_hubs_lose_no_articles(tmp_path, site) -> None:
    settings = {
        **FAST,
        "ECHO_SOURCES": ",".join(site.sources()),
        "ECHO_CRAWL_RATE": 4,
        "ECHO_LOG_INTERVAL": 5,
        "DOWNLOAD_DELAY": 0.25,
        "DOWNLOAD_DELAY_JITTER": 0,
        # The test project turns Scrapy's retries off; a new project has them on, and they
        # retry 429 and 503, which is where requests inside a Retry-After come from.
        "RETRY_ENABLED": True,
        "CLOSESPIDER_TIMEOUT": DURATION,
    }
    del settings["ECHO_FAILURE_BACKOFF"]  # FAST's 1 s would hide the back-off being measured
    run = crawl(tmp_path, settings, timeout=DURATION + 60)
    assert run.returncode == 0, run.log[-3000:]

    coverage, inside = site.coverage(CUTOFF), site.inside_windows()
    next_pages = run.stats.get("echo/sources/next_pages", 0)
    for name, covered in coverage.items():
        hubs = [hit for hit in site.hits(name) if hit.path == "/news/"]
        print(
            f"{name}: fetched {covered} ({covered.share:.0%}) of the articles published before "
            f"{CUTOFF:g} s; requests inside an announced Retry-After: {inside[name]}; "
            f"statuses {site.statuses(name)}; hub requested {len(hubs)} times, last "
            f"{max((hit.at for hit in hubs), default=0):.1f} s in; hub pages past the first "
            f"requested {sum(1 for hit in site.hits(name) if '?page=' in hit.path)}"
        )
    print(f"echo/sources/next_pages: {next_pages}")

    # The site pushed back as it should, else the figures below measure nothing.
    assert site.statuses("rate_limited").get(429, 0) >= 1
    assert site.statuses("outage").get(503, 0) >= 1
    assert len(coverage["paginated"].published) >= 36  # three bursts of 12
    assert min(len(coverage[name].published) for name in PUSHING_BACK) >= 10
    assert len(coverage["control"].published) >= 12

    # What the plugin must do, all listed when it falls short.
    unmet = [f"{name}: {n} requests inside Retry-After" for name, n in inside.items() if n]
    unmet += [
        f"{name}: {coverage[name]} fetched, under {SHARE:.0%}"
        for name in PUSHING_BACK
        if coverage[name].share < SHARE
    ]
    if coverage["control"].fetched != coverage["control"].published:
        unmet.append(f"control: {coverage['control']} fetched")
    if not next_pages > 0:
        unmet.append("no next hub page read (echo/sources/next_pages)")
    assert not unmet, unmet
