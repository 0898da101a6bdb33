"""The click feed across a planner's take-over: its read position travels in the state snapshot
and names the feed by its bytes, so a planner on another host (its own copy of the feed: another
inode, maybe another path) counts each click once, and a feed missing there is reported, not
silently dropped."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from scrapy_echo.core import snapshot as snapshots
from scrapy_echo.core.state import CrawlState
from scrapy_echo.crawler.extension import EchoExtension
from scrapy_echo.distributed.store import RedisStore, key_base
from tests.local_site import LocalNewsSite, Section
from tests.test_distributed_crawl import FAST, Workers
from tests.test_middlewares import setup


def rows(first: int, count: int, ts: float = 1000.0) -> str:
    """Click rows for pages never crawled: they wait in the learner, each one counted there."""
    return "".join(
        json.dumps({"url": f"http://clicks.test/{i}", "ts": ts, "clicks": i + 1}) + "\n"
        for i in range(first, first + count)
    )


def feed_sum(path: Path) -> float:
    return sum(json.loads(text)["clicks"] for text in path.read_text().splitlines())


def clicks_in(state: CrawlState) -> float:
    """Every click the state's learner holds (all wait for their page: none was crawled)."""
    learner = state.learner.to_data()
    assert learner["dropped_clicks"] == 0
    return sum(count for _, waiting in learner["pending"] for _, count in waiting)


def planner_on(feed: Path) -> tuple[Any, Any, EchoExtension]:
    crawler, runtime, _ = setup(ECHO_CLICK_FEED=str(feed), ECHO_SOURCES=["http://news.test/"])
    return crawler, runtime, EchoExtension.from_crawler(crawler)


def take_over(before: Any, after: Any) -> None:
    """What a planner taking over does: restore the last saved state (its feed positions too)."""

    def no_requests(payload: object) -> Any:
        raise AssertionError("no request was saved")

    feeds = {"feeds": before.feed_state()}  # (the planner's own part of its snapshot)
    captured = snapshots.capture(before.core, before.clock(), no_requests, extra=feeds)
    saved = snapshots.read(captured.to_bytes())
    state, _, _ = snapshots.restore(after.config, saved, no_requests)
    after.core.reset(state)
    after.restore_feeds(saved["feeds"])


@pytest.mark.parametrize("where", ["same path", "another path"])
def test_a_planner_on_another_host_counts_each_click_once(tmp_path, where) -> None:
    feed = tmp_path / "host-a" / "clicks.jsonl"
    feed.parent.mkdir()
    feed.write_text(rows(0, 20))
    _, first, first_feeds = planner_on(feed)
    assert first_feeds.read_click_feeds() == 20
    # Host B's copy of the feed (another inode), which went on growing.
    copy = feed if where == "same path" else tmp_path / "host-b" / "clicks.jsonl"
    copy.parent.mkdir(exist_ok=True)
    inode = os.stat(feed).st_ino
    shutil.copyfile(feed, tmp_path / "copy")
    os.replace(tmp_path / "copy", copy)
    assert os.stat(copy).st_ino != inode
    with open(copy, "a") as handle:
        handle.write(rows(20, 5))
    crawler, second, second_feeds = planner_on(copy)
    take_over(first, second)
    assert second_feeds.read_click_feeds() == 5
    assert clicks_in(second.state) == feed_sum(copy)
    assert crawler.stats.get_value("echo/clickfeed/rows") == 5


def test_a_planner_failing_over_to_a_copy_that_lags_counts_each_click_once(tmp_path) -> None:
    feed = tmp_path / "host-a" / "clicks.jsonl"
    feed.parent.mkdir()
    feed.write_text(rows(0, 10))
    _, first, first_feeds = planner_on(feed)
    assert first_feeds.read_click_feeds() == 10
    copy = tmp_path / "host-b" / "clicks.jsonl"  # the replica: five rows behind
    copy.parent.mkdir()
    copy.write_text(rows(0, 5))
    crawler, second, second_feeds = planner_on(copy)
    take_over(first, second)
    for _ in range(2):
        assert second_feeds.read_click_feeds() == 0  # counted already, by the first planner
    assert crawler.stats.get_value("echo/clickfeed/behind") == 2
    with open(copy, "a") as handle:
        handle.write(rows(5, 7))  # it catches up, and two rows more
    assert second_feeds.read_click_feeds() == 2
    assert clicks_in(second.state) == feed_sum(copy)
    assert crawler.stats.get_value("echo/clickfeed/rows") == 2


def test_a_feed_missing_at_take_over_is_counted_reported_once_and_read_when_it_appears(
    tmp_path, caplog
) -> None:
    feed = tmp_path / "host-a" / "clicks.jsonl"
    feed.parent.mkdir()
    feed.write_text(rows(0, 10))
    _, first, first_feeds = planner_on(feed)
    first_feeds.read_click_feeds()
    copy = tmp_path / "host-b" / "clicks.jsonl"  # not there yet (a mount, a sync still to come)
    crawler, second, second_feeds = planner_on(copy)
    take_over(first, second)
    with caplog.at_level(logging.WARNING, logger="scrapy_echo.inputs.feed_reader"):
        for _ in range(3):
            assert second_feeds.read_click_feeds() == 0
    assert crawler.stats.get_value("echo/clickfeed/missing") == 3
    assert len(caplog.records) == 1 and str(copy) in caplog.records[0].getMessage()
    copy.parent.mkdir()
    copy.write_text(rows(0, 10) + rows(10, 3))
    assert second_feeds.read_click_feeds() == 3
    assert clicks_in(second.state) == feed_sum(copy)
    assert crawler.stats.get_value("echo/clickfeed/missing") == 3  # (no more)


def test_a_state_saved_without_the_feed_reads_it_from_the_top(tmp_path) -> None:
    feed = tmp_path / "clicks.jsonl"
    feed.write_text(rows(0, 4))
    _, runtime, feeds = planner_on(feed)
    assert feeds.read_click_feeds() == 4  # in an earlier term, into a state since given up
    _, without_feed, _ = setup(ECHO_SOURCES=["http://news.test/"])
    take_over(without_feed, runtime)  # the last planner had no click feed
    assert feeds.read_click_feeds() == 4
    assert clicks_in(runtime.state) == feed_sum(feed)


# -- real workers on a real redis-server ------------------------------------------------------


def saved_state(client: redis.Redis, prefix: str) -> dict[str, Any] | None:
    loaded = RedisStore(client, key_base(prefix, "monitor")).load_snapshot()
    return snapshots.read(loaded[0]) if loaded else None


def wait_for(check: Any, timeout: float, what: str) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_a_planner_killed_and_replaced_on_another_host_counts_each_click_once(
    tmp_path, redis_url
) -> None:
    site = LocalNewsSite({"news": Section(period=2, hub_items=20)}).start()
    started: list[Workers] = []  # (stopped whatever happens: none outlives the test)
    try:
        prefix = f"t{uuid.uuid4().hex[:8]}"
        settings = {**FAST, "REDIS_URL": redis_url, "ECHO_REDIS_KEY_PREFIX": prefix,
                    "ECHO_SOURCES": site.hub_url("news")}  # fmt: skip
        client = redis.Redis.from_url(redis_url)
        feed = tmp_path / "host-a" / "clicks.jsonl"
        feed.parent.mkdir()
        feed.write_text(rows(0, 30, ts=time.time()))
        first = Workers(tmp_path / "host-a", {**settings, "ECHO_CLICK_FEED": str(feed)})
        started.append(first)
        planner = first.start()

        def saved_with(path: Path) -> bool:
            state = saved_state(client, prefix)
            position = state and state["feeds"].get(str(path))
            return bool(position) and position["offset"] == path.stat().st_size

        wait_for(lambda: saved_with(feed), 60, "the first planner to save its feed position")
        first.kill(planner)  # (its lease runs out: the next worker takes over)
        assert first.stop() == []  # (none left to stop: its log closed)
        copy = tmp_path / "host-b" / "clicks.jsonl"  # host B's copy: another path and inode
        copy.parent.mkdir()
        shutil.copyfile(feed, copy)
        assert os.stat(copy).st_ino != os.stat(feed).st_ino
        with open(copy, "a") as handle:
            handle.write(rows(30, 7, ts=time.time()))
        second = Workers(tmp_path / "host-b", {**settings, "ECHO_CLICK_FEED": str(copy)})
        started.append(second)
        second.start()
        wait_for(lambda: saved_with(copy), 60, "the second planner to save its feed position")
        assert second.stop() == [0], second.logs()[-3000:]
    finally:
        for workers in started:
            workers.stop()
        site.stop()
    terms = client.lrange(f"{{{prefix}:monitor}}:solver_log", 0, -1)
    assert len(terms) == 2  # one planner, then the other
    state = saved_state(client, prefix)
    assert state is not None
    restored, _, _ = snapshots.restore(setup()[1].config, state, lambda payload: None)
    assert clicks_in(restored) == feed_sum(copy)
    (stats,) = second.stats()
    assert stats["echo/clickfeed/rows"] == 7
