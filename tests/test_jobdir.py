"""JOBDIR checkpoints: a round trip of the whole state, requests in flight saved (and a real
crawl killed with them in flight), saved requests that no longer fit skipped, and a damaged
file set aside."""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest_twisted
import scrapy
from scrapy import Request
from scrapy.utils.test import get_crawler

from scrapy_echo.core import snapshot
from scrapy_echo.crawler.extension import EchoExtension
from scrapy_echo.crawler.jobdir import FILE_NAME
from scrapy_echo.crawler.runtime import EchoRuntime
from scrapy_echo.crawler.scheduler import EchoScheduler


class Spider(scrapy.Spider):
    name = "unit"

    def parse(self, response: Any) -> Any:
        return []


def open_scheduler(jobdir: str, feed: str, spider: type[scrapy.Spider] = Spider) -> EchoScheduler:
    settings = {
        "ADDONS": {"scrapy_echo.Addon": 0},
        "JOBDIR": jobdir,
        "ECHO_SOURCES": ["http://a.test/", "http://b.test/"],
        "ECHO_CLICK_FEED": feed,
    }
    crawler = get_crawler(spider, settings)
    crawler.spider = crawler._create_spider()
    runtime = EchoRuntime.of(crawler)
    runtime.clock = lambda: 1000.0
    EchoExtension(crawler, runtime)  # creates the feed reader the checkpoint restores
    scheduler = EchoScheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    return scheduler


def page(url: str, source: int) -> Request:
    meta = {"kind": "page", "source": source, "page": url, "appeared": 900.0,
            "discovered": 950.0, "window": (800.0, 950.0)}  # fmt: skip
    return Request(url, callback=None, meta={"echo": meta})


def test_checkpoint_round_trip(tmp_path) -> None:
    feed = tmp_path / "clicks.jsonl"
    feed.write_text('{"url": "http://a.test/x", "ts": 990, "clicks": 2}\n')
    first = open_scheduler(str(tmp_path / "job"), str(feed))
    state = first.state
    state.source_dispatched(0, 940.0)
    state.source_crawled(0, 900.0, ["http://a.test/old"])
    state.source_crawled(0, 950.0, ["http://a.test/old", "http://a.test/x"])
    state.sources[1].etag = '"v7"'
    state.source_dispatched(1, 990.0)
    state.page_crawled("http://a.test/s", 0, 950.0, 960.0, ("http://a.test/2026/s-slug",))
    first.enqueue_request(page("http://a.test/x", 0))
    first.enqueue_request(Request("http://a.test/plain"))
    assert len(first.runtime.click_intake.readers[0].read()) == 1
    state.signals.add(1, 995.0)  # a signal waiting on b.test, and what past ones showed
    state.signals.crawled(0, 50.0, 1)
    # A page the refresh lane may fetch again, and a hub seen overflowing.
    state.refresh.fetched("https://a.test/s", url="http://a.test/s", group=0, source=0,
                          appeared=950.0, t=960.0, digest="d1")  # fmt: skip
    state.overflow.overflows[0] = 3
    first.close("shutdown")

    second = open_scheduler(str(tmp_path / "job"), str(feed))
    restored = second.state
    saved, back = state.signals.to_data(), restored.signals.to_data()
    assert saved.keys() == back.keys() and back["received"] == 1
    for name in saved:
        np.testing.assert_array_equal(back[name], saved[name])
    assert [s.url for s in restored.sources] == ["http://a.test/", "http://b.test/"]
    assert restored.sources[1].etag == '"v7"'
    (tracked,) = restored.refresh.pages.values()  # (planned again since: its interval set)
    assert (tracked.url, tracked.fetched, tracked.digest) == ("http://a.test/s", 960.0, "d1")
    assert restored.overflow.overflows[0] == 3
    assert restored.last_crawl.tolist() == [940.0, 990.0]
    assert restored.source_crawled(0, 1000.0, ["http://a.test/x", "http://a.test/y"]) == [
        "http://a.test/y"  # links seen before the restart are not new
    ]
    # Page identity survives: the page and its alias are fetched, whatever the scheme.
    assert restored.already_fetched("https://a.test/2026/s-slug")
    assert restored.already_fetched("http://a.test/s")
    assert not restored.already_fetched("http://a.test/x")
    assert len(restored.frontier) == 1
    assert restored.frontier.pages()[0].page.url == "http://a.test/x"
    assert [r.url for r in second.plain] == ["http://a.test/plain"]
    assert second.runtime.click_intake.readers[0].read() == []  # the feed resumes where it was
    # The history for reports goes on: the first run's opening sample, then this run's, with
    # the new link found in between.
    assert [sample["new_links"].tolist() for sample in restored.history] == [[0, 0], [1, 0]]
    second.close("shutdown")


def test_history_is_thinned_keeping_its_span_and_newest_sample(tmp_path) -> None:
    from scrapy_echo.core.history_samples import HISTORY_LIMIT

    state = open_scheduler(str(tmp_path / "job"), str(tmp_path / "c.jsonl")).state
    state.history.clear()
    for t in range(3 * HISTORY_LIMIT):
        state.record(float(t), budget=1.0)
    times = [sample["t"] for sample in state.history]
    assert len(times) <= HISTORY_LIMIT
    assert times[-1] == 3 * HISTORY_LIMIT - 1 and times[0] < HISTORY_LIMIT / 2


def test_unreadable_checkpoint_is_moved_aside(tmp_path, caplog) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / FILE_NAME).write_bytes(b"not a pickle")
    with caplog.at_level(logging.ERROR, logger="scrapy_echo.crawler.jobdir"):
        scheduler = open_scheduler(str(job), str(tmp_path / "clicks.jsonl"))
    assert "unreadable" in caplog.text
    assert list(job.glob(f"{FILE_NAME}.unreadable-*"))
    assert len(scheduler.state.sources) == 2  # a fresh start from the settings
    scheduler.close("shutdown")
    assert (job / FILE_NAME).exists()  # and a good checkpoint written at close


DATA = Path(__file__).parent / "data"


def test_a_snapshot_of_this_format_version_loads(tmp_path) -> None:
    """``tests/data/echo-state-v<VERSION>.json`` was written by this format version
    (``tests/data/make_echo_state.py``); the build must resume from it."""
    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(DATA / f"echo-state-v{snapshot.VERSION}.json", job / FILE_NAME)
    scheduler = open_scheduler(str(job), str(tmp_path / "clicks.jsonl"))
    state = scheduler.state
    assert [s.url for s in state.sources] == ["http://a.test/", "http://b.test/"]
    assert state.sources[1].etag == '"v7"'
    assert state.last_crawl.tolist() == [940.0, 990.0]
    assert state.crawled_pages == 1
    assert state.learner.clicks_caught == 3.0  # the click at 970 s, after the fetch at 960 s
    (waiting,) = state.frontier.pages()
    assert waiting.page.url == "http://a.test/y"
    assert (
        waiting.page.extras == '{"headers": {"Referer": ["http://a.test/"]}, "meta": {"depth": 1}}'
    )
    assert [r.url for r in scheduler.plain] == ["http://a.test/plain"]
    assert state.source_crawled(0, 1000.0, ["http://a.test/x", "http://a.test/z"]) == [
        "http://a.test/z"
    ]
    estimates = state.learner.estimates(1000.0)
    assert np.isfinite(estimates.link_rate).all() and np.isfinite(estimates.profit).all()
    scheduler.close("shutdown")


def test_a_resumed_crawl_keeps_what_its_policy_kept(tmp_path) -> None:
    """The policy's own state (here BFS's cycle: its order and where it stands) is part of the
    checkpoint: a resumed crawl goes on with the cycle, it does not draw a new one."""
    settings = {
        "ADDONS": {"scrapy_echo.Addon": 0},
        "JOBDIR": str(tmp_path / "job"),
        "ECHO_SOURCES": [f"http://{host}.test/" for host in "abcdef"],
        "ECHO_POLICY": "bfs",
        "ECHO_POLITENESS": False,
    }

    def opened() -> EchoScheduler:
        crawler = get_crawler(Spider, settings)
        crawler.spider = crawler._create_spider()
        EchoRuntime.of(crawler).clock = lambda: 1000.0
        scheduler = EchoScheduler.from_crawler(crawler)
        scheduler.open(crawler.spider)
        return scheduler

    first = opened()
    for _ in range(9):  # every source once (first crawls), then BFS's cycle begins
        assert first.next_request() is not None
    kept = first.runtime.policy.to_data()
    assert kept["next"] > 0
    first.close("shutdown")
    second = opened()
    assert second.runtime.policy.to_data() == kept
    second.close("shutdown")


def test_an_earlier_builds_checkpoint_is_set_aside_naming_its_version(tmp_path, caplog) -> None:
    """Before the first release an earlier format is not read: the crawl starts afresh and
    says which version it found (the file is kept beside, for the user)."""
    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(DATA / "echo-state-v2.json", job / FILE_NAME)
    with caplog.at_level(logging.ERROR):
        scheduler = open_scheduler(str(job), str(tmp_path / "clicks.jsonl"))
    assert "version 2" in caplog.text and f"reads version {snapshot.VERSION} only" in caplog.text
    assert list(job.glob(f"{FILE_NAME}.unreadable-*"))
    assert scheduler.state.crawled_pages == 0 and len(scheduler.state.sources) == 2
    scheduler.close("shutdown")


@pytest_twisted.ensureDeferred
async def test_a_periodic_save_is_written_on_a_thread_and_the_newest_checkpoint_wins(
    tmp_path,
) -> None:
    scheduler = open_scheduler(str(tmp_path / "job"), str(tmp_path / "c.jsonl"))
    state = scheduler.state
    state.source_crawled(0, 900.0, ["http://a.test/old"])
    reactor_thread = threading.get_ident()
    writers: list[int] = []
    write = scheduler.checkpointer._write

    def spy(*args: Any) -> bool:
        writers.append(threading.get_ident())
        return write(*args)

    scheduler.checkpointer._write = spy  # type: ignore[method-assign]
    written = scheduler.checkpointer.save()
    assert written is not None
    # The crawl goes on while the thread writes: what it sees now is not in this checkpoint.
    state.source_crawled(0, 950.0, ["http://a.test/old", "http://a.test/new"])
    await written
    assert writers and writers[0] != reactor_thread
    saved = snapshot.read((tmp_path / "job" / FILE_NAME).read_bytes())
    assert saved["sources"][0].new_links == 0
    assert scheduler.crawler.stats.get_value("echo/jobdir/saves") == 1

    # An older capture written after a newer one is dropped: the file keeps the newest.
    older = scheduler.checkpointer._capture()
    scheduler.close("shutdown")  # captures and writes the newest state at once
    assert older is not None
    assert not scheduler.checkpointer._write(*older)
    assert scheduler.crawler.stats.get_value("echo/jobdir/saves") == 2
    assert snapshot.read((tmp_path / "job" / FILE_NAME).read_bytes())["sources"][0].new_links == 1


@pytest_twisted.ensureDeferred
async def test_a_failed_save_is_logged_and_counted_and_the_loop_goes_on(tmp_path, caplog) -> None:
    job = tmp_path / "job"
    scheduler = open_scheduler(str(job), str(tmp_path / "c.jsonl"))
    scheduler.checkpointer.path = tmp_path / "a-file" / FILE_NAME
    (tmp_path / "a-file").write_text("not a directory")
    with caplog.at_level(logging.ERROR, logger="scrapy_echo.crawler.jobdir"):
        await scheduler.checkpointer.save()
    assert "failed" in caplog.text
    assert scheduler.crawler.stats.get_value("echo/jobdir/failed_saves") == 1
    scheduler.checkpointer.path = job / FILE_NAME
    await scheduler.checkpointer.save()
    assert (job / FILE_NAME).exists()


def test_seen_links_expire_across_a_restart(tmp_path) -> None:
    day = 86400.0
    first = open_scheduler(str(tmp_path / "job"), str(tmp_path / "c.jsonl"))
    first.state.source_crawled(0, 900.0, ["http://a.test/0"])
    first.state.source_crawled(0, 950.0, ["http://a.test/0", "http://a.test/1"])
    first.close("shutdown")

    second = open_scheduler(str(tmp_path / "job"), str(tmp_path / "c.jsonl"))
    state = second.state
    later = 950.0 + 31 * day  # a month on: 0 and 1 are no longer listed, 2 is
    assert state.source_crawled(0, later, ["http://a.test/2"]) == ["http://a.test/2"]
    for job in state.housekeeping(later + 5 * day):
        job.done(job.work())
    assert state.source_crawled(0, later + 5 * day, ["http://a.test/1", "http://a.test/2"]) == [
        "http://a.test/1"  # forgotten, so new again; 2 was seen 5 days ago
    ]
    second.close("shutdown")
