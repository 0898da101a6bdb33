"""A feed's backlog is read in batches, a batch a call and, in a crawl, a batch a reactor turn:
no call parses more than ``batch_lines`` rows, and every row is counted once."""

from __future__ import annotations

import json

import pytest
import pytest_twisted
from hypothesis import given
from hypothesis import strategies as st
from twisted.internet import reactor
from twisted.internet.task import deferLater

from scrapy_echo.crawler.extension import EchoExtension
from scrapy_echo.inputs.clickfeed import ClickFeedReader
from scrapy_echo.inputs.feed_reader import BATCH_LINES
from scrapy_echo.inputs.signalfeed import SignalFeedReader
from tests.test_clickfeed import append, chunks, line, rows_strategy
from tests.test_clickfeed_takeover import clicks_in, feed_sum, rows
from tests.test_middlewares import setup


def test_a_backlog_is_read_a_batch_a_call(tmp_path) -> None:
    feed = tmp_path / "clicks.jsonl"
    feed.write_text("".join(line(ts=i) for i in range(25)) + line(ts=99)[:9])
    reader = ClickFeedReader(feed, batch_lines=10)
    batches = []
    while True:
        batch = reader.read()
        batches.append(([row.ts for row in batch], reader.backlog))
        if not reader.backlog:
            break
    assert batches == [
        ([float(i) for i in range(10)], True),
        ([float(i) for i in range(10, 20)], True),
        ([float(i) for i in range(20, 25)], False),
    ]
    assert reader.state()["offset"] == sum(len(line(ts=i)) for i in range(25))  # no further
    assert reader.rows_read == 25 and reader.read() == []


def test_a_batch_stops_at_its_bytes_but_reads_a_longer_line_whole(tmp_path) -> None:
    feed = tmp_path / "clicks.jsonl"
    long_row = line(url="http://example.com/" + "x" * 500, ts=1)
    feed.write_text(line(ts=0) + long_row + line(ts=2) + line(ts=3))
    reader = ClickFeedReader(feed, batch_bytes=100)
    got = [[row.ts for row in reader.read()] for _ in range(4)]
    assert got == [[0.0], [1.0], [2.0], [3.0]]
    assert not reader.backlog and reader.read() == []


@given(
    rows=rows_strategy,
    cuts=st.lists(st.integers(0, 10**6), max_size=6),
    batch_lines=st.integers(1, 4),
    batch_bytes=st.integers(1, 300),
)
def test_reading_in_batches_gives_the_same_rows_once(
    tmp_path_factory, rows, cuts, batch_lines, batch_bytes
) -> None:
    text = "".join(
        line(f"http://example.com/{page}", ts, clicks) + ("\n" if blank else "")
        for page, ts, clicks, blank in rows
    )
    data = text.encode()
    folder = tmp_path_factory.mktemp("feed")
    (folder / "whole.jsonl").write_bytes(data)
    expected = ClickFeedReader(folder / "whole.jsonl").read()
    reader = ClickFeedReader(
        folder / "batches.jsonl", batch_lines=batch_lines, batch_bytes=batch_bytes
    )
    got = []
    for chunk in chunks(data, cuts):
        append(reader.path, chunk)
        got += reader.read()
        while reader.backlog:
            batch = reader.read()
            assert len(batch) <= batch_lines
            got += batch
    assert got == expected
    assert reader.rows_read == len(expected)


@pytest.mark.parametrize("batch", [{"batch_lines": 0}, {"batch_bytes": 0}])
def test_batch_sizes_below_one_are_refused(tmp_path, batch) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        ClickFeedReader(tmp_path / "clicks.jsonl", **batch)


async def reactor_turns_until(done, most: int = 1000) -> int:
    """Let the reactor run until ``done()``; returns the turns it took."""
    for turn in range(most):
        if done():
            return turn
        await deferLater(reactor, 0, lambda: None)
    raise AssertionError("the backlog was never read")


@pytest_twisted.ensureDeferred
async def test_a_click_backlog_is_read_over_reactor_turns_each_row_once(tmp_path) -> None:
    backlog = 2 * BATCH_LINES + BATCH_LINES // 2
    feed = tmp_path / "clicks.jsonl"
    feed.write_text(rows(0, backlog))
    crawler, runtime, _ = setup(ECHO_CLICK_FEED=str(feed), ECHO_SOURCES=["http://news.test/"])
    extension = EchoExtension.from_crawler(crawler)

    def counted() -> int:
        return crawler.stats.get_value("echo/clickfeed/rows", 0)

    extension.spider_opened()
    try:
        assert counted() == BATCH_LINES  # one batch, not the whole backlog at once
        turns = await reactor_turns_until(lambda: counted() == backlog)
        assert turns >= 2  # the rest a batch a turn, the reactor free in between
        await deferLater(reactor, 0, lambda: None)
        assert not runtime.click_intake.readers[0].backlog
    finally:
        extension.spider_closed()
    assert counted() == backlog and runtime.click_intake.readers[0].rows_read == backlog
    assert clicks_in(runtime.state) == feed_sum(feed)  # each click once


@pytest_twisted.ensureDeferred
async def test_a_signal_backlog_is_read_over_reactor_turns_each_row_once(tmp_path) -> None:
    feed = tmp_path / "signals.jsonl"
    feed.write_text("".join(json.dumps({"url": "http://news.test/", "ts": 5}) + "\n" * 2) * 250)
    crawler, runtime, _ = setup(ECHO_SIGNAL_FEED=str(feed), ECHO_SOURCES=["http://news.test/"])
    extension = EchoExtension.from_crawler(crawler)
    # Smaller batches than a crawl's: the same code, with fewer rows to write.
    runtime.signal_intake.readers = [SignalFeedReader(feed, batch_lines=100)]

    def counted() -> int:
        return crawler.stats.get_value("echo/signalfeed/rows", 0)

    extension.spider_opened()  # (the signal loop reads its first batch at once)
    try:
        assert counted() <= 100
        await reactor_turns_until(lambda: counted() == 250)
    finally:
        extension.spider_closed()
    assert runtime.signal_intake.readers[0].rows_read == 250
