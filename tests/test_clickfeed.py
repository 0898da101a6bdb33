"""Click feed files: formats, bad rows, tailing, rotation, resuming."""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_echo.inputs.clickfeed import ClickFeedReader, ClickRow, InvalidClickRow, parse_click

LOGGER = "scrapy_echo.inputs.feed_reader"


def line(url: str = "http://example.com/a", ts: object = 60, clicks: object = 2) -> str:
    return json.dumps({"url": url, "ts": ts, "clicks": clicks}) + "\n"


def append(path, text: str | bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(text.encode() if isinstance(text, str) else text)


def test_json_lines_rows_and_time_formats(tmp_path) -> None:
    feed = tmp_path / "clicks.jsonl"
    feed.write_text(
        line(ts=60)
        + line(ts=60.5, clicks=1.5)
        + line(ts="1970-01-01T00:02:00Z")
        + line(ts="1970-01-01T02:03:00+02:00")
        + line(ts="1970-01-01T00:04:00")
        + "\n  \n"  # blank lines are ignored
    )
    reader = ClickFeedReader(feed)
    rows = reader.read()
    assert [row.ts for row in rows] == [60.0, 60.5, 120.0, 180.0, 240.0]
    assert [row.clicks for row in rows] == [2.0, 1.5, 2.0, 2.0, 2.0]
    assert reader.invalid == {} and reader.rows_read == 5


def test_csv_rows_any_column_order_and_time_formats(tmp_path) -> None:
    feed = tmp_path / "clicks.csv"
    feed.write_text(
        "clicks,extra,url,ts\n"
        "3,x,http://example.com/a,60\n"
        "1.5,y,http://example.com/b,70.25\r\n"
        '2,"z, quoted",http://example.com/c,2026-11-22T10:00:00Z\n'
        "\n"
        "0,,http://example.com/d,2026-11-22T12:00:00+02:00\n"
        "4,,http://example.com/e,2026-11-22T10:00:00\n"
    )
    ten = datetime(2026, 11, 22, 10, tzinfo=timezone.utc).timestamp()
    assert ClickFeedReader(feed).read() == [
        ClickRow("http://example.com/a", 60.0, 3.0),
        ClickRow("http://example.com/b", 70.25, 1.5),
        ClickRow("http://example.com/c", ten, 2.0),
        ClickRow("http://example.com/d", ten, 0.0),
        ClickRow("http://example.com/e", ten, 4.0),
    ]


def test_naive_times_are_utc_whatever_the_local_zone(monkeypatch) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert parse_click("http://example.com/", "1970-01-01T00:01:00", 1).ts == 60.0
    finally:
        monkeypatch.undo()
        time.tzset()


def test_csv_header_with_byte_order_mark(tmp_path) -> None:
    feed = tmp_path / "clicks.csv"
    feed.write_bytes(b"\xef\xbb\xbfURL,Ts,Clicks\nhttp://example.com/a,1,1\n")
    reader = ClickFeedReader(feed)
    assert len(reader.read()) == 1 and reader.invalid == {}


def test_urls_are_canonical_on_both_formats(tmp_path) -> None:
    assert parse_click("HTTP://Example.com/a?b=2&a=1#frag", 1, 1).url == (
        "http://example.com/a?a=1&b=2"
    )
    (tmp_path / "c.jsonl").write_text(line("http://example.com/p?z=1&y=2"))
    (tmp_path / "c.csv").write_text("url,ts,clicks\nhttp://example.com/p?y=2&z=1,1,1\n")
    from_json = ClickFeedReader(tmp_path / "c.jsonl").read()
    from_csv = ClickFeedReader(tmp_path / "c.csv").read()
    assert (
        [r.url for r in from_json] == [r.url for r in from_csv] == ["http://example.com/p?y=2&z=1"]
    )


BAD_ROWS = [
    ("jsonl", "{nope\n", "json"),
    ("jsonl", "[" * 100_000 + "\n", "json"),
    ("jsonl", "[1, 2]\n", "not_object"),
    ("jsonl", json.dumps({"url": "http://example.com/a", "ts": 1}) + "\n", "missing_field"),
    ("jsonl", line(url="ftp://example.com/a"), "bad_url"),
    ("jsonl", line(url="/relative"), "bad_url"),
    ("jsonl", line(url="http:///no-host"), "bad_url"),
    ("jsonl", line(url="http://example.com:99999/"), "bad_url"),
    ("jsonl", line(url=7), "bad_url"),
    ("jsonl", line(ts="yesterday"), "bad_ts"),
    ("jsonl", line(ts=True), "bad_ts"),
    ("jsonl", '{"url": "http://e.com/", "ts": 1' + "0" * 400 + ', "clicks": 1}\n', "bad_ts"),
    ("jsonl", line(ts=1e300), "ts_out_of_range"),  # (an age past any bin index)
    ("jsonl", line(ts=-1), "ts_out_of_range"),
    ("jsonl", line(ts="9999-12-31T00:00:00Z"), "ts_out_of_range"),
    ("jsonl", line(ts=1_764_000_000_000), "ts_milliseconds"),
    ("jsonl", line(ts="1764000000000000"), "ts_microseconds"),
    ("csv", "http://example.com/a,1764000000000000000,1\n", "ts_nanoseconds"),
    ("jsonl", '{"url": "http://e.com/", "ts": 1, "clicks": 1e400}\n', "bad_clicks"),
    ("jsonl", '{"url": "http://e.com/", "ts": 1, "clicks": NaN}\n', "bad_clicks"),
    ("jsonl", line(clicks=-1), "bad_clicks"),
    ("jsonl", line(clicks="many"), "bad_clicks"),
    ("jsonl", b"\xff\xfe\n", "encoding"),
    ("csv", "http://example.com/a,1\n", "csv_columns"),
    ("csv", "http://example.com/a,1,1,extra\n", "csv_columns"),
    ("csv", "http://example.com/" + "x" * 200_000 + ",1,1\n", "csv_columns"),
    ("csv", "http://example.com/a,,1\n", "missing_field"),
    ("csv", "http://example.com/a,1,inf\n", "bad_clicks"),
]


@pytest.mark.parametrize(("fmt", "text", "kind"), BAD_ROWS)
def test_each_bad_row_kind_is_counted_and_logged_once(tmp_path, caplog, fmt, text, kind) -> None:
    feed = tmp_path / f"clicks.{fmt}"
    good = line() if fmt == "jsonl" else "http://example.com/a,60,2\n"
    append(feed, "url,ts,clicks\n" if fmt == "csv" else "")
    for chunk in (good, text, text, good):
        append(feed, chunk)
    first_bad_line = 3 if fmt == "csv" else 2
    reader = ClickFeedReader(feed)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        rows = reader.read()
    assert rows == [ClickRow("http://example.com/a", 60.0, 2.0)] * 2  # good rows around kept
    assert reader.invalid == {kind: 2}
    assert reader.rows_read == 2
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert str(feed) in record.getMessage()
    assert f"line {first_bad_line}" in record.getMessage()


def test_csv_header_without_the_columns(tmp_path, caplog) -> None:
    feed = tmp_path / "clicks.csv"
    feed.write_text("page,when,n\nhttp://example.com/a,1,1\nhttp://example.com/b,1,1\n")
    reader = ClickFeedReader(feed)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert reader.read() == []
        append(feed, "http://example.com/c,1,1\n")
        assert reader.read() == []
    assert reader.invalid == {"csv_columns": 3}
    assert len(caplog.records) == 1 and "line 2" in caplog.records[0].getMessage()


def test_kinds_are_logged_once_each_across_reads(tmp_path, caplog) -> None:
    feed = tmp_path / "clicks.jsonl"
    feed.write_text("{bad\n{bad\n" + line(clicks=-1))
    reader = ClickFeedReader(feed)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        reader.read()
        append(feed, line(clicks=-2) + "{bad\n")
        reader.read()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "line 1" in messages[0] and "line 3" in messages[1]
    assert reader.invalid == {"json": 3, "bad_clicks": 2}


def test_a_line_still_being_written_waits(tmp_path) -> None:
    feed = tmp_path / "clicks.jsonl"
    whole = line(ts=1)
    feed.write_text(line(ts=0) + whole[:10])
    reader = ClickFeedReader(feed)
    assert [row.ts for row in reader.read()] == [0.0]
    assert reader.read() == []
    append(feed, whole[10:-1])  # all but the newline: still not complete
    assert reader.read() == []
    append(feed, "\n" + line(ts=2))
    assert [row.ts for row in reader.read()] == [1.0, 2.0]
    assert reader.invalid == {} and reader.rows_read == 3


def test_growth_across_calls_returns_only_new_rows(tmp_path) -> None:
    feed = tmp_path / "clicks.csv"
    reader = ClickFeedReader(feed)
    assert reader.read() == []  # not there yet
    feed.write_text("url,ts,clicks\n")
    assert reader.read() == []
    for ts in range(3):
        append(feed, f"http://example.com/{ts},{ts},1\n")
        assert [row.ts for row in reader.read()] == [float(ts)]
    assert reader.read() == []
    assert reader.rows_read == 3


def test_rotation_starts_over_and_rereads_the_csv_header(tmp_path) -> None:
    feed = tmp_path / "clicks.csv"
    feed.write_text("url,ts,clicks\nhttp://example.com/a,1,1\n")
    reader = ClickFeedReader(feed)
    assert len(reader.read()) == 1
    os.rename(feed, tmp_path / "clicks.csv.1")  # logrotate: move away, start a new file
    assert reader.read() == []  # between the rename and the new file
    feed.write_text("ts,clicks,url\n2,5,http://example.com/b\n")  # other column order
    assert reader.read() == [ClickRow("http://example.com/b", 2.0, 5.0)]
    assert reader.invalid == {}


def test_a_feed_replaced_by_a_copy_with_more_rows_is_read_on_not_again(tmp_path) -> None:
    # rsync without --inplace, ``cp tmp && mv``, an exporter writing atomically: a new inode
    # holding what was read and more. Reproduced on the build of 2026-11-29: 5 rows read,
    # the file replaced by a copy with 2 more, 7 counted again.
    feed = tmp_path / "clicks.jsonl"
    feed.write_text("".join(line(ts=ts) for ts in range(1, 6)))
    reader = ClickFeedReader(feed)
    assert len(reader.read()) == 5
    copy = tmp_path / "clicks.jsonl.tmp"
    copy.write_text("".join(line(ts=ts) for ts in range(1, 8)))
    os.replace(copy, feed)
    assert [row.ts for row in reader.read()] == [6.0, 7.0]
    assert reader.rows_read == 7
    # A file moved in with other rows is another feed: read from its top.
    copy.write_text(line(ts=10) + line(ts=11))
    os.replace(copy, feed)
    assert [row.ts for row in reader.read()] == [10.0, 11.0]


def test_truncation_keeping_the_beginning(tmp_path) -> None:
    feed = tmp_path / "clicks.jsonl"
    first = line(url="http://example.com/" + "a" * 80, ts=1)
    feed.write_text(first + line(ts=2) + line(ts=3))
    reader = ClickFeedReader(feed)
    assert len(reader.read()) == 3
    with open(feed, "r+b") as handle:  # shorter than what was read, same first bytes
        handle.truncate(len(first))
    append(feed, line(ts=4))
    assert [row.ts for row in reader.read()] == [1.0, 4.0]


def test_truncation_starts_over(tmp_path) -> None:
    feed = tmp_path / "clicks.jsonl"
    feed.write_text(line(ts=1) + line(ts=2))
    reader = ClickFeedReader(feed)
    assert len(reader.read()) == 2
    with open(feed, "r+b") as handle:  # same file, now shorter than what was read
        handle.truncate(0)
    append(feed, line(ts=3))
    assert [row.ts for row in reader.read()] == [3.0]
    with open(feed, "r+b") as handle:  # truncated and refilled past the offset in between
        handle.truncate(0)
    append(feed, line(ts=4) + line(ts=5) + line(ts=6))
    assert [row.ts for row in reader.read()] == [4.0, 5.0, 6.0]


def test_missing_file_and_unknown_suffix(tmp_path) -> None:
    assert ClickFeedReader(tmp_path / "later.jsonl").read() == []
    with pytest.raises(ValueError, match=r"clicks\.txt.*\.jsonl.*\.ndjson.*\.json.*\.csv"):
        ClickFeedReader(tmp_path / "clicks.txt")
    with pytest.raises(ValueError, match=r"clicks\.csv"):
        ClickFeedReader(tmp_path / "clicks.csv", fmt="xml")


def test_explicit_format_overrides_the_suffix(tmp_path) -> None:
    feed = tmp_path / "clicks.log"
    feed.write_text("url,ts,clicks\nhttp://example.com/a,1,1\n")
    assert len(ClickFeedReader(feed, fmt="csv").read()) == 1
    reader = ClickFeedReader(feed, fmt="jsonl")
    assert reader.read() == [] and reader.invalid == {"json": 2}


def test_state_resumes_without_duplicates(tmp_path) -> None:
    feed = tmp_path / "clicks.csv"
    feed.write_text("clicks,url,ts\n1,http://example.com/a,1\n9,http://exa")
    first = ClickFeedReader(feed)
    assert len(first.read()) == 1
    saved = json.loads(json.dumps(first.state()))
    append(feed, "mple.com/b,2\n")
    resumed = ClickFeedReader(feed)
    resumed.restore(saved)
    assert resumed.read() == [ClickRow("http://example.com/b", 2.0, 9.0)]  # header kept
    assert resumed.read() == []


def test_restore_after_rotation_or_truncation_starts_over(tmp_path) -> None:
    feed = tmp_path / "clicks.csv"
    feed.write_text("url,ts,clicks\nhttp://example.com/a,1,1\nhttp://example.com/b,2,1\n")
    first = ClickFeedReader(feed)
    first.read()
    saved = json.loads(json.dumps(first.state()))
    os.rename(feed, tmp_path / "old.csv")
    feed.write_text("url,ts,clicks\nhttp://example.com/c,3,1\n" + "x" * 100)
    again = ClickFeedReader(feed)
    again.restore(saved)
    assert [row.url for row in again.read()] == ["http://example.com/c"]
    saved = json.loads(json.dumps(again.state()))
    feed.write_text("url,ts,clicks\nhttp://example.com/d,4,1\n")  # same inode, smaller
    later = ClickFeedReader(feed)
    later.restore(saved)
    assert [row.url for row in later.read()] == ["http://example.com/d"]


@pytest.mark.parametrize(
    "damaged",
    [
        None,
        {"offset": "x"},
        {"offset": -1},
        {"head": "zz"},
        {"tail": "ab"},  # not a digest
        {"tail": None, "identity": [1, 2]},  # an earlier build's position: not read
    ],
)
def test_damaged_state_is_ignored_with_a_warning(tmp_path, caplog, damaged) -> None:
    feed = tmp_path / "clicks.jsonl"
    feed.write_text(line(ts=1))
    reader = ClickFeedReader(feed)
    state = ClickFeedReader(feed).state()  # whole: only what ``damaged`` changes is wrong
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        reader.restore({} if damaged is None else {**state, **damaged})
    assert len(caplog.records) == 1
    assert [row.ts for row in reader.read()] == [1.0]


def test_parse_click_rejects_with_a_kind() -> None:
    with pytest.raises(InvalidClickRow) as caught:
        parse_click(None, 1, None)
    assert caught.value.kind == "missing_field" and isinstance(caught.value, ValueError)
    assert "ts" not in str(caught.value) and "clicks" in str(caught.value)


timestamps = st.one_of(
    st.integers(0, 4 * 10**9),
    st.floats(0, 4e9, allow_nan=False),
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2100, 1, 1)).map(
        lambda moment: moment.isoformat() + "Z"
    ),
)
rows_strategy = st.lists(
    st.tuples(
        st.sampled_from(["a", "b?y=1&x=2", "c"]),
        timestamps,
        st.one_of(st.integers(0, 1000), st.floats(0, 1e6)),
        st.booleans(),
    ),
    min_size=1,
    max_size=30,
)


def chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at ``cuts`` (taken modulo its length + 1), in order; the last ends it."""
    ends = sorted({c % (len(data) + 1) for c in cuts} | {len(data)})
    return [data[start:end] for start, end in zip([0, *ends[:-1]], ends, strict=True)]


@given(rows=rows_strategy, cuts=st.lists(st.integers(0, 10**6), max_size=10))
def test_reading_in_chunks_gives_the_same_rows(tmp_path_factory, rows, cuts) -> None:
    text = "".join(
        line(f"http://example.com/{page}", ts, clicks) + ("\n" if blank else "")
        for page, ts, clicks, blank in rows
    )
    data = text.encode()
    folder = tmp_path_factory.mktemp("feed")
    (folder / "whole.jsonl").write_bytes(data)
    expected = ClickFeedReader(folder / "whole.jsonl").read()
    chunked = ClickFeedReader(folder / "chunks.jsonl")
    got = []
    for chunk in chunks(data, cuts):
        append(folder / "chunks.jsonl", chunk)
        got += chunked.read()
    assert got == expected
    assert len(got) == len(rows) == chunked.rows_read
    assert chunked.invalid == {}


@pytest.mark.parametrize(
    "ts", ["1970-01-01T00:01:00Z", "1970-01-01T00:01:00+0000", "1970-01-01T01:01:00+01:00"]
)
def test_every_offset_form_of_an_iso_timestamp(ts: str) -> None:
    assert parse_click("https://a.test/x", ts, 1).ts == 60.0
