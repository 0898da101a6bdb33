"""End to end: real ``scrapy crawl`` runs of a user's spider against a local news site."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator

import pytest

from tests.crawling import crawl, start_crawl
from tests.local_site import LocalNewsSite, Section

# Time runs fast here: seconds stand for the paper's minutes.
FAST = {
    "ECHO_RESOLVE_INTERVAL": 1,
    "ECHO_CLICK_PUSH_PERIOD": 1,
    "ECHO_CLICK_BIN": 0.5,
    "ECHO_CLICK_BINS": 40,
    "ECHO_FAILURE_BACKOFF": 1,
    "LOG_LEVEL": "INFO",
}


@pytest.fixture
def site_factory() -> Iterator[type[LocalNewsSite]]:
    started: list[LocalNewsSite] = []

    def make(sections: dict[str, Section]) -> LocalNewsSite:
        site = LocalNewsSite(sections).start()
        started.append(site)
        return site

    yield make  # type: ignore[misc]
    for site in started:
        site.stop()


@pytest.mark.slow
def test_new_pages_found_and_busy_source_recrawled_more_than_dead_one(tmp_path, site_factory):
    site = site_factory({"busy": Section(period=0.5), "dead": Section(period=None)})
    run = crawl(
        tmp_path,
        {
            **FAST,
            "ECHO_SOURCES": f"{site.hub_url('busy')},{site.hub_url('dead')}",
            "ECHO_CRAWL_RATE": 5,
            "CLOSESPIDER_TIMEOUT": 8,
            "ECHO_LOG_INTERVAL": 1,
        },
    )
    assert run.returncode == 0, run.log[-3000:]
    assert run.stats["finish_reason"] == "closespider_timeout"
    published = site.published("busy")
    crawled = site.article_hits("busy")
    assert run.stats["echo/pages/crawled"] == crawled
    assert crawled >= 0.6 * published, (crawled, published)
    assert run.stats["item_scraped_count"] == crawled  # new pages went to the spider's parse
    # The scheduler woke the engine through Scrapy's private hook (runtime.wake_engine).
    assert run.stats.get("echo/scheduler/wakes", 0) > 0
    assert "echo/scheduler/wake_unavailable" not in run.stats
    busy_hub, dead_hub = site.hits["/s/busy/"], site.hits["/s/dead/"]
    assert busy_hub > 1.5 * dead_hub, (busy_hub, dead_hub)  # BFS would split them evenly
    # The dead hub answers its recrawls with 304s: crawls that cost next to nothing.
    assert run.stats.get("echo/sources/not_modified", 0) >= 1
    # The status line's figures are stats too (the last line's, a second before the end).
    assert run.stats["echo/status/budget"] == 5
    assert 2.5 <= run.stats["echo/status/rate"] <= 6.0
    assert run.stats["echo/status/scheduled"] + run.stats["echo/status/idle"] == 2
    assert "ECHO: " in run.log and "requests/s of a budget of 5.00" in run.log


def test_rate_budget_is_kept(tmp_path, site_factory):
    sections = {f"s{i}": Section(period=0.3) for i in range(6)}
    site = site_factory(sections)
    run = crawl(
        tmp_path,
        {
            **FAST,
            "ECHO_SOURCES": ",".join(site.hub_url(name) for name in sections),
            "ECHO_CRAWL_RATE": 8,
            "CLOSESPIDER_TIMEOUT": 8,
        },
    )
    assert run.returncode == 0, run.log[-3000:]
    requests = sum(site.hits.values()) - site.hits["304"]
    # Work is always available (20 new pages a second, 6 hubs), so the budget binds.
    assert 0.8 * 8 * 8 <= requests <= 1.1 * 8 * 8 + 8, requests


@pytest.mark.slow
def test_high_click_source_gets_shorter_interval_than_equal_rate_low_click_one(
    tmp_path, site_factory
):
    site = site_factory(
        {
            "hot": Section(period=1.0, profit=50.0, decay=0.3),
            "cold": Section(period=1.0, profit=0.5, decay=0.3),
        }
    )
    # Two new pages a second against a budget of three: one crawl a second is left for the
    # hubs, and how it is split between them is the schedule under test.
    feed = tmp_path / "clicks.jsonl"
    site.write_clicks(feed)
    run = crawl(
        tmp_path,
        {
            **FAST,
            "ECHO_SOURCES": f"{site.hub_url('hot')},{site.hub_url('cold')}",
            "ECHO_CLICK_FEED": str(feed),
            "ECHO_CRAWL_RATE": 3,
            "CLOSESPIDER_TIMEOUT": 20,
        },
    )
    assert run.returncode == 0, run.log[-3000:]
    assert run.stats["echo/clickfeed/rows"] > 0
    # Once clicks have told them apart (the first seconds are a cold start for both):
    learned = site.started + 8
    hot, cold = site.hits_since("/s/hot/", learned), site.hits_since("/s/cold/", learned)
    assert hot > 1.5 * cold, (hot, cold)
    assert site.article_hits("hot") > site.article_hits("cold")


@pytest.mark.slow
def test_bad_click_rows_are_counted_not_fatal(tmp_path, site_factory):
    site = site_factory({"busy": Section(period=0.5)})
    feed = tmp_path / "clicks.jsonl"
    bad = [
        "{not json",
        json.dumps({"url": "ftp://x/y", "ts": 1, "clicks": 1}),
        json.dumps({"url": site.url + "/a/busy/0.html", "ts": "yesterday", "clicks": 1}),
        json.dumps({"url": site.url + "/a/busy/0.html", "ts": 1, "clicks": -3}),
        json.dumps([1, 2, 3]),
    ]
    site.write_clicks(feed, extra_lines=bad)
    run = crawl(
        tmp_path,
        {
            **FAST,
            "ECHO_SOURCES": site.hub_url("busy"),
            "ECHO_CLICK_FEED": str(feed),
            "ECHO_CRAWL_RATE": 5,
            "CLOSESPIDER_TIMEOUT": 5,
        },
    )
    assert run.returncode == 0, run.log[-3000:]
    assert run.stats["finish_reason"] == "closespider_timeout"
    assert run.stats["echo/clickfeed/invalid"] == len(bad)
    assert run.stats["echo/clickfeed/rows"] > 0  # the good rows after them still count


def test_bad_setting_stops_the_crawl_with_the_rule(tmp_path, site_factory):
    site = site_factory({"busy": Section(period=0.5)})
    run = crawl(
        tmp_path,
        {"ECHO_SOURCES": site.hub_url("busy"), "ECHO_CRAWL_RATE": -1, "CLOSESPIDER_TIMEOUT": 5},
    )
    assert "ECHO_CRAWL_RATE ('-1') must be a finite number > 0" in run.log
    assert site.hits.total() == 0


@pytest.mark.slow
def test_kill_9_then_restart_resumes_from_jobdir(tmp_path, site_factory):
    site = site_factory({"busy": Section(period=0.5), "slow": Section(period=2.0)})
    jobdir = tmp_path / "job"
    settings = {
        **FAST,
        "ECHO_SOURCES": f"{site.hub_url('busy')},{site.hub_url('slow')}",
        "ECHO_CRAWL_RATE": 5,
        "ECHO_CHECKPOINT_INTERVAL": 0.5,
        "JOBDIR": str(jobdir),
    }
    process = start_crawl(tmp_path / "killed.json", settings)
    checkpoint = jobdir / "echo-state.json"
    deadline = time.time() + 60
    while time.time() < deadline and not (checkpoint.exists() and site.article_hits("busy") >= 6):
        time.sleep(0.2)
    time.sleep(1.0)  # at least one more checkpoint after those crawls
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    killed_at = time.time()
    assert checkpoint.exists()
    time.sleep(1.6)  # the busy hub publishes three stories while nothing runs
    restarted_at = time.time()

    run = crawl(tmp_path, {**settings, "CLOSESPIDER_TIMEOUT": 4})
    assert run.returncode == 0, run.log[-3000:]
    assert "resumed from" in run.log
    # Stories published while the crawler was down are new to the resumed crawl. Without the
    # checkpoint its first hub crawl would take them for old links and never fetch them.
    gap = [
        f"/a/busy/{i}.html"
        for i in range(site.published("busy"))
        if killed_at < site.published_at("busy", i) < restarted_at
    ]
    assert len(gap) >= 2
    assert all(path in site.first_fetch for path in gap), (gap, sorted(site.first_fetch))
    # At most the last checkpoint period is lost: only pages crawled in it are fetched again.
    refetched = [path for path, n in site.hits.items() if path.startswith("/a/") and n > 1]
    assert len(refetched) <= 8, refetched
    assert run.stats["echo/jobdir/saves"] >= 1
