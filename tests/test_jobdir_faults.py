"""JOBDIR after a crash or a change of code: the requests in flight are saved and queued
again; saved requests that no longer fit the spider, and damaged checkpoints, are skipped or
set aside and counted, never raised out of ``open()``."""

from __future__ import annotations

import json
import logging
import signal
import time
from typing import Any

import pytest
from scrapy import Request
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from scrapy_echo.core import codec
from scrapy_echo.crawler.in_flight import InFlight
from scrapy_echo.crawler.jobdir import FILE_NAME
from tests.crawling import crawl, start_crawl
from tests.local_site import LocalNewsSite, Section
from tests.test_jobdir import Spider, open_scheduler, page


def test_requests_in_flight_are_saved_until_done_and_queued_first_on_restore(tmp_path) -> None:
    first = open_scheduler(str(tmp_path / "job"), str(tmp_path / "c.jsonl"))
    first.enqueue_request(page("http://a.test/x", 0))
    for name in ("done", "flying", "waiting"):
        first.enqueue_request(Request(f"http://c.test/{name}"))
    handed = [first.next_request() for _ in range(3)]
    assert [r.url for r in handed if r is not None] == [
        "http://c.test/done",
        "http://a.test/x",  # its link is seen: lost for good if the checkpoint left it out
        "http://c.test/flying",
    ]
    first.runtime.done(handed[0])  # (what the middlewares report)
    first.close("shutdown")
    assert first.crawler.stats.get_value("echo/jobdir/in_flight") == 2

    second = open_scheduler(str(tmp_path / "job"), str(tmp_path / "c.jsonl"))
    assert [r.url for r in second.plain] == [
        "http://a.test/x",
        "http://c.test/flying",
        "http://c.test/waiting",
    ]
    second.close("shutdown")


def test_a_request_in_flight_gives_way_to_its_redirect_and_is_let_go_if_never_done(
    caplog,
) -> None:
    stats = MemoryStatsCollector(get_crawler(Spider))
    flying = InFlight(let_go_after=100.0, stats=stats)
    first, other = Request("http://a.test/1"), Request("http://a.test/2")
    flying.handed(first, 0.0)
    flying.handed(other, 0.0)
    # Scrapy's redirect and retry middlewares copy the request; the one they follow never
    # reports done.
    moved = first.replace(
        url="http://a.test/one", meta={"redirect_times": 1, "redirect_urls": [first.url]}
    )
    flying.handed(moved, 1.0)
    retried = moved.replace(meta={**moved.meta, "retry_times": 1})
    flying.handed(retried, 2.0)
    assert flying.holding(50.0) == [other, retried]
    flying.done(retried)
    assert flying.holding(50.0) == [other]
    late = Request("http://a.test/3")
    flying.handed(late, 60.0)
    with caplog.at_level(logging.WARNING, logger="scrapy_echo.crawler.in_flight"):
        assert flying.holding(150.0) == [late]  # handed 150 s ago, never done
        assert flying.holding(200.0) == []
    assert stats.get_value("echo/jobdir/in_flight_let_go") == 2
    assert caplog.text.count("never reported done") == 1  # then only counted


class OldSpider(Spider):
    """The spider of an earlier run: its methods were renamed since."""

    echo_page_callback = "parse_article"

    def parse_article(self, response: Any) -> Any:
        return []

    def parse_list(self, response: Any) -> Any:
        return []


def test_requests_naming_a_renamed_callback_are_skipped_and_named_once(tmp_path, caplog) -> None:
    job, feed = str(tmp_path / "job"), str(tmp_path / "c.jsonl")
    first = open_scheduler(job, feed, spider=OldSpider)
    old = first.spider
    assert isinstance(old, OldSpider)
    first.enqueue_request(page("http://a.test/x", 0))
    handed = [first.next_request() for _ in range(3)]
    (flying,) = [r for r in handed if r is not None and r.url == "http://a.test/x"]
    assert flying.callback == old.parse_article  # a page's request is built as it leaves
    first.enqueue_request(page("http://a.test/w", 0))  # a page still waiting
    first.enqueue_request(Request("http://c.test/list/1", callback=old.parse_list))
    first.enqueue_request(Request("http://c.test/list/2", callback=old.parse_list))
    first.enqueue_request(Request("http://c.test/plain"))
    first.close("shutdown")

    with caplog.at_level(logging.WARNING, logger="scrapy_echo.crawler.jobdir"):
        second = open_scheduler(job, feed)  # the spider now has parse only
    stats = second.crawler.stats
    assert stats.get_value("echo/jobdir/unrestored_requests") == 2
    assert stats.get_value("echo/jobdir/unrestored_requests/bad_callback") == 2
    (skipped,) = [r.getMessage() for r in caplog.records if "parse_list" in r.getMessage()]
    assert "2 saved requests skipped" in skipped
    # The page in flight: its link is seen, so it goes to this run's page callback, not away.
    plain = [(r.url, r.callback) for r in second.plain]
    assert ("http://a.test/x", second.spider.parse) in plain
    assert ("http://c.test/plain", None) in plain
    assert stats.get_value("echo/jobdir/page_callback_changed") == 1
    assert "'parse_article'" in caplog.text
    # The waiting page is data: it names no callback, and leaves to this run's.
    (waiting,) = second.state.frontier.pages()
    assert waiting.page.url == "http://a.test/w"
    assert not list((tmp_path / "job").glob("*.unreadable-*"))
    second.close("shutdown")


def test_damaged_saved_requests_are_skipped_and_the_rest_restored(tmp_path) -> None:
    job, feed = tmp_path / "job", str(tmp_path / "c.jsonl")
    first = open_scheduler(str(job), feed)
    for i in range(6):
        first.enqueue_request(page(f"http://a.test/{i}", 0))
    first.enqueue_request(Request("http://c.test/plain"))
    first.close("shutdown")
    snapshot = codec.loads((job / FILE_NAME).read_bytes())
    frontier = snapshot["frontier"]
    frontier["source"][0] = 99  # no such source: it raised out of open()
    frontier["source"][1] = True
    frontier["page"][2][2] = "x"  # its appearance time
    frontier["page"][3][5] = float("nan")  # its discovery time
    frontier["page"][4] = ["not", "a", "page"]
    snapshot["plain"].append({"url": "http://c.test/dict"})
    (job / FILE_NAME).write_bytes(codec.dumps(snapshot))
    intact = frontier["page"][5][0]

    second = open_scheduler(str(job), feed)
    assert [p.page.url for p in second.state.frontier.pages()] == [intact]
    assert [r.url for r in second.plain] == ["http://c.test/plain"]
    assert second.crawler.stats.get_value("echo/jobdir/unrestored_requests") == 6
    assert not list(job.glob("*.unreadable-*"))
    assert [second.next_request() is not None for _ in range(2)] == [True, True]
    second.close("shutdown")


def damage_new_links(data: bytes) -> bytes:
    snapshot = codec.loads(data)
    snapshot["sources"]["new_links"] = ["x", "x"]  # it raised out of open(), at the re-solve
    return codec.dumps(snapshot)


@pytest.mark.parametrize(
    "damage",
    [lambda data: data[: len(data) // 2], lambda data: b"{]", damage_new_links],
    ids=["truncated", "not_json", "wrong_type"],
)
def test_an_unreadable_checkpoint_is_set_aside_and_the_crawl_starts_afresh(
    tmp_path, caplog, damage
) -> None:
    job, feed = tmp_path / "job", str(tmp_path / "c.jsonl")
    first = open_scheduler(str(job), feed)
    first.enqueue_request(page("http://a.test/x", 0))
    first.close("shutdown")
    (job / FILE_NAME).write_bytes(damage((job / FILE_NAME).read_bytes()))
    with caplog.at_level(logging.ERROR, logger="scrapy_echo.crawler.jobdir"):
        second = open_scheduler(str(job), feed)
    (aside,) = job.glob(f"{FILE_NAME}.unreadable-*")
    assert f"{job / FILE_NAME} unreadable" in caplog.text
    assert f"moved to {aside}, and the crawl starts afresh" in caplog.text
    assert len(second.state.frontier) == 0 and len(second.state.sources) == 2
    second.close("shutdown")


@pytest.mark.slow
def test_pages_in_flight_when_a_crawl_is_killed_are_fetched_after_the_restart(tmp_path) -> None:
    """Real ``scrapy crawl`` runs: articles take 3 s to answer, so some are always in flight;
    the crawl is killed with some in flight for over a second (two checkpoints at least),
    then restarted: each of those is fetched by the restarted crawl."""
    delay = 3.0
    site = LocalNewsSite({"news": Section(period=0.4)}, slow=(1.0, delay)).start()
    try:
        jobdir = tmp_path / "job"
        settings = {
            "ECHO_SOURCES": site.hub_url("news"),
            "ECHO_CRAWL_RATE": 5,
            "ECHO_CHECKPOINT_INTERVAL": 0.5,
            "ECHO_RESOLVE_INTERVAL": 1,
            "JOBDIR": str(jobdir),
        }
        process = start_crawl(tmp_path / "killed.json", settings)

        def in_flight(now: float) -> set[str]:
            # Asked between 1 s and (delay - 0.3) s ago: not answered yet, and in flight
            # at a checkpoint taken after the hub crawl that found it.
            with site.lock:
                log = list(site.hit_log)
            return {p for t, p in log if p.startswith("/a/") and 1.0 < now - t < delay - 0.3}

        deadline = time.time() + 20
        while time.time() < deadline and not (len(in_flight(time.time())) >= 2):
            time.sleep(0.05)
        killed_at = time.time()
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        flying = in_flight(killed_at)
        assert len(flying) >= 2, site.hit_log

        items = tmp_path / "items.jsonl"
        feeds = {str(items): {"format": "jsonlines"}}
        restarted_at = time.time()
        run = crawl(tmp_path, {**settings, "CLOSESPIDER_TIMEOUT": 6, "FEEDS": feeds})
        assert run.returncode == 0, run.log[-3000:]
        assert "resumed from" in run.log
        asked_again = {p for t, p in site.hit_log if t > restarted_at}
        assert flying <= asked_again, (flying, asked_again)
        fetched = {json.loads(line)["url"] for line in items.read_text().splitlines()}
        assert {site.url + path for path in flying} <= fetched
    finally:
        site.stop()
