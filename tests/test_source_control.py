"""Sources added and removed while a crawl runs: the sources file, JOBDIR commands,
``scrapy echo-sources`` (JOBDIR and Redis), and a live crawl whose sources file changes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from scrapy_echo.core.events import SourceAdded, SourceRemoved, from_json
from scrapy_echo.inputs.source_control import (
    COMMANDS_FILE,
    SourcesFile,
    append_commands,
    pending_commands,
    take_commands,
)
from tests.crawling import crawl
from tests.local_site import LocalNewsSite, Section
from tests.test_crawl import FAST
from tests.test_scheduler import make_scheduler

SCRAPY = [sys.executable, "-m", "scrapy"]


def test_sources_file_changes_become_events(tmp_path: Path) -> None:
    path = tmp_path / "sources.txt"
    path.write_text("http://a.test/\nhttp://b.test/\n")
    watched = SourcesFile(path, ("http://a.test/", "http://b.test/"))
    assert watched.changes() == []  # unchanged
    path.write_text("# b is gone, c came\nhttp://a.test/\nhttp://c.test/\n")
    assert watched.changes() == [SourceAdded("http://c.test/"), SourceRemoved("http://b.test/")]
    path.write_text("http://a.test/\nnot a url\n")
    with pytest.raises(ValueError, match="line 2"):
        watched.changes()
    assert watched.urls == {"http://a.test/", "http://c.test/"}  # nothing half-applied


def test_jobdir_commands_are_taken_once_and_bad_lines_counted(tmp_path: Path) -> None:
    append_commands(tmp_path, "add", ["http://a.test/", "http://b.test/"])
    append_commands(tmp_path, "remove", ["http://a.test/"])
    with open(tmp_path / COMMANDS_FILE, "a") as handle:
        handle.write('{"op": "drop", "url": "http://x.test/"}\nnot json\n')
    assert pending_commands(tmp_path) == [
        ("add", "http://a.test/"),
        ("add", "http://b.test/"),
        ("remove", "http://a.test/"),
    ]
    taken = take_commands(tmp_path)
    assert taken.events == [
        SourceAdded("http://a.test/"),
        SourceAdded("http://b.test/"),
        SourceRemoved("http://a.test/"),
    ]
    assert taken.bad == 2
    assert take_commands(tmp_path).events == []  # taken once
    with pytest.raises(Exception, match="absolute http"):
        append_commands(tmp_path, "add", ["ftp://nope/"])


def test_scheduler_applies_removals_and_additions_from_the_jobdir(tmp_path: Path) -> None:
    scheduler, clock = make_scheduler(
        ECHO_SOURCES=["http://a.test/", "http://b.test/"], JOBDIR=str(tmp_path)
    )
    append_commands(tmp_path, "remove", ["http://b.test/"])
    append_commands(tmp_path, "add", ["http://c.test/"])
    scheduler.poll_sources()
    runtime = scheduler.runtime
    listed = {row["url"]: row["status"] for row in runtime.sources()}
    assert listed == {"http://a.test/": "active", "http://b.test/": "removed",
                      "http://c.test/": "active"}  # fmt: skip
    urls = set()
    for _ in range(6):
        request = scheduler.next_request()
        if request is not None:
            urls.add(request.url)
        clock.now += 1
    assert urls == {"http://a.test/", "http://c.test/"}  # the removed one is never crawled
    # Added again, it comes back (due now, as a new source).
    runtime.add_source("http://b.test/")
    assert {row["url"]: row["status"] for row in runtime.sources()}["http://b.test/"] == "active"
    assert scheduler.next_request().url == "http://b.test/"
    with pytest.raises(ValueError, match="absolute"):
        runtime.remove_source("b.test")
    scheduler.close("finished")


def test_echo_sources_command_on_a_jobdir(tmp_path: Path) -> None:
    scheduler, _ = make_scheduler(ECHO_SOURCES=["http://a.test/"], JOBDIR=str(tmp_path))
    scheduler.close("finished")  # saves the checkpoint
    add = subprocess.run(
        [*SCRAPY, "echo-sources", "--jobdir", str(tmp_path), "add", "http://new.test/"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert add.returncode == 0, add.stderr
    listed = subprocess.run(
        [*SCRAPY, "echo-sources", "--jobdir", str(tmp_path), "list", "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert {(r["url"], r["status"]) for r in rows} == {
        ("http://a.test/", "active"),
        ("http://new.test/", "pending add"),
    }
    bad = subprocess.run(
        [*SCRAPY, "echo-sources", "--jobdir", str(tmp_path), "remove", "nota-url"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert bad.returncode != 0 and "absolute http(s) URL" in bad.stderr


def test_echo_sources_command_sends_events_to_redis(redis_url: str) -> None:
    spider = f"cmd{time.time_ns()}"
    run = subprocess.run(
        [*SCRAPY, "echo-sources", "--redis", redis_url, "--spider", spider,
         "remove", "http://a.test/"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    entries = redis.Redis.from_url(redis_url).xrange(f"{{echo:{spider}}}:events")
    events = [from_json(json.loads(fields[b"d"])) for _, fields in entries]
    assert events == [SourceRemoved("http://a.test/")]


@pytest.mark.slow
def test_a_live_crawl_follows_its_sources_file(tmp_path: Path) -> None:
    site = LocalNewsSite({"one": Section(period=0.5), "two": Section(period=0.5)}).start()
    try:
        sources = tmp_path / "sources.txt"
        sources.write_text(site.hub_url("one") + "\n")
        swapped: list[float] = []

        def swap() -> None:  # 7 s in: "one" out, "two" in
            time.sleep(7)
            sources.write_text(site.hub_url("two") + "\n")
            swapped.append(time.time())

        thread = threading.Thread(target=swap, daemon=True)
        thread.start()
        run = crawl(
            tmp_path,
            {**FAST, "ECHO_SOURCES": str(sources), "ECHO_CRAWL_RATE": 5,
             "CLOSESPIDER_TIMEOUT": 16},
        )  # fmt: skip
        thread.join()
    finally:
        site.stop()
    assert run.returncode == 0, run.log[-3000:]
    changed = swapped[0] + 5.5  # the next poll (every 5 s), and a request in flight
    one = "/s/one/"
    assert site.hits_since(one, swapped[0] - 7) >= 2
    assert site.hits_since(one, changed) == 0
    assert site.hits_since("/s/two/", changed) >= 1
    assert run.stats["echo/sources/changes"] == 2


def test_the_report_counts_removed_sources_and_plans_nothing_for_them(tmp_path: Path) -> None:
    from scrapy_echo.commands.state_report import Report
    from scrapy_echo.core import snapshot
    from scrapy_echo.crawler.jobdir import FILE_NAME

    scheduler, _ = make_scheduler(
        ECHO_SOURCES=["http://a.test/", "http://b.test/"], JOBDIR=str(tmp_path)
    )
    learner = scheduler.runtime.state.learner
    for source in (0, 1):
        for k in range(8):
            learner.record_crawl(source, 100.0 * k, 0 if k == 0 else 1)
    scheduler.runtime.remove_source("http://b.test/")
    scheduler.close("finished")
    report = Report.from_snapshot(
        snapshot.read((tmp_path / FILE_NAME).read_bytes()), policy="echo-newpages", budget=1.0
    )
    assert report.summary()["removed"] == 1 and report.summary()["retired"] == 0
    rows = {row["url"]: row for row in report.source_rows()}
    assert rows["http://b.test/"]["status"] == "removed"
    assert rows["http://b.test/"]["interval"] == float("inf")
    assert rows["http://a.test/"]["interval"] < float("inf")
    assert "0 retired, 1 removed" in report.summary_text()


def test_distributed_workers_send_sources_file_changes_as_events(
    tmp_path: Path, redis_url: str
) -> None:
    """Each worker watches the file and sends what changed to the planner as events."""
    from scrapy.utils.test import get_crawler

    from scrapy_echo.distributed.scheduler import DistributedScheduler
    from tests.test_scheduler import Spider

    sources = tmp_path / "sources.txt"
    sources.write_text("http://a.test/\nhttp://b.test/\n")
    crawler = get_crawler(
        Spider,
        {"ADDONS": {"scrapy_echo.Addon": 0}, "REDIS_URL": redis_url,
         "ECHO_REDIS_KEY_PREFIX": f"files{time.time_ns()}", "ECHO_SOURCES": str(sources)},
    )  # fmt: skip
    crawler.spider = crawler._create_spider()
    scheduler = DistributedScheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    try:
        sent = [from_json(json.loads(e)) for e in scheduler.outbox.events]
        # (At its start, as its settings give them: no retired or removed one revived.)
        assert sent == [
            SourceAdded("http://a.test/", configured=True),
            SourceAdded("http://b.test/", configured=True),
        ]
        scheduler.outbox.events.clear()
        sources.write_text("http://a.test/\n")
        scheduler._poll_sources()
        sent = [from_json(json.loads(e)) for e in scheduler.outbox.events]
        assert sent == [SourceRemoved("http://b.test/")]
    finally:
        scheduler._sources_loop.stop()
        scheduler.io.stop()
