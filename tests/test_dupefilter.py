"""The one-process dupefilter: the spider's own requests remembered for ECHO_DUPEFILTER_TTL,
then let through again; memory bounded by one time to live of requests; the window kept in
JOBDIR across a restart, written with the checkpoints, and compacted."""

from __future__ import annotations

import hashlib
import logging
import tracemalloc
from pathlib import Path

import pytest
from scrapy import Request
from scrapy.dupefilters import RFPDupeFilter
from scrapy.utils.test import get_crawler

from scrapy_echo.crawler.dupefilter import EchoDupeFilter
from scrapy_echo.crawler.jobdir import FILE_NAME as CHECKPOINT
from scrapy_echo.crawler.seen_requests import SeenRequests
from scrapy_echo.crawler.seen_requests_file import COMPACT_ABOVE, FILE_NAME, HEADER
from tests.crawling import crawl
from tests.local_site import LocalNewsSite, Section
from tests.test_scheduler import Spider, make_scheduler

DAY = 86400.0


def seen_file(job: Path) -> list[str]:
    """The fingerprint lines of the JOBDIR file (its header checked)."""
    lines = (job / FILE_NAME).read_bytes().decode().splitlines(keepends=True)
    assert lines[0].encode() == HEADER
    return lines[1:]


def test_a_request_is_let_through_again_once_its_time_to_live_is_over() -> None:
    scheduler, clock = make_scheduler(ECHO_DUPEFILTER_TTL=3600)
    assert isinstance(scheduler.dupefilter, EchoDupeFilter)
    listing = "http://a.test/listing?page=2"
    assert scheduler.enqueue_request(Request(listing))
    clock.now += 3599.0
    assert not scheduler.enqueue_request(Request(listing))  # seen within the hour
    # Seen again does not renew it: an hour after it was let through, it is let through again.
    clock.now += 1.5
    assert scheduler.enqueue_request(Request(listing))
    assert not scheduler.enqueue_request(Request(listing))
    assert [r.url for r in scheduler.plain] == [listing, listing]
    scheduler.close("finished")
    stats = scheduler.crawler.stats
    assert stats.get_value("dupefilter/filtered") == 2
    assert stats.get_value("echo/dupefilter/forgotten") == 1
    assert stats.get_value("echo/dupefilter/remembered") == 1


def test_memory_holds_one_time_to_live_of_requests_however_many_came() -> None:
    scheduler, clock = make_scheduler(ECHO_DUPEFILTER_TTL=60)
    dupefilter = scheduler.dupefilter
    held = []
    for i in range(12_000):  # 10 requests a second for 20 minutes, 20 times the time to live
        clock.now += 0.1
        assert not dupefilter.request_seen(Request(f"http://a.test/item/{i}"))
        held.append(len(dupefilter.seen))
    assert max(held) <= 10 * 60 + 1  # one time to live (and one at its edge, by rounding)
    assert dupefilter.seen.forgotten == 12_000 - held[-1]
    scheduler.close("finished")


def test_only_the_live_fingerprints_take_memory() -> None:
    seen = SeenRequests(ttl=100.0)
    tracemalloc.start()
    try:
        for i in range(300_000):  # 100 a second for 50 times the time to live
            seen.add_new(hashlib.sha1(b"%d" % i).digest(), i / 100)
        used, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(seen) <= 100 * 101
    # Every fingerprint held would take some 30 MB; the live ones take under 2 MB (167 bytes
    # each at this size, where the set's table keeps room to grow; 95 with a million).
    assert used < 200 * len(seen), used / len(seen)


def test_the_window_survives_a_restart_and_the_file_holds_only_checkpointed_requests(
    tmp_path: Path,
) -> None:
    job = tmp_path / "job"
    first, clock = make_scheduler(JOBDIR=str(job), ECHO_DUPEFILTER_TTL=DAY)
    clock.now = 10_000.0
    assert first.enqueue_request(Request("http://a.test/old"))
    clock.now = 50_000.0
    assert first.enqueue_request(Request("http://a.test/checkpointed"))
    first.checkpointer.save_now()
    assert len(seen_file(job)) == 2
    # Let through after the last checkpoint: not on disk (its request is in no checkpoint,
    # so a crash now must not filter it for a day).
    assert first.enqueue_request(Request("http://a.test/unsaved"))
    assert len(seen_file(job)) == 2

    # A crash, then a restart a day after the first request: it is forgotten, the second
    # (and its request, restored from the checkpoint) is not, the unsaved one is let through.
    second, clock = make_scheduler(now=10_000.0 + DAY + 1.0, JOBDIR=str(job),
                                   ECHO_DUPEFILTER_TTL=DAY)  # fmt: skip
    assert [r.url for r in second.plain] == ["http://a.test/old", "http://a.test/checkpointed"]
    assert not second.enqueue_request(Request("http://a.test/checkpointed"))
    assert second.enqueue_request(Request("http://a.test/old"))
    assert second.enqueue_request(Request("http://a.test/unsaved"))
    second.close("shutdown")
    first.close("shutdown")  # (the crashed one's files, closed late)


def test_a_graceful_restart_keeps_the_window_with_its_times(tmp_path: Path) -> None:
    job = tmp_path / "job"
    first, clock = make_scheduler(JOBDIR=str(job), ECHO_DUPEFILTER_TTL=100)
    for i in range(5):
        clock.now = 1000.0 + 10 * i
        assert first.enqueue_request(Request(f"http://a.test/{i}"))
    first.close("shutdown")
    assert len(seen_file(job)) == 5

    second, clock = make_scheduler(JOBDIR=str(job), ECHO_DUPEFILTER_TTL=100)
    second.plain.clear()
    assert len(second.dupefilter.seen) == 5  # (the clock has not moved: all five live)
    clock.now = 1125.0  # 0 to 2 were let through 100 s ago or more, 3 and 4 not
    assert [second.enqueue_request(Request(f"http://a.test/{i}")) for i in range(5)] == [
        True, True, True, False, False
    ]  # fmt: skip
    second.close("shutdown")
    assert second.crawler.stats.get_value("echo/dupefilter/forgotten") == 3


def test_the_file_is_compacted_past_twice_its_live_lines(tmp_path: Path) -> None:
    job = tmp_path / "job"
    scheduler, clock = make_scheduler(JOBDIR=str(job), ECHO_DUPEFILTER_TTL=100)
    dupefilter = scheduler.dupefilter
    sizes = []
    for i in range(6 * COMPACT_ABOVE):  # 100 a second: 10,000 live at a time
        clock.now += 0.01
        dupefilter.request_seen(Request(f"http://a.test/{i}"))
        if i % 1000 == 999:
            scheduler.checkpointer.save_now()
            sizes.append(len(seen_file(job)))
    assert scheduler.crawler.stats.get_value("echo/dupefilter/compactions") >= 2
    assert max(sizes) <= 2 * 100 * 101 + 1000  # never past twice the live ones (and a period)
    live = len(dupefilter.seen)
    scheduler.close("shutdown")

    # The compacted file holds the same window: a restart reads back what was live (a line
    # written before the run of fingerprints sharing its time ended has the run's time so far:
    # those at the window's edge may go a run sooner).
    again, _ = make_scheduler(now=clock.now, JOBDIR=str(job), ECHO_DUPEFILTER_TTL=100)
    assert live - 2 <= len(again.dupefilter.seen) <= live
    last = 6 * COMPACT_ABOVE - 1
    assert again.dupefilter.request_seen(Request(f"http://a.test/{last}"))
    assert not again.dupefilter.request_seen(Request(f"http://a.test/{last - live - 200}"))
    again.close("shutdown")


def test_a_cut_last_line_and_a_damaged_one_are_skipped(tmp_path: Path, caplog) -> None:
    job = tmp_path / "job"
    job.mkdir()
    good = hashlib.sha1(b"x").hexdigest()
    (job / FILE_NAME).write_bytes(HEADER + f"{good} 990.0\nzz not-a-line\n{good[:12]}".encode())
    with caplog.at_level(logging.WARNING):
        scheduler, _ = make_scheduler(JOBDIR=str(job), ECHO_DUPEFILTER_TTL=100)
    assert list(scheduler.dupefilter.seen.newest(5)) == [(bytes.fromhex(good), 990.0)]
    assert scheduler.crawler.stats.get_value("echo/dupefilter/damaged_lines") == 1
    assert "cut short" in caplog.text and "1 damaged lines" in caplog.text
    assert (job / FILE_NAME).read_bytes().endswith(b"not-a-line\n")  # (cut: appends stay whole)
    scheduler.close("shutdown")


def test_a_file_of_another_format_goes_aside(tmp_path: Path, caplog) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / FILE_NAME).write_bytes(b"echo-requests-seen 9\n")
    with caplog.at_level(logging.ERROR):
        scheduler, _ = make_scheduler(JOBDIR=str(job))
    assert len(scheduler.dupefilter.seen) == 0
    assert len(list(job.glob(f"{FILE_NAME}.unreadable-*"))) == 1
    assert "starts empty" in caplog.text
    scheduler.close("shutdown")


def test_an_unreadable_checkpoint_takes_the_file_along(tmp_path: Path) -> None:
    job = tmp_path / "job"
    first, _ = make_scheduler(JOBDIR=str(job))
    assert first.enqueue_request(Request("http://a.test/plain"))
    first.close("shutdown")
    (job / CHECKPOINT).write_text("{not json")
    # The request's checkpoint is lost: remembering it would keep it from the crawl.
    second, _ = make_scheduler(JOBDIR=str(job))
    assert not second.plain
    assert second.enqueue_request(Request("http://a.test/plain"))
    assert len(list(job.glob(f"{FILE_NAME}.unreadable-*"))) == 1
    second.close("shutdown")


def test_the_addon_sets_the_dupefilter_unless_the_project_has_its_own() -> None:
    addon = {"ADDONS": {"scrapy_echo.Addon": 0}}
    ours = "scrapy_echo.dupefilter.EchoDupeFilter"
    assert get_crawler(Spider, addon).settings["DUPEFILTER_CLASS"] == ours
    theirs = {**addon, "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter"}
    scheduler, _ = make_scheduler(**theirs)
    assert type(scheduler.dupefilter) is RFPDupeFilter
    scheduler.close("finished")
    # Distributed mode remembers in Redis (its done set): Scrapy's default is left alone.
    redis = get_crawler(Spider, {**addon, "REDIS_URL": "redis://127.0.0.1:1/0"})
    assert redis.settings["DUPEFILTER_CLASS"] == "scrapy.dupefilters.RFPDupeFilter"


@pytest.mark.slow
def test_a_real_crawl_remembers_the_spiders_requests_across_a_restart(tmp_path: Path) -> None:
    site = LocalNewsSite({"news": Section(period=0.05)}).start()
    try:
        paths = [f"/a/news/{i}.html" for i in range(3)]
        urls = ",".join(site.url + path for path in paths)
        settings = {"JOBDIR": str(tmp_path / "job"), "ECHO_DUPEFILTER_TTL": 3600}
        first = crawl(tmp_path, settings, spider="plain", urls=urls)
        assert first.returncode == 0, first.log[-3000:]
        assert first.stats["monitor/plain_fetched"] == 3
        assert first.stats["dupefilter/filtered"] == 3  # each yielded twice
        assert first.stats["echo/dupefilter/remembered"] == 3
        assert len(seen_file(tmp_path / "job")) == 3

        # Within the hour, a restart fetches none of them again.
        second = crawl(tmp_path, settings, spider="plain", urls=urls)
        assert second.returncode == 0, second.log[-3000:]
        assert "ECHO dupefilter: 3 requests seen in the last 3600 s read back" in second.log
        assert second.stats.get("monitor/plain_fetched", 0) == 0
        assert second.stats["dupefilter/filtered"] == 6
        assert [site.hits[path] for path in paths] == [1, 1, 1]
    finally:
        site.stop()
