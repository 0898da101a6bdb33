"""Click feed files: formats, bad rows, tailing, rotation, resuming."""

from __future__ import annotations

import json
import logging
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_echo.clickfeed import ClickFeedReader, ClickRow, InvalidClickRow, parse_click


def line(url: str = "http://example.com/a", ts: object = 60, clicks: object = 2) -> str:
    return json.dumps({"url": url, "ts": ts, "clicks": clicks}) + "\n"


def test_json_lines_rows_and_time_formats(tmp_path) -> None:
    feed = tmp_path / "clicks.jsonl"
    feed.write_text(
        line(ts=60)
        + line(ts=60.5, clicks=1.5)
        + line(ts="1970-01-01T00:02:00Z")
        + line(ts="1970-01-01T02:03:00+02:00")
        + line(ts="1970-01-01T00:04:00")
        + "\n"  # blank lines are ignored
    )
    rows = ClickFeedReader(feed).read()
    assert [row.ts for row in rows] == [60.0, 60.5, 120.0, 180.0, 240.0]
    assert rows[1].clicks == 1.5


def test_csv_rows_any_column_order(tmp_path) -> None:
    feed = tmp_path / "clicks.csv"
    feed.write_text(
        "clicks,extra,url,ts\n3,x,http://example.com/a,60\n1,y,http://example.com/b,70\n"
    )
    rows = ClickFeedReader(feed).read()
    assert rows == [
        ClickRow("http://example.com/a", 60.0, 3.0),
        ClickRow("http://example.com/b", 70.0, 1.0),
    ]


def test_urls_are_canonical() -> None:
    row = parse_click("http://Example.com/a?b=2&a=1#frag", 1, 1)
    assert row.url == "http://example.com/a?a=1&b=2"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("{nope\n", "json"),
        ("[1, 2]\n", "not_object"),
        (json.dumps({"url": "http://example.com/a", "ts": 1}) + "\n", "missing_field"),
        (line(url="ftp://example.com/a"), "bad_url"),
        (line(url="/relative"), "bad_url"),
        (line(ts="yesterday"), "bad_ts"),
        (line(ts=True), "bad_ts"),
        (json.dumps({"url": "http://e.com/", "ts": 1, "clicks": 1e400}) + "\n", "bad_clicks"),
        (line(clicks=-1), "bad_clicks"),
        (line(clicks="many"), "bad_clicks"),
    ],
)
def test_each_bad_row_kind_is_counted(tmp_path, text, kind) -> None:
    feed = tmp_path / "clicks.jsonl"
    feed.write_text(line() + text + line())
    reader = ClickFeedReader(feed)
    assert len(reader.read()) == 2  # the good rows around it are kept
    assert reader.invalid == {kind: 1}


def test_undecodable_lines_and_bad_csv_header(tmp_path) -> None:
    feed = tmp_path / "clicks.jsonl"
    feed.write_bytes(b"\xff\xfe\n" + line().encode())
    reader = ClickFeedReader(feed)
    assert len(reader.read()) == 1 and reader.invalid == {"encoding": 1}
    csv_feed = tmp_path / "clicks.csv"
    csv_feed.write_text("page,when,n\nhttp://example.com/a,1,1\nhttp://example.com/b,1,1\n")
    reader = ClickFeedReader(csv_feed)
    assert reader.read() == [] and reader.invalid == {"csv_columns": 2}


def test_first_bad_row_of_each_kind_is_logged_once(tmp_path, caplog) -> None:
    feed = tmp_path / "clicks.jsonl"
    feed.write_text("{bad\n{bad\n" + line(clicks=-1) + line(clicks=-2))
    with caplog.at_level(logging.WARNING, logger="scrapy_echo.clickfeed"):
        reader = ClickFeedReader(feed)
        reader.read()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "line 1" in messages[0] and "clicks.jsonl" in messages[0]
    assert reader.invalid == {"json": 2, "bad_clicks": 2}


def test_a_line_still_being_written_waits(tmp_path) -> None:
    feed = tmp_path / "clicks.jsonl"
    whole = line(ts=1)
    feed.write_text(line(ts=0) + whole[:10])
    reader = ClickFeedReader(feed)
    assert [row.ts for row in reader.read()] == [0.0]
    assert reader.read() == []
    with open(feed, "a") as handle:
        handle.write(whole[10:] + line(ts=2))
    assert [row.ts for row in reader.read()] == [1.0, 2.0]
    assert reader.invalid == {}


def test_rotation_and_truncation_start_over(tmp_path) -> None:
    feed = tmp_path / "clicks.jsonl"
    feed.write_text(line(ts=1) + line(ts=2))
    reader = ClickFeedReader(feed)
    assert len(reader.read()) == 2
    os.rename(feed, tmp_path / "clicks.jsonl.1")  # logrotate: move away, start a new file
    feed.write_text(line(ts=3))
    assert [row.ts for row in reader.read()] == [3.0]
    feed.write_text("")  # truncated in place
    with open(feed, "a") as handle:
        handle.write(line(ts=4))
    assert [row.ts for row in reader.read()] == [4.0]


def test_missing_file_and_unknown_suffix(tmp_path) -> None:
    assert ClickFeedReader(tmp_path / "later.jsonl").read() == []
    with pytest.raises(ValueError, match=r"clicks\.txt"):
        ClickFeedReader(tmp_path / "clicks.txt")


def test_state_resumes_without_duplicates_and_after_rotation(tmp_path) -> None:
    feed = tmp_path / "clicks.csv"
    feed.write_text("url,ts,clicks\nhttp://example.com/a,1,1\n")
    first = ClickFeedReader(feed)
    assert len(first.read()) == 1
    saved = json.loads(json.dumps(first.state()))
    with open(feed, "a") as handle:
        handle.write("http://example.com/b,2,1\n")
    resumed = ClickFeedReader(feed)
    resumed.restore(saved)
    assert [row.url for row in resumed.read()] == ["http://example.com/b"]
    os.rename(feed, tmp_path / "old.csv")
    feed.write_text("url,ts,clicks\nhttp://example.com/c,3,1\n")
    again = ClickFeedReader(feed)
    again.restore(saved)
    assert [row.url for row in again.read()] == ["http://example.com/c"]


def test_parse_click_rejects_with_a_kind() -> None:
    with pytest.raises(InvalidClickRow) as caught:
        parse_click(None, 1, 1)
    assert caught.value.kind == "missing_field"


rows_strategy = st.lists(
    st.tuples(st.integers(0, 10**9), st.integers(0, 1000), st.sampled_from("abc")),
    min_size=1,
    max_size=30,
)


@settings(max_examples=50, deadline=None)
@given(rows=rows_strategy, cuts=st.lists(st.integers(0, 10**6), max_size=8))
def test_reading_in_chunks_gives_the_same_rows(tmp_path_factory, rows, cuts) -> None:
    text = "".join(line(f"http://example.com/{page}", ts, clicks) for ts, clicks, page in rows)
    data = text.encode()
    folder = tmp_path_factory.mktemp("feed")
    whole = ClickFeedReader(folder / "whole.jsonl")
    (folder / "whole.jsonl").write_bytes(data)
    expected = whole.read()
    chunked = ClickFeedReader(folder / "chunks.jsonl")
    got = []
    positions = sorted({c % (len(data) + 1) for c in cuts} | {len(data)})
    start = 0
    for end in positions:
        with open(folder / "chunks.jsonl", "ab") as handle:
            handle.write(data[start:end])
        start = end
        got += chunked.read()
    assert got == expected
    assert len(got) == len(rows)
