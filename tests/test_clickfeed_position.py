"""Click feed positions carried to another host (a planner taking over): a position names
the file by its bytes, so a copy resumes exactly; a feed missing or unreadable is reported,
not raised."""

from __future__ import annotations

import json
import logging
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_echo.inputs.clickfeed import ClickFeedReader
from tests.test_clickfeed import LOGGER, append, chunks, line, rows_strategy

# -- positions carried to another host (a planner taking over) ---------------------------------


def saved_position(reader: ClickFeedReader) -> dict[str, object]:
    return json.loads(json.dumps(reader.state()))  # as a snapshot carries it


def csv_row(page: str, ts: int, clicks: int) -> str:
    return f"http://example.com/{page},{ts},{clicks}\n"


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_copy_elsewhere_resumes_exactly_where_the_position_was_saved(tmp_path, suffix) -> None:
    def row(i: int) -> str:
        return csv_row(f"p{i}", i, i) if suffix == ".csv" else line(f"http://a.test/{i}", i, i)

    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir(), there.mkdir()
    feed = here / f"clicks{suffix}"
    feed.write_text(("url,ts,clicks\n" if suffix == ".csv" else "") + "".join(map(row, range(5))))
    first = ClickFeedReader(feed)
    counted = first.read()
    append(feed, row(5)[:7])  # a row still being written when the position was saved
    saved = saved_position(first)
    copy = there / f"clicks{suffix}"
    copy.write_bytes(feed.read_bytes())  # another host's copy: another inode, the same bytes
    assert os.stat(copy).st_ino != os.stat(feed).st_ino
    resumed = ClickFeedReader(copy)
    resumed.restore(saved)
    assert resumed.read() == []  # nothing new: nothing counted again
    append(copy, row(5)[7:] + row(6))
    counted += resumed.read()
    assert [row.ts for row in counted] == [float(i) for i in range(7)]  # each row once
    assert sum(row.clicks for row in counted) == sum(range(7))
    assert resumed.invalid == {}  # (the CSV header was carried along)


@given(rows=rows_strategy, cuts=st.lists(st.integers(0, 10**6), max_size=6))
def test_a_position_carried_to_a_copy_at_every_cut_gives_the_same_rows(
    tmp_path_factory, rows, cuts
) -> None:
    data = "".join(line(f"http://example.com/{page}", ts, clicks) for page, ts, clicks, _ in rows)
    data_bytes = data.encode()
    folder = tmp_path_factory.mktemp("feed")
    (folder / "whole.jsonl").write_bytes(data_bytes)
    expected = ClickFeedReader(folder / "whole.jsonl").read()
    reader = ClickFeedReader(folder / "host-0.jsonl")
    got = []
    for host, chunk in enumerate(chunks(data_bytes, cuts), start=1):
        append(reader.path, chunk)
        got += reader.read()
        # The next planner, on the next host, reads its own copy from the saved position.
        copy = folder / f"host-{host}.jsonl"
        copy.write_bytes(reader.path.read_bytes())
        position = saved_position(reader)
        reader = ClickFeedReader(copy)
        reader.restore(position)
    got += reader.read()
    assert got == expected


def test_a_file_rewritten_in_place_past_the_offset_is_read_from_the_top(tmp_path) -> None:
    feed = tmp_path / "clicks.csv"
    head = "url,ts,clicks\n" + csv_row("a" * 60, 1, 1)  # longer than the first bytes kept
    feed.write_text(head + csv_row("b", 2, 1))
    reader = ClickFeedReader(feed)
    assert len(reader.read()) == 2
    # The same inode, the same beginning, longer than what was read: only the bytes just
    # before the offset tell the file was rewritten.
    with open(feed, "r+b") as handle:
        handle.truncate(0)
        handle.write((head + csv_row("c", 3, 1) + csv_row("d", 4, 1)).encode())
    assert [row.ts for row in reader.read()] == [1.0, 3.0, 4.0]


def test_restore_over_another_file_with_the_same_beginning_starts_over(tmp_path) -> None:
    feed = tmp_path / "clicks.jsonl"
    first_line = line("http://example.com/" + "a" * 60, 1)
    feed.write_text(first_line + line(ts=2))
    reader = ClickFeedReader(feed)
    reader.read()
    saved = saved_position(reader)
    rotated = tmp_path / "rotated.jsonl"  # a new day's file: same first row, then others
    rotated.write_text(first_line + line(ts=3) + line(ts=4))
    again = ClickFeedReader(rotated)
    again.restore(saved)
    assert [row.ts for row in again.read()] == [1.0, 3.0, 4.0]


def test_a_feed_missing_after_a_restore_is_reported_once_and_read_when_it_appears(
    tmp_path, caplog
) -> None:
    feed = tmp_path / "clicks.jsonl"
    feed.write_text(line(ts=1) + line(ts=2))
    first = ClickFeedReader(feed)
    assert len(first.read()) == 2
    saved = saved_position(first)
    copy = tmp_path / "elsewhere" / "clicks.jsonl"
    resumed = ClickFeedReader(copy)
    resumed.restore(saved)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(3):
            assert resumed.read() == [] and resumed.missing
        assert saved_position(resumed)["offset"] == saved["offset"]  # the position is kept
        copy.parent.mkdir()
        copy.write_text(line(ts=1) + line(ts=2) + line(ts=3))
        assert [row.ts for row in resumed.read()] == [3.0]
    assert not resumed.missing
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(copy) in warnings[0]
    assert "can be read again" in caplog.records[-1].getMessage()


def test_an_unreadable_feed_is_reported_not_raised(tmp_path, caplog) -> None:
    feed = tmp_path / "clicks.jsonl"
    feed.mkdir()  # (a directory: unreadable as a file, whoever runs the tests)
    reader = ClickFeedReader(feed)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert reader.read() == [] and reader.read() == []
    assert reader.missing and len(caplog.records) == 1
    feed.rmdir()
    feed.write_text(line(ts=1))
    assert [row.ts for row in reader.read()] == [1.0] and not reader.missing


def test_a_damaged_position_reads_from_the_top_whatever_was_read_before(tmp_path) -> None:
    feed = tmp_path / "clicks.jsonl"
    feed.write_text(line(ts=1))
    reader = ClickFeedReader(feed)
    assert len(reader.read()) == 1  # (in an earlier term, into a state since given up)
    reader.restore({"offset": "x"})
    assert [row.ts for row in reader.read()] == [1.0]


# -- a copy that lags behind the saved position (replicas do) ---------------------------------


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_copy_that_lags_behind_the_position_is_waited_for_not_read_twice(
    tmp_path, suffix, caplog
) -> None:
    def row(i: int) -> str:
        return csv_row(f"p{i}", i, i) if suffix == ".csv" else line(f"http://a.test/{i}", i, i)

    header = "url,ts,clicks\n" if suffix == ".csv" else ""
    rows = [row(i) for i in range(60)]
    feed = tmp_path / f"clicks{suffix}"
    feed.write_text(header + "".join(rows[:40]))
    first = ClickFeedReader(feed)
    assert len(first.read()) == 40
    saved = saved_position(first)
    copy = tmp_path / "replica" / f"clicks{suffix}"
    copy.parent.mkdir()
    copy.write_text(header + "".join(rows[:20]) + rows[20][:5])  # behind, mid-row
    resumed = ClickFeedReader(copy)
    resumed.restore(saved)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert resumed.read() == [] and resumed.behind
        append(copy, rows[20][5:] + "".join(rows[21:40]) + rows[40][:3])  # up to the position
        assert resumed.read() == [] and not resumed.behind
        append(copy, rows[40][3:] + "".join(rows[41:45]))
        assert [r.ts for r in resumed.read()] == [float(i) for i in range(40, 45)]
    assert [r.getMessage() for r in caplog.records if "catching up" in r.getMessage()] == [
        f"Click feed {copy} holds {len(header) + sum(map(len, rows[:20])) + 5} bytes, fewer "
        f"than the {saved['offset']} read from the copy its position was saved on, and the "
        "same ones: a copy still catching up; its rows are read once it has grown past that "
        "point"
    ]
    assert resumed.invalid == {}


def test_a_rotated_file_shorter_than_the_position_is_read_from_its_top(tmp_path) -> None:
    # The same header and first row, longer than the first bytes kept, then other rows: a new
    # day's file. Only the bytes before the marks it reaches tell it from a lagging copy.
    old, new = tmp_path / "old.csv", tmp_path / "new.csv"
    start = "url,ts,clicks\n" + csv_row("index-" + "x" * 60, 1, 1)
    old.write_text(start + "".join(csv_row(f"o{i}", i, 1) for i in range(99)))
    reader = ClickFeedReader(old)
    reader.read()
    saved = saved_position(reader)
    new.write_text(start + "".join(csv_row(f"n{i}", 2, 1) for i in range(30)))
    assert new.stat().st_size < saved["offset"] and saved["marks"]
    again = ClickFeedReader(new)
    again.restore(saved)
    assert len(again.read()) == 31 and not again.behind


@given(rows=rows_strategy, cut=st.floats(0, 1), more=st.integers(0, 3))
def test_a_copy_cut_anywhere_before_the_position_gives_each_row_once(
    tmp_path_factory, rows, cut, more
) -> None:
    data = "".join(line(f"http://example.com/{page}", ts, clicks) for page, ts, clicks, _ in rows)
    data_bytes = data.encode()
    folder = tmp_path_factory.mktemp("feed")
    (folder / "whole.jsonl").write_bytes(data_bytes)
    expected = ClickFeedReader(folder / "whole.jsonl").read()
    known = len(rows) - min(more, len(rows) - 1)  # rows read on the first host
    end = sum(len(line(f"http://example.com/{p}", ts, c).encode()) for p, ts, c, _ in rows[:known])
    (folder / "first.jsonl").write_bytes(data_bytes[:end])
    first = ClickFeedReader(folder / "first.jsonl")
    got = first.read()
    copy = folder / "copy.jsonl"
    copy.write_bytes(data_bytes[: int(cut * end)])  # the replica, somewhere behind
    resumed = ClickFeedReader(copy)
    resumed.restore(saved_position(first))
    got += resumed.read()
    append(copy, data_bytes[int(cut * end) :])  # it catches up, and gains the rest
    got += resumed.read()
    assert got == expected
